#include "runtime/comm/communicator.h"

#include <ATen/ATen.h>

#include <algorithm>

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

void Communicator::broadcast_bytes(std::vector<std::string>& parts, int root) {
  at::Tensor lengths = at::empty({static_cast<int64_t>(parts.size())}, at::kLong);
  int64_t total = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    lengths[static_cast<int64_t>(i)] = static_cast<int64_t>(parts[i].size());
    total += static_cast<int64_t>(parts[i].size());
  }
  broadcast(lengths, root);
  if (rank() != root) {
    total = lengths.sum().item<int64_t>();
  }
  at::Tensor bytes = at::empty({total}, at::kByte);
  auto* data = bytes.data_ptr<uint8_t>();
  if (rank() == root) {
    for (const std::string& part : parts) data = std::copy(part.begin(), part.end(), data);
  }
  broadcast(bytes, root);
  if (rank() == root) return;
  const char* next = reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>());
  for (size_t i = 0; i < parts.size(); ++i) {
    const auto length = static_cast<size_t>(lengths[static_cast<int64_t>(i)].item<int64_t>());
    parts[i].assign(next, length);
    next += length;
  }
}

void Communicator::exchange(const at::Tensor& send, at::Tensor& recv, int peer) {
  const ErrorOrigin origin = error_origin();
  DTRAIN_CHECK_AT(peer >= 0 && peer < world_size() && peer != rank(), CommError, origin,
                  "exchange with rank " << peer << ": expected another rank in [0, " << world_size() << ")");
  check_contiguous(send, origin, "exchange");
  check_contiguous(recv, origin, "exchange");
  DTRAIN_CHECK_AT(send.sizes() == recv.sizes() && send.scalar_type() == recv.scalar_type() &&
                      send.device() == recv.device(),
                  CommError, origin,
                  "exchange with rank " << peer << ": the receive tensor (" << recv.sizes() << ", " << recv.scalar_type()
                                        << ") differs from the sent one (" << send.sizes() << ", " << send.scalar_type() << ")");
  exchange_checked(send, recv, peer);
}

at::Tensor Communicator::allgather(const at::Tensor& tensor) {
  return allgather_checked(tensor.contiguous());  // small values: any layout, copied if need be
}

}  // namespace dtrain
