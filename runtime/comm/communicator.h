// The backend-neutral collective interface. All gradient traffic goes through it; MPI and NCCL
// implementations hide behind it, so the reducer and trainer never see a backend type.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>
#include <string>

#include "runtime/util/error.h"

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

// The collectives are non-virtual fronts: they check what every backend needs (contiguous tensors, an
// average only of floating-point values, a root among the ranks), with this rank's origin in the
// message, then call the backend's implementation, which checks only what is its own (device, dtype).
class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string backend_name() const = 0;

  // True where kAverage costs nothing over kSum: the division happens inside the reduction (NCCL's
  // ncclAvg). Elsewhere kAverage is a sum and then one more pass over the result, after completion; a
  // caller that touches the values anyway can fold the division into that and sum instead (the reducer
  // divides each gradient in its hook, while it is still in cache, as PyTorch DDP does).
  virtual bool averages_in_reduction() const { return false; }

  // Collective: all ranks, same order, same shape and dtype. Starts an in-place reduction of a contiguous
  // tensor (float, double, bfloat16, half, int32, int64) and returns at once; the tensor must not be
  // touched until wait(). Every backend takes CPU tensors; CUDA tensors go to NCCL, or via host memory.
  // kAverage divides by world_size (floating types only).
  std::unique_ptr<Work> allreduce_async(at::Tensor tensor, ReduceOp op);

  // Collective, blocking: replaces `tensor` on every rank with root's contents (same shape everywhere).
  void broadcast(at::Tensor& tensor, int root);

  // Collective, blocking: every rank's `parts` (each rank passes as many) become root's, byte for byte;
  // two broadcasts, the lengths and then all bytes in one piece (a checkpoint's file, a profile).
  void broadcast_bytes(std::vector<std::string>& parts, int root);

  // Collective, blocking, for small values: stacks every rank's `tensor` (same shape everywhere, any
  // layout) into a new tensor of shape [world_size, ...], indexed by rank.
  at::Tensor allgather(const at::Tensor& tensor);

  // Point to point, blocking: sends `send` to rank `peer` and receives peer's tensor of the same shape
  // and dtype into `recv` (contiguous, its own storage). Both ranks call it naming each other; a pairwise
  // step of a reduction whose order the caller fixes (the deterministic reducer's tree).
  void exchange(const at::Tensor& send, at::Tensor& recv, int peer);

  // Collective, blocking.
  virtual void barrier() = 0;

  // Collective, blocking: allreduce_async(tensor, op)->wait().
  void allreduce(at::Tensor& tensor, ReduceOp op) { allreduce_async(tensor, op)->wait(); }

  bool is_root() const { return rank() == 0; }

 protected:
  // The backend's collectives, called with arguments the fronts checked (allgather's tensor contiguous).
  virtual std::unique_ptr<Work> allreduce_checked(at::Tensor tensor, ReduceOp op) = 0;
  virtual void broadcast_checked(at::Tensor& tensor, int root) = 0;
  virtual at::Tensor allgather_checked(const at::Tensor& tensor) = 0;
  virtual void exchange_checked(const at::Tensor& send, at::Tensor& recv, int peer) = 0;
  // This rank as the backend's errors name it (rank, world size, host).
  virtual ErrorOrigin error_origin() const = 0;
};

}  // namespace dtrain
