#include "runtime/comm/communicator.h"

#include <ATen/ATen.h>

#include "runtime/util/check.h"

namespace dtrain {
namespace {

void check_contiguous(const at::Tensor& tensor, const ErrorOrigin& origin, const char* what) {
  DTRAIN_CHECK_AT(tensor.is_contiguous(), CommError, origin,
                  what << ": tensor must be contiguous (shape " << tensor.sizes() << ")");
}

}  // namespace

std::unique_ptr<Work> Communicator::allreduce_async(at::Tensor tensor, ReduceOp op) {
  const ErrorOrigin origin = error_origin();
  check_contiguous(tensor, origin, "allreduce");
  DTRAIN_CHECK_AT(op == ReduceOp::kSum || tensor.is_floating_point(), CommError, origin,
                  "allreduce average needs a floating-point tensor, got " << tensor.scalar_type());
  return allreduce_checked(std::move(tensor), op);
}

void Communicator::broadcast(at::Tensor& tensor, int root) {
  const ErrorOrigin origin = error_origin();
  DTRAIN_CHECK_AT(root >= 0 && root < world_size(), CommError, origin,
                  "broadcast root " << root << " out of range [0, " << world_size() << ")");
  check_contiguous(tensor, origin, "broadcast");
  broadcast_checked(tensor, root);
}

at::Tensor Communicator::allgather(const at::Tensor& tensor) {
  return allgather_checked(tensor.contiguous());  // small values: any layout, copied if need be
}

}  // namespace dtrain
