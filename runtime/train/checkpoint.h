// Per-epoch checkpoints that do not depend on world size: model, optimizer state, epoch and seed.
// Rank 0 writes them atomically (temporary file, fsync, rename); a restore reads the newest one on rank 0
// and broadcasts its bytes, so every rank loads identical state whatever its filesystem sees.
#pragma once

#include <optional>
#include <string>

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include "runtime/comm/communicator.h"
#include "runtime/config/config.h"

namespace dtrain {

struct CheckpointMeta {
  int64_t epoch = 0;  // last completed epoch
  int64_t seed = 0;
  std::string workload;
  std::string optimizer;
  int64_t world_size = 0;  // informational: a checkpoint resumes at any world size
};

class Checkpointer final {
 public:
  Checkpointer(CheckpointOptions options, Communicator& comm);

  // Rank 0 writes <dir>/checkpoint-epoch-NNNNNN.pt and prunes to `keep`; returns its path ("" on other
  // ranks). Throws DataError if the file cannot be written; an existing checkpoint is never damaged.
  std::string save(const CheckpointMeta& meta, const torch::nn::Module& model,
                   const torch::optim::Optimizer& optimizer) const;

  // Collective. Loads the newest checkpoint of <dir> into `model` and `optimizer` on every rank and
  // returns its metadata, or nullopt if the directory holds none. Throws DataError (the same on every
  // rank) for an unreadable or mismatched checkpoint.
  std::optional<CheckpointMeta> restore(torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                                        const std::string& workload, const std::string& optimizer_name) const;

  // Path of the newest checkpoint in `dir`, if any.
  static std::optional<std::string> latest(const std::string& dir);

 private:
  CheckpointOptions options_;
  Communicator& comm_;
};

}  // namespace dtrain
