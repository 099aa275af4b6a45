#include "runtime/train/non_finite.h"

#include <cmath>
#include <vector>

#include "runtime/util/strings.h"

namespace dtrain {

NonFiniteError non_finite_error(const TrainConfig& config, int64_t epoch, int64_t first_step, int64_t last_step,
                                const std::string& what, const std::string& resumed_from) {
  std::string where = "epoch " + std::to_string(epoch);
  if (first_step > 0) {
    where += first_step == last_step ? ", step " + std::to_string(first_step)
                                     : ", steps " + std::to_string(first_step) + "-" + std::to_string(last_step);
  }
  std::string advice = "Lower the learning rate (" + format_number(config.train.lr) + ")";
  if (first_step == 0) {
    // The evaluation: skipping training steps would not change it.
    advice = "Train more steps before the evaluation, or lower the learning rate (" + format_number(config.train.lr) + ")";
  } else if (config.train.on_nonfinite == NonFinitePolicy::kStop) {
    advice += " or skip such steps with --on-nonfinite skip-step";
  }
  if (!resumed_from.empty()) {
    // The state this epoch started from came from that file: resuming it again may well meet the same.
    advice += ", then --resume from " + resumed_from + " again; if that fails alike, the state it holds is the "
              "cause: move it out of '" + config.checkpoint.dir + "' so that --resume takes the one before it, or "
              "start afresh";
  } else if (config.checkpoint.enabled && epoch > 1) {
    // This run checkpointed an earlier point (an epoch's end, or a step of this one): --resume goes on there.
    advice += ", then --resume from the newest checkpoint in '" + config.checkpoint.dir + "'";
  }
  return NonFiniteError(where + ": " + what + " (train.on_nonfinite: " + to_string(config.train.on_nonfinite) +
                        "); no checkpoint was written for this epoch. " + advice);
}

std::string non_finite_metrics(const char* split, const MetricValues& values, bool with_verb) {
  std::vector<std::string> bad;
  for (const MetricValue& m : values.all()) {
    if (!std::isfinite(m.sum)) bad.push_back(m.name);
  }
  if (bad.size() == 1) return std::string(split) + " " + bad.front() + (with_verb ? " is" : "");
  return std::string(split) + " metrics " + join(bad) + (with_verb ? " are" : "");
}

std::string skipped_steps_note(int64_t epoch, int64_t skipped_steps, int64_t steps, const LossScaler* scaler) {
  if (scaler != nullptr && scaler->skipped_steps() > 0) {
    return "fp16: " + std::to_string(scaler->skipped_steps()) +
           " optimizer steps skipped so far for inf/NaN gradients; loss scale now " +
           std::to_string(scaler->current_scale());
  }
  if (skipped_steps > 0) {
    return "epoch " + std::to_string(epoch) + ": " + std::to_string(skipped_steps) + " of " + std::to_string(steps) +
           " optimizer steps skipped for a NaN or infinite loss or gradient (train.on_nonfinite: skip-step)";
  }
  return "";
}

std::optional<EpochFiguresProblem> epoch_figures_problem(const MetricValues& train, const MetricValues& test,
                                                         int64_t train_samples, int64_t steps, int64_t batch_size,
                                                         bool running_statistics) {
  if (train_samples == 0) {
    return EpochFiguresProblem{"every optimizer step had a NaN or infinite loss or gradient and was skipped; skipping "
                               "cannot recover from this",
                               1, steps};
  }
  if (!train.all_finite()) {
    return EpochFiguresProblem{"the " + non_finite_metrics("training", train, true) + " NaN or infinite", 1, steps};
  }
  if (test.all_finite()) return std::nullopt;
  std::string what = "evaluation after the epoch gave a NaN or infinite " + non_finite_metrics("test", test, false);
  if (running_statistics) {
    // Training normalises each batch by its own statistics, evaluation by the running ones: after few or
    // tiny batches (small images make 1x1 maps) those do not describe the data yet.
    what += ", while training's stayed finite: evaluation normalises with the BatchNorm layers' running statistics, "
            "which after " + std::to_string(steps) + " training step(s) of " + std::to_string(batch_size) +
            " samples per rank may not describe the data yet (or the test data holds NaN or infinite values)";
  }
  return EpochFiguresProblem{what, 0, 0};
}

bool has_running_statistics(const std::vector<TrainedModule>& modules) {
  for (const TrainedModule& m : modules) {
    for (const auto& buffer : m.module->named_buffers()) {
      const std::string& name = buffer.key();
      if (name.size() >= 11 && name.compare(name.size() - 11, 11, "running_var") == 0) return true;
    }
  }
  return false;
}

}  // namespace dtrain
