// Samples that could not be read (--skip-bad-images, Batch::bad_samples): each rank warns about each file
// the first time it meets it and counts every occurrence; the epoch's counts of all ranks are reduced
// with its metrics (Trainer::settle_figures) and said once, by rank 0.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "runtime/data/dataset.h"
#include "runtime/log/run_logger.h"

namespace dtrain {

class BadSamples final {
 public:
  BadSamples(RunLogger& logger, int rank) : logger_(logger), rank_(rank) {}

  // Counts `batch`'s unreadable samples towards the epoch's and warns about each file not named before.
  // `step` > 0: a training step (the sample was replaced by another of the batch); 0: the evaluation
  // (left out).
  void note(const Batch& batch, int64_t epoch, int64_t step);
  // This rank's count in the current epoch; begin_epoch() starts it again.
  int64_t epoch_count() const { return epoch_count_; }
  void begin_epoch() { epoch_count_ = 0; }
  // The warning for `count` (> 0) samples of all ranks in epoch `epoch`.
  static std::string epoch_warning(int64_t epoch, int64_t count);

 private:
  RunLogger& logger_;
  int rank_;
  int64_t epoch_count_ = 0;
  std::set<std::string> reported_;  // what note() warned about, once each
};

}  // namespace dtrain
