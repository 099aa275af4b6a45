// Shared fixtures of the multi-rank tests: the process's MPI session, a communicator per test, and
// agreement on a check so that every rank takes the same branch before a REQUIRE.
#pragma once

#include <ATen/ATen.h>

#include <memory>

#include "runtime/bootstrap/mpi_session.h"
#include "runtime/comm/mpi_communicator.h"

namespace dtrain::test {

MpiSession& session();  // defined in mpi_test_main.cpp

inline std::unique_ptr<MpiCommunicator> make_mpi_comm() {
  return std::make_unique<MpiCommunicator>(session(), WaitOptions{120.0, nullptr, {}});
}

// Collective: true on every rank iff `ok` holds on every rank.
inline bool all_ranks(Communicator& comm, bool ok) {
  at::Tensor flag = at::tensor(std::vector<int64_t>{ok ? 0 : 1}, at::kLong);
  comm.allreduce(flag, ReduceOp::kSum);
  return flag.item<int64_t>() == 0;
}

// Collective: true iff `t` is bitwise equal to rank 0's `t`.
inline bool same_as_root(Communicator& comm, const at::Tensor& t) {
  at::Tensor root = t.detach().clone().contiguous();
  comm.broadcast(root, 0);
  return all_ranks(comm, at::equal(root, t.detach().contiguous()));
}

}  // namespace dtrain::test
