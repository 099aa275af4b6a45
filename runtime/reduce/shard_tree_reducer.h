// Gradients that are the same bits at every world size (train.deterministic). The global batch is split
// into S shards, S a power of two: shard s holds the samples at the global batch's positions p with
// p mod S == s. Of W ranks (W a power of two dividing S), rank r computes the shards whose low log2(W) bits
// are r, one backward pass each, from zeroed gradients, so a shard's gradient does not depend on which rank
// computes it. The shards' gradients are then summed in one binary tree over shard indices: the node of
// the shards sharing their low L bits, x, adds the node of those whose bit L is 0 to the node of those
// whose bit L is 1 (leaves: single shards). Rank r's shards are exactly the node (r, log2 W), so each rank
// sums its own subtree first (shard_order() gives the order of its passes that makes this a running sum
// with log2(S/W) + 1 partial sums held), then the ranks complete the tree by recursive doubling: for L =
// log2 W - 1 down to 0 the partners r and r ^ 2^L swap their partial sums and add them. Floating-point
// addition is commutative, so both partners hold the same bits; the association is the tree's at every
// world size, so the result is too.
// BatchNorm running statistics follow the same tree: each shard's forward starts from the step's
// statistics, and the step ends with the mean over shards of what the forwards left (integer buffers,
// the batch counters, advance once). No communication overlaps backward: the exchange runs after the
// rank's last pass.
// Where every rank trains every shard (a workload whose passes compute their whole input: one shard, the
// whole global batch, on each rank; runtime/train/batch_plan.h) the shards are shared by 1 rank, whatever
// the world size, and nothing is exchanged: each rank already holds the whole tree.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/reduce/grad_reducer.h"

namespace dtrain {

// Throws ConfigError, the same on every rank, unless `ranks` is a power of two that divides `shards`:
// the only world sizes whose ranks each hold one subtree of the shards' tree.
void check_shard_split(int64_t shards, int ranks);

// The order in which a rank runs its `shards_per_rank` shards (its local shard m is the global shard
// r + W*m): bit-reversed m, so that adding each finished pass to a stack of partial sums builds the tree
// above. `shards_per_rank` must be a power of two.
std::vector<int64_t> shard_order(int64_t shards_per_rank);

class ShardTreeReducer final : public GradReducer {
 public:
  // Collective: broadcasts `params` and `buffers` from rank 0, then makes every .grad a view into one flat
  // buffer. The `shards` (S) are shared by `sharing_ranks` ranks: the world size, or 1 where every rank
  // trains all of them. S must be a power of two that sharing_ranks, also a power of two, divides; throws
  // ConfigError otherwise. Parameters must be float32 on the CPU.
  ShardTreeReducer(std::vector<at::Tensor> params, std::vector<at::Tensor> buffers, Communicator& comm,
                   int64_t shards, int sharing_ranks);

  // One pass per shard of this rank, in shard_order(); sync on the last. Points every .grad at a zeroed
  // buffer of the pass's own.
  void prepare_backward(bool sync) override;
  // Adds the pass's gradients (weighted by the loss, as TrainState weights it) and what its forward left in
  // the buffers to the running sum, and puts the step's statistics back for the next shard's forward;
  // after the last pass, sums over the ranks (collective) and leaves the sum in every .grad.
  StepCommStats finish_backward() override;
  // Local: takes the buffers as the statistics the next step's shards start from (the trainer calls it
  // before each step, as GradReducer says). The ranks' buffers are equal by construction: nothing is sent.
  void sync_buffers() override;
  void zero_grad() override;
  at::Tensor all_finite() const override;
  std::vector<int64_t> bucket_bytes() const override;

  int64_t shards_per_rank() const { return shards_per_rank_; }

 private:
  // A partial sum is one flat tensor, [gradients | float buffers]. A pass's own: its gradients accumulate
  // straight into a zeroed one (each .grad a view into it), and the root of the tree becomes the .grad
  // storage the optimizer steps on, so no pass copies the model's gradients; the flat tensors are reused
  // from step to step (freed ones would be returned to the kernel and faulted in again).
  at::Tensor take_flat();
  void point_grads_at(const at::Tensor& flat);
  void push(at::Tensor leaf);
  void reduce_over_ranks(at::Tensor& sum, StepCommStats& stats);

  std::vector<at::Tensor> params_;
  std::vector<at::Tensor> float_buffers_;
  std::vector<at::Tensor> int_buffers_;
  Communicator& comm_;
  const int64_t shards_;
  const int sharing_ranks_;
  int64_t shards_per_rank_ = 1;
  int64_t grad_numel_ = 0;
  int64_t flat_numel_ = 0;
  at::Tensor grads_;     // the flat tensor every .grad is a view into between steps: the last step's root
  at::Tensor pass_;      // the flat tensor the current pass's gradients accumulate into
  at::Tensor received_;  // the partner's partial sum in an exchange
  std::vector<at::Tensor> free_;          // flat tensors to reuse
  std::vector<at::Tensor> snapshot_;      // the step's float buffers, what each shard's forward starts from
  std::vector<at::Tensor> int_snapshot_;  // and its integer buffers

  // Per step.
  bool prepared_ = false;
  bool sync_ = false;
  int64_t passes_ = 0;
  std::vector<std::pair<int, at::Tensor>> stack_;  // (tree level, partial sum), levels decreasing
};

}  // namespace dtrain
