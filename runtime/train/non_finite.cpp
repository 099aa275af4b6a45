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

}  // namespace dtrain
