// What the training loop says about NaN and infinite values: the error that stops a run, with where it
// happened and what to do, and the note about skipped steps (docs/failures.md).
#pragma once

#include <cstdint>
#include <string>

#include "runtime/config/config.h"
#include "runtime/log/metric_values.h"
#include "runtime/train/loss_scaler.h"
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

}  // namespace dtrain
