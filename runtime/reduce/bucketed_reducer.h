// DDP-style gradient averaging: gradients live in per-bucket flat buffers (each .grad is a view into
// its bucket), a bucket's allreduce starts from an autograd hook as soon as all its gradients are
// accumulated, overlapping the rest of backward, and buckets launch in the same order on every rank.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/reduce/bucket_assignment.h"
#include "runtime/reduce/grad_reducer.h"
#include "runtime/util/timer.h"

namespace torch::autograd {
struct Node;
}

namespace dtrain {

struct ReducerOptions {
  BucketOptions buckets;
  // Send fp32 buckets as bf16 (half the bytes; gradients keep 8 bits of mantissa on the wire). The
  // bf16 sum (of gradients already divided by the world size, except under NCCL, which averages in bf16)
  // is written back into the fp32 gradients.
  bool compress_bf16 = false;
};

class BucketedReducer final : public GradReducer {
 public:
  // Collective: broadcasts `params` and `buffers` from rank 0 so every replica starts identical, then
  // installs the gradient views and hooks. The reducer must not outlive the parameters.
  BucketedReducer(std::vector<at::Tensor> params, const std::vector<at::Tensor>& buffers, Communicator& comm,
                  const ReducerOptions& options);
  ~BucketedReducer() override;
  BucketedReducer(const BucketedReducer&) = delete;
  BucketedReducer& operator=(const BucketedReducer&) = delete;

  void prepare_backward(bool sync) override;
  StepCommStats finish_backward() override;
  void sync_buffers() override;
  void zero_grad() override;
  at::Tensor all_finite() const override;
  std::vector<int64_t> bucket_bytes() const override;

  const std::vector<BucketSpec>& buckets() const { return specs_; }

  // Called by the autograd post-hook of parameter `index` once its gradient is accumulated.
  void mark_grad_ready(size_t index);

 private:
  void divide(size_t index);  // averages parameter `index`'s gradient where the backend only sums
  void launch_ready_buckets();
  void launch(size_t bucket);
  void poll_in_flight();

  std::vector<at::Tensor> params_;
  std::vector<at::Tensor> float_buffers_;  // the buffers sync_buffers() broadcasts (integer counters are equal anyway)
  Communicator& comm_;
  const bool divide_in_hooks_;  // the backend does not average inside the reduction
  const ReduceOp bucket_op_;    // kSum where the hooks divide, else kAverage
  std::vector<BucketSpec> specs_;
  std::vector<at::Tensor> buffers_;       // one flat gradient buffer per bucket
  std::vector<at::Tensor> wire_;          // per bucket: its bf16 copy when compressing, else undefined
  std::vector<size_t> bucket_of_param_;
  std::vector<const void*> grad_ptrs_;    // where each .grad must point; detects replaced gradients
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hook_keys_;

  // Per-backward state.
  bool prepared_ = false;
  bool sync_ = false;
  std::vector<size_t> pending_;           // gradients still missing per bucket
  std::vector<bool> param_seen_;
  size_t next_launch_ = 0;
  std::vector<std::unique_ptr<Work>> works_;
  size_t first_unfinished_ = 0;
  Stopwatch since_first_launch_;
};

}  // namespace dtrain
