// The backend-neutral collective interface. All gradient traffic goes through it; MPI and NCCL
// implementations hide behind it, so the reducer and trainer never see a backend type.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>

namespace dtrain {

enum class ReduceOp { kSum, kAverage };

// An in-flight collective. Owned by the caller; keeps its tensor alive until completion.
class Work {
 public:
  virtual ~Work() = default;
  // Local, non-blocking: true once the result is in the tensor. Also drives the backend's progress.
  virtual bool is_completed() = 0;
  // Makes the result visible to the caller and rethrows the backend's error as CommError. Host
  // backends (MPI) block until done or comm.timeout_s passes; for CUDA tensors under NCCL, later work on
  // the caller's current CUDA stream is ordered after the collective and the host does not wait.
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string backend_name() const = 0;

  // Collective: all ranks, same order, same shape and dtype. Starts an in-place reduction of a contiguous
  // tensor (float, double, bfloat16, half, int32, int64) and returns at once; the tensor must not be
  // touched until wait(). Every backend takes CPU tensors; CUDA tensors go to NCCL, or via host memory.
  // kAverage divides by world_size (floating types only).
  virtual std::unique_ptr<Work> allreduce_async(at::Tensor tensor, ReduceOp op) = 0;

  // Collective, blocking: replaces `tensor` on every rank with root's contents (same shape everywhere).
  virtual void broadcast(at::Tensor& tensor, int root) = 0;

  // Collective, blocking, for small values: stacks every rank's `tensor` (same shape everywhere) into a new
  // tensor of shape [world_size, ...], indexed by rank.
  virtual at::Tensor allgather(const at::Tensor& tensor) = 0;

  // Collective, blocking.
  virtual void barrier() = 0;

  // Collective, blocking: allreduce_async(tensor, op)->wait().
  void allreduce(at::Tensor& tensor, ReduceOp op) { allreduce_async(tensor, op)->wait(); }

  bool is_root() const { return rank() == 0; }
};

}  // namespace dtrain
