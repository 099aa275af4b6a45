// Collectives over MPI on a private duplicate of MPI_COMM_WORLD, so nothing else can interleave messages
// with them. Asynchronous allreduce is MPI_Iallreduce. Across hosts a progress thread of the communicator's
// drives it while the caller computes (mpi_progress.h) and Work::wait() blocks until that thread says it
// is done; on one host (shared memory, where MPI copies inside its calls) the caller's polls drive it. CUDA tensors are staged through pinned host
// buffers, so several ranks can share one GPU; 16-bit floats are summed by dtrain's own MPI ops.
#pragma once

#include <memory>
#include <optional>

#include "runtime/bootstrap/session.h"
#include "runtime/bootstrap/wait_options.h"
#include "runtime/comm/communicator.h"

namespace dtrain {

class MpiCommunicator final : public Communicator {
 public:
  // Collective over all ranks of `session` (duplicates its MPI communicator). `wait` bounds every wait and
  // says how to report a stalled one. Throws ConfigError when MPI did not start the ranks.
  // `progress_thread`: whether a progress thread drives the allreduces (and waits block); by default where
  // the ranks span hosts.
  MpiCommunicator(const Session& session, WaitOptions wait, std::optional<bool> progress_thread = std::nullopt);
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string backend_name() const override { return "mpi"; }
  void barrier() override;

 protected:
  std::unique_ptr<Work> allreduce_checked(at::Tensor tensor, ReduceOp op) override;
  void broadcast_checked(at::Tensor& tensor, int root) override;
  at::Tensor allgather_checked(const at::Tensor& tensor) override;
  void exchange_checked(const at::Tensor& send, at::Tensor& recv, int peer) override;
  ErrorOrigin error_origin() const override;

 private:
  struct Impl;  // holds the MPI_Comm
  std::unique_ptr<Impl> impl_;
  int rank_ = 0;
  int world_size_ = 1;
  WaitOptions wait_;
  bool across_hosts_;  // the ranks span hosts: the progress thread drives the allreduces
};

}  // namespace dtrain
