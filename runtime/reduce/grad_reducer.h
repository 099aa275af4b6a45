// The gradient reducer interface: what the trainer needs to make gradients equal on every rank.
// The reducer owns the gradient tensors of the parameters it was given.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace dtrain {

struct StepCommStats {
  int64_t bytes_reduced = 0;    // payload of the allreduces this step
  double comm_s = 0.0;          // from the first bucket's launch until every bucket had completed
  double exposed_comm_s = 0.0;  // part of comm_s after backward returned: communication backward did not hide
  double wait_cpu_s = 0.0;      // CPU the process used during exposed_comm_s (all threads: polling, the library's work)
  int64_t buckets = 0;
};

class GradReducer {
 public:
  virtual ~GradReducer() = default;

  // Local. Call before every backward. With sync == false (gradient accumulation micro-steps) gradients
  // only accumulate locally; with sync == true buckets are allreduced as their gradients become ready.
  virtual void prepare_backward(bool sync) = 0;

  // Collective when the backward was prepared with sync == true: waits for every bucket, leaving each
  // parameter's .grad equal to the average over ranks. Throws CommError on backend failure or timeout.
  virtual StepCommStats finish_backward() = 0;

  // Collective: copies rank 0's floating-point buffers (BatchNorm running statistics) to every rank,
  // what PyTorch DDP does before each forward (broadcast_buffers=True). The trainer calls it before
  // each optimizer step's first forward and before evaluation, so every rank evaluates, and rank 0
  // checkpoints, the same model. Costs nothing for modules without such buffers or on one rank.
  virtual void sync_buffers() = 0;

  // Local: zeroes every gradient (in place; the reducer's gradient storage stays put).
  virtual void zero_grad() = 0;

  // Local, no host synchronisation: a 0-dim bool tensor on the gradients' device, true when every
  // gradient is finite. After a synchronising finish_backward() the gradients are the average over
  // ranks, so every rank gets the same answer: a NaN or inf on any rank reaches all of them.
  virtual at::Tensor all_finite() const = 0;

  // Local: the bytes of each bucket of gradients, in the order they are sent (for the run log).
  virtual std::vector<int64_t> bucket_bytes() const = 0;
};

}  // namespace dtrain
