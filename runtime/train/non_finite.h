// What the training loop says about NaN and infinite values: the error that stops a run, with where it
// happened and what to do, and the note about skipped steps (docs/failures.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/config/config.h"
#include "runtime/log/metric_values.h"
#include "runtime/train/loss_scaler.h"
#include "runtime/train/train_state.h"
#include "runtime/util/error.h"

namespace dtrain {

// "epoch 3, steps 10-20: <what> (train.on_nonfinite: stop); no checkpoint was written for this epoch.
// Lower the learning rate (0.1) ..., then --resume from the newest checkpoint in '<dir>'".
// first_step 0: no step (the evaluation). `resumed_from`: the checkpoint this run resumed from in this
// epoch ("" when it did not): resuming it again may meet the same values, so the advice says what else.
NonFiniteError non_finite_error(const TrainConfig& config, int64_t epoch, int64_t first_step, int64_t last_step,
                                const std::string& what, const std::string& resumed_from = "");

// "training loss is", "training metrics d_loss, g_loss are": which of `values` are not finite.
std::string non_finite_metrics(const char* split, const MetricValues& values, bool with_verb);

// The console note after an epoch with skipped optimizer steps (fp16's `scaler`, else skip-step), or ""
// when none were skipped.
std::string skipped_steps_note(int64_t epoch, int64_t skipped_steps, int64_t steps, const LossScaler* scaler);

// Why an epoch's figures, reduced over all ranks, cannot stand: every optimizer step was skipped
// (`train_samples` 0), or a training or test metric is NaN or infinite.
struct EpochFiguresProblem {
  std::string what;
  int64_t first_step = 0;  // the steps it concerns (0: the evaluation)
  int64_t last_step = 0;
};
// None when the figures stand. `steps` of `batch_size` samples per rank were trained; with
// `running_statistics` (has_running_statistics) a non-finite test metric says what BatchNorm's running
// statistics may have to do with it.
std::optional<EpochFiguresProblem> epoch_figures_problem(const MetricValues& train, const MetricValues& test,
                                                         int64_t train_samples, int64_t steps, int64_t batch_size,
                                                         bool running_statistics);

// Whether a module normalises with running statistics in evaluation (BatchNorm's running_var buffers).
bool has_running_statistics(const std::vector<TrainedModule>& modules);

}  // namespace dtrain
