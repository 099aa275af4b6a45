#include "runtime/comm/local_communicator.h"

#include <ATen/ATen.h>


namespace dtrain {
namespace {

class CompletedWork final : public Work {
 public:
  bool is_completed() override { return true; }
  void wait() override {}
};

}  // namespace

std::unique_ptr<Work> LocalCommunicator::allreduce_checked(at::Tensor, ReduceOp) { return std::make_unique<CompletedWork>(); }

at::Tensor LocalCommunicator::allgather_checked(const at::Tensor& tensor) { return tensor.unsqueeze(0).clone(); }

}  // namespace dtrain
