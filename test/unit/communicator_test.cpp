// The Communicator's fronts: the checks every backend shares, made once, with the rank in the message
// (LocalCommunicator here; the multi-rank suites run the same fronts over MPI and Gloo).
#include "test/support/catch.h"

#include <ATen/ATen.h>

#include "runtime/comm/local_communicator.h"
#include "runtime/util/error.h"

using namespace dtrain;
using Catch::Matchers::Contains;

TEST_CASE("every communicator refuses what no backend can do, before the backend sees it", "[comm]") {
  LocalCommunicator comm;
  at::Tensor strided = at::arange(12, at::kFloat).reshape({3, 4}).t();
  REQUIRE_FALSE(strided.is_contiguous());
  CHECK_THROWS_AS(comm.allreduce_async(strided, ReduceOp::kSum), CommError);
  CHECK_THROWS_WITH(comm.allreduce_async(strided, ReduceOp::kSum),
                    Contains("allreduce: tensor must be contiguous (shape [4, 3])"));
  CHECK_THROWS_WITH(comm.allreduce_async(at::ones({2}, at::kLong), ReduceOp::kAverage),
                    Contains("allreduce average needs a floating-point tensor, got Long"));
  at::Tensor value = at::ones({2});
  CHECK_THROWS_WITH(comm.broadcast(value, 1), Contains("broadcast root 1 out of range [0, 1)"));
  CHECK_THROWS_WITH(comm.broadcast(strided, 0), Contains("broadcast: tensor must be contiguous"));
  // What passes the checks reaches the backend: a sum of integers, a broadcast from rank 0.
  CHECK_NOTHROW(comm.allreduce_async(at::ones({2}, at::kLong), ReduceOp::kSum)->wait());
  CHECK_NOTHROW(comm.broadcast(value, 0));
}

TEST_CASE("allgather takes a tensor of any layout", "[comm]") {
  LocalCommunicator comm;
  const at::Tensor strided = at::arange(6, at::kFloat).reshape({2, 3}).t();
  const at::Tensor gathered = comm.allgather(strided);
  CHECK(gathered.sizes() == at::IntArrayRef({1, 3, 2}));
  CHECK(at::equal(gathered[0], strided));
}
