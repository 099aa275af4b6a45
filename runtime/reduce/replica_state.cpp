#include "runtime/reduce/replica_state.h"

#include <ATen/ATen.h>

#include <cmath>
#include <map>
#include <sstream>
#include <string>

namespace dtrain {

std::string tensor_group(const at::Tensor& tensor) {
  std::ostringstream os;
  os << tensor.scalar_type() << "@" << tensor.device();
  return os.str();
}

void broadcast_from_root(const std::vector<at::Tensor>& tensors, Communicator& comm) {
  std::map<std::string, std::vector<at::Tensor>> groups;
  for (const at::Tensor& t : tensors) groups[tensor_group(t)].push_back(t.detach());
  at::NoGradGuard no_grad;
  for (auto& [group, members] : groups) {
    std::vector<at::Tensor> flat_parts;
    for (const at::Tensor& t : members) flat_parts.push_back(t.reshape(-1));
    at::Tensor flat = at::cat(flat_parts);
    comm.broadcast(flat, 0);
    int64_t offset = 0;
    for (at::Tensor& t : members) {
      t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  }
}

at::Tensor all_finite(const std::vector<at::Tensor>& flats) {
  if (flats.empty()) return at::ones({}, at::kBool);
  if (flats.front().is_cuda()) {
    // On the device, with no host read: one reduction per buffer.
    std::vector<at::Tensor> flags;
    flags.reserve(flats.size());
    for (const at::Tensor& flat : flats) flags.push_back(at::isfinite(flat).all());
    return flags.size() == 1 ? flags.front() : at::stack(flags).all();
  }
  // On the CPU a buffer's sum is finite unless one of its values is not, or finite values overflow; only
  // then is it checked value by value. For mnist's 1.2M gradients on one thread (LibTorch 1.13) the sum
  // takes 0.13 ms and isfinite().all() 4.2 ms, 2% of a step.
  for (const at::Tensor& flat : flats) {
    if (!std::isfinite(flat.sum().item<double>()) && !at::isfinite(flat).all().item<bool>()) {
      return at::zeros({}, at::kBool);
    }
  }
  return at::ones({}, at::kBool);
}

}  // namespace dtrain
