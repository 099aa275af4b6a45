// Collectives over NCCL on CUDA tensors, one GPU per rank. Rank 0 creates the NCCL id and the session
// (MPI, or the c10d store under torchrun) carries it to the others. Collectives run on a dedicated
// stream, ordered against the caller's compute stream with CUDA events, so the training step never
// waits on the host. CPU tensors (metrics, small host values) go over the host communicator when there
// is one (MPI), else through the GPU. A watchdog thread aborts the NCCL communicator when a collective
// outlives comm.timeout_s or NCCL reports an asynchronous error, so peers fail instead of hanging.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "runtime/bootstrap/session.h"
#include "runtime/bootstrap/wait_options.h"
#include "runtime/comm/communicator.h"
#include "runtime/util/error.h"

namespace dtrain {
namespace detail {
struct NcclState;  // the NCCL communicator, streams, events and watchdog; defined in the .cpp
}

struct NcclOptions {
  int device = 0;            // CUDA device index of this rank (see assign_gpu)
  // Bounds every collective and the communicator's creation (wait.timeout_s); a timeout's message ends
  // with wait.explain_stall(). Host waits (CPU tensors over MPI) are marked on wait.activity.
  WaitOptions wait;
  // The stream the caller computes on, as a cudaStream_t. A collective starts after the work queued on
  // it so far; Work::wait() makes later work on it wait for the result. Unset: the legacy default stream.
  std::function<void*()> compute_stream;
  // Called once, from the watchdog thread, after a collective timed out or failed and the communicator
  // was aborted; it must end the process (launch/main.cpp passes MPI_Abort). Unset: print and abort().
  std::function<void(const CommError& error)> on_fatal;
};

class NcclCommunicator final : public Communicator {
 public:
  // Collective over all ranks of `session`. `host` carries CPU tensors; null: they are copied to the GPU,
  // reduced there and copied back. Throws CommError naming the failed CUDA/NCCL call, the rank and the
  // host (no device, bad device index, NCCL init failure).
  NcclCommunicator(const Session& session, std::unique_ptr<Communicator> host, const NcclOptions& options);
  ~NcclCommunicator() override;

  int rank() const override;
  int world_size() const override;
  std::string backend_name() const override { return "nccl"; }
  bool averages_in_reduction() const override { return true; }  // ncclAvg

  void barrier() override;

  int device() const;

 protected:
  // CUDA tensors on options.device: ncclAllReduce (ncclAvg for kAverage) on the communication stream.
  // wait() orders the compute stream after it and returns without blocking the host; is_completed()
  // asks the GPU. float, double, half, bfloat16, int8, uint8, int32, int64. CPU tensors: see the constructor.
  std::unique_ptr<Work> allreduce_checked(at::Tensor tensor, ReduceOp op) override;
  // Blocking (host waits for the GPU, within timeout_s).
  void broadcast_checked(at::Tensor& tensor, int root) override;
  at::Tensor allgather_checked(const at::Tensor& tensor) override;
  void exchange_checked(const at::Tensor& send, at::Tensor& recv, int peer) override;
  ErrorOrigin error_origin() const override;

 private:
  std::unique_ptr<detail::NcclState> impl_;
};

// The NCCL library this process loaded, e.g. "2.28.9".
std::string nccl_runtime_version();

}  // namespace dtrain
