// Collectives over Gloo (LibTorch's c10d ProcessGroupGloo) on CPU tensors, behind the same interface as
// MPI and NCCL, so the bucketed, overlapped reducer works unchanged: `--backend gloo`. The ranks come
// from the session (an MPI launcher, or torchrun's environment), and Gloo's TCP pairs form through the
// session's c10d store. Gloo runs its own threads, so an allreduce progresses while backward computes
// with no polling.
#pragma once

#include <memory>
#include <string>

#include "runtime/bootstrap/session.h"
#include "runtime/bootstrap/wait_options.h"
#include "runtime/comm/communicator.h"

namespace dtrain {

struct GlooOptions {
  WaitOptions wait;  // every collective's timeout, and who explains a stalled one
  // The interface Gloo binds (GLOO_SOCKET_IFNAME, as in PyTorch), else the address this host's name
  // resolves to.
  std::string interface;
};

class GlooCommunicator final : public Communicator {
 public:
  // Collective over the ranks of `session`. Throws CommError when the ranks cannot connect within the
  // timeout.
  GlooCommunicator(Session& session, const GlooOptions& options);
  ~GlooCommunicator() override;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string backend_name() const override { return "gloo"; }
  void barrier() override;

  struct Impl;

 protected:
  // CPU tensors of float, double, half, int32 or int64 (Gloo in this LibTorch has no bfloat16).
  std::unique_ptr<Work> allreduce_checked(at::Tensor tensor, ReduceOp op) override;
  void broadcast_checked(at::Tensor& tensor, int root) override;
  at::Tensor allgather_checked(const at::Tensor& tensor) override;
  void exchange_checked(const at::Tensor& send, at::Tensor& recv, int peer) override;
  ErrorOrigin error_origin() const override;

 private:
  std::unique_ptr<Impl> impl_;
  int rank_ = 0;
  int world_size_ = 1;
};

}  // namespace dtrain
