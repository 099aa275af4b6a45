// Rank 0's TensorBoard event files, beside the run log in the run directory's tensorboard/ folder, so that
// `tensorboard --logdir <run dir or study>` shows a run's curves while it trains. The same values as the run
// log's records, as they are written (docs/usage.md, "Watching a run in TensorBoard", lists the tags):
//   tensorboard/             train/<metric> and train/samples_per_s per Train Epoch line; epoch/<figure> per
//                            epoch (every reduced metric, time, rate, TFLOP/s, MFU, communication); samples/grid
//                            images (a GAN's sample grids)
//   tensorboard/rank<r>/     resources/<figure> of rank r's resource samples: one TensorBoard run per rank, so
//                            that a chart overlays the ranks
// The step of train/, epoch/ and samples/ values is the run's global training samples, (epoch - 1) x the
// dataset's size + the samples of the epoch done: it does not depend on the world size or the batch, so
// curves of runs at different scales line up, and a resumed run continues it (its redone steps replace the
// interrupted run's in TensorBoard's reader). A resource sample's step is the milliseconds from the run's
// first start to the sample: from the Unix second in the name of tensorboard/'s oldest event file, so that
// a resumed run's samples follow the earlier ones.
// Each process writes its own files (events.out.tfevents.<time>.<host>.<pid>...); a resumed run adds one.
// Not thread-safe: the RunLogger calls it with its mutex held.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/log/run_events.h"
#include "runtime/util/directory.h"

namespace dtrain {

class TensorBoardWriter final {
 public:
  // Creates the first event file in `dir` (rank<N>/ subdirectories of it for each rank's resource
  // samples). `train_samples` is the dataset's size (the samples of a whole epoch, all ranks). Throws
  // IoError.
  TensorBoardWriter(Directory dir, int64_t train_samples);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // The step of TensorBoard values for `samples_done` global samples into `epoch`.
  int64_t global_step(int64_t epoch, int64_t samples_done) const;

  void train_progress(const ProgressInfo& progress);
  void epoch_end(const EpochStats& stats);
  void resource_samples(int rank, const std::vector<ResourceSample>& samples);
  // PNG files written for `epoch` (a GAN's sample grids), as images at the epoch's end. Throws IoError for a
  // file that cannot be read or is not a PNG.
  void images(int64_t epoch, const std::vector<std::string>& png_paths);

  const std::string& dir() const { return dir_; }

 private:
  class EventFile;
  EventFile& rank_file(int rank);

  Directory directory_;
  std::string dir_;
  int64_t train_samples_;
  int64_t origin_ms_;  // the run's first start (see above), Unix milliseconds
  std::unique_ptr<EventFile> main_;
  std::map<int, std::unique_ptr<EventFile>> ranks_;
};

}  // namespace dtrain
