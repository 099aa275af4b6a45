// What the training loop reads: a dataset hands out the samples at given indices as model-ready batches
// on the training device. In-memory datasets (TensorDataset) gather them with one index_select; image
// files (ImageFileDataset) are decoded and augmented by worker threads ahead of the step.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dtrain {

// A batch of samples, on the training device, with model-ready inputs.
struct Batch {
  at::Tensor inputs;
  at::Tensor targets;  // int64 class indices (or whatever the workload's step expects)
  int64_t size = 0;    // samples
  // The dataset indices of the samples, on the host: draws that belong to a sample rather than to a rank
  // (a GAN's latent vectors) are made from them, so any split of a batch over ranks draws the same.
  std::vector<int64_t> indices;
  // Samples of this batch that could not be read, one line each naming the file and what is wrong with
  // it, where the dataset skips bad files (ImageFileOptions::skip_bad): in training each was replaced by
  // another sample of the batch (`size` is kept), in evaluation left out (`size` and `indices` count
  // only the samples read). The loop reports them.
  std::vector<std::string> bad_samples;
};

// The batches of one pass, in order.
class BatchStream {
 public:
  virtual ~BatchStream() = default;
  // The next batch; false after the last. Throws DataError for data that cannot be read.
  virtual bool next(Batch& batch) = 0;
};

class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual int64_t size() const = 0;

  // Local. Where batches are wanted from now on; an in-memory dataset moves itself there once, so that
  // batches are gathered on the device with no per-batch host copy.
  virtual void to(c10::Device device) = 0;

  // The samples `indices`, `batch_size` at a time (the last batch may be smaller). With
  // `augment_seed`, the training transforms the dataset defines (random crops, flips) are applied,
  // drawn deterministically from (augment_seed, sample index): the same sample gets the same transform
  // whichever rank or batch position reads it.
  virtual std::unique_ptr<BatchStream> stream(std::vector<int64_t> indices, int64_t batch_size,
                                              std::optional<uint64_t> augment_seed) const = 0;
};

}  // namespace dtrain
