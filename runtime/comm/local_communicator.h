// The world-size-1 communicator: every collective is the identity. Lets the reducer and trainer run
// (and be tested) without MPI.
#pragma once

#include "runtime/comm/communicator.h"

namespace dtrain {

class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string backend_name() const override { return "local"; }
  void barrier() override {}

 protected:
  std::unique_ptr<Work> allreduce_checked(at::Tensor tensor, ReduceOp op) override;
  void broadcast_checked(at::Tensor& tensor, int root) override {}
  at::Tensor allgather_checked(const at::Tensor& tensor) override;
  // Unreachable: a world of one has no peer, and the front refuses every rank.
  void exchange_checked(const at::Tensor&, at::Tensor&, int) override {}
  ErrorOrigin error_origin() const override { return ErrorOrigin{}; }  // one rank: no rank to name
};

}  // namespace dtrain
