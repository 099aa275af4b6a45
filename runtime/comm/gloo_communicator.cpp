#include "runtime/comm/gloo_communicator.h"

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <atomic>
#include <chrono>

#include "runtime/util/check.h"

namespace dtrain {

struct GlooCommunicator::Impl {
  ErrorOrigin origin;
  WaitOptions wait;
  std::chrono::milliseconds timeout{0};
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;

  // A failed or timed-out Gloo operation as CommError: what, this rank, Gloo's message, and the
  // heartbeat's view of which peer is stuck.
  [[noreturn]] void fail(const std::string& what, const std::exception& e) const {
    throw CommError(origin, with_stall(wait, "gloo " + what + " failed: " + message_without_trace(e), /*guess=*/false));
  }

  // Runs `call` (a Gloo call), turning what it throws into CommError.
  template <class Call>
  auto guarded(const std::string& what, Call call) const {
    try {
      return call();
    } catch (const CommError&) {
      throw;
    } catch (const std::exception& e) {
      fail(what, e);
    }
  }

  // Starts a blocking collective with `start` and waits for it, marked in the activity for the heartbeat.
  template <class Start>
  void run(const std::string& what, Start start) const {
    WaitScope scope(wait.activity, what);
    guarded(what, [&] { start()->wait(timeout); });
  }
};

namespace {

// What Gloo takes beyond the fronts' checks: CPU tensors of its dtypes.
void check_tensor(const at::Tensor& tensor, const ErrorOrigin& origin, const char* what) {
  DTRAIN_CHECK_AT(!tensor.is_cuda(), CommError, origin,
                  "gloo " << what << ": tensors must be on the CPU (use --backend nccl on GPUs)");
  const at::ScalarType type = tensor.scalar_type();
  DTRAIN_CHECK_AT(type == at::kFloat || type == at::kDouble || type == at::kHalf || type == at::kInt ||
                      type == at::kLong || type == at::kByte || type == at::kChar,
                  CommError, origin,
                  "gloo " << what << ": unsupported dtype " << type
                          << " (float, double, half and integers; --compress bf16 needs --backend mpi or nccl)");
}

class GlooWork final : public Work {
 public:
  GlooWork(const GlooCommunicator::Impl& impl, c10::intrusive_ptr<c10d::Work> work, at::Tensor tensor, int divide_by)
      : impl_(impl), work_(std::move(work)), tensor_(std::move(tensor)), divide_by_(divide_by) {}

  ~GlooWork() override {
    // Gloo's threads may still write into the tensor: it must outlive the operation. Waiting here is
    // bounded by Gloo's own timeout; an error on the way out changes nothing.
    if (!waited_) {
      try {
        work_->wait(impl_.timeout);
      } catch (const std::exception&) {
      }
    }
  }

  bool is_completed() override { return work_->isCompleted(); }

  void wait() override {
    if (waited_) return;
    impl_.run("allreduce of " + std::to_string(tensor_.nbytes()) + " bytes", [this] { return work_; });
    waited_ = true;
    if (divide_by_ > 1) tensor_.div_(divide_by_);  // Gloo sums; the average is taken here
  }

 private:
  const GlooCommunicator::Impl& impl_;
  c10::intrusive_ptr<c10d::Work> work_;
  at::Tensor tensor_;
  int divide_by_;
  bool waited_ = false;
};

}  // namespace

GlooCommunicator::GlooCommunicator(Session& session, const GlooOptions& options)
    : impl_(std::make_unique<Impl>()), rank_(session.rank()), world_size_(session.world_size()) {
  Impl& impl = *impl_;
  impl.origin = session.origin();
  impl.origin.host = session.hostname();
  impl.wait = options.wait;
  impl.timeout = std::chrono::milliseconds(static_cast<int64_t>(options.wait.timeout_s * 1000.0));
  c10::intrusive_ptr<c10d::Store> store = session.store(options.wait);
  // Each process group of the session gets keys of its own (Gloo's addresses are published under them);
  // every rank creates its groups in the same order, so the count agrees.
  static std::atomic<int64_t> groups{0};
  const std::string prefix = "dtrain/gloo/" + std::to_string(groups++);
  impl.guarded("set-up" + (options.interface.empty() ? std::string() : " on interface " + options.interface), [&] {
    auto group_options = c10d::ProcessGroupGloo::Options::create(impl.timeout);
    group_options->devices.push_back(options.interface.empty()
                                         ? c10d::ProcessGroupGloo::createDefaultDevice()
                                         : c10d::ProcessGroupGloo::createDeviceForInterface(options.interface));
    group_options->threads = 2;
    impl.group = c10::make_intrusive<c10d::ProcessGroupGloo>(c10::make_intrusive<c10d::PrefixStore>(prefix, store),
                                                              rank_, world_size_, group_options);
  });
}

GlooCommunicator::~GlooCommunicator() = default;

ErrorOrigin GlooCommunicator::error_origin() const { return impl_->origin; }

std::unique_ptr<Work> GlooCommunicator::allreduce_checked(at::Tensor tensor, ReduceOp op) {
  check_tensor(tensor, impl_->origin, "allreduce");
  std::vector<at::Tensor> tensors{tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::SUM;
  c10::intrusive_ptr<c10d::Work> work = impl_->guarded("allreduce", [&] { return impl_->group->allreduce(tensors, options); });
  return std::make_unique<GlooWork>(*impl_, std::move(work), std::move(tensor),
                                    op == ReduceOp::kAverage ? world_size_ : 1);
}

void GlooCommunicator::broadcast_checked(at::Tensor& tensor, int root) {
  check_tensor(tensor, impl_->origin, "broadcast");
  std::vector<at::Tensor> tensors{tensor};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  impl_->run("broadcast from rank " + std::to_string(root), [&] { return impl_->group->broadcast(tensors, options); });
}

at::Tensor GlooCommunicator::allgather_checked(const at::Tensor& tensor) {
  const at::Tensor& input = tensor;
  check_tensor(input, impl_->origin, "allgather");
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int r = 0; r < world_size_; ++r) outputs[0].push_back(at::empty_like(input));
  std::vector<at::Tensor> inputs{input};
  impl_->run("allgather", [&] { return impl_->group->allgather(outputs, inputs); });
  return at::stack(outputs[0]);
}

void GlooCommunicator::exchange_checked(const at::Tensor& send, at::Tensor& recv, int peer) {
  check_tensor(send, impl_->origin, "exchange");
  constexpr int kExchangeTag = 7;
  const std::string what = "exchange of " + std::to_string(send.nbytes()) + " bytes with rank " + std::to_string(peer);
  std::vector<at::Tensor> out{send};
  std::vector<at::Tensor> in{recv};
  c10::intrusive_ptr<c10d::Work> receiving = impl_->guarded(what, [&] { return impl_->group->recv(in, peer, kExchangeTag); });
  impl_->run(what, [&] { return impl_->group->send(out, peer, kExchangeTag); });
  impl_->run(what, [&] { return receiving; });
}

void GlooCommunicator::barrier() {
  impl_->run("barrier", [&] { return impl_->group->barrier(); });
}

}  // namespace dtrain
