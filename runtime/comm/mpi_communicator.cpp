#include "runtime/comm/mpi_communicator.h"

#include <ATen/ATen.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <chrono>
#include <climits>

#include "runtime/bootstrap/mpi_detail.h"
#include "runtime/comm/mpi_progress.h"
#include "runtime/util/timer.h"

namespace dtrain {

struct MpiCommunicator::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  std::unique_ptr<detail::MpiProgress> progress;  // started by the first allreduce_async
  MPI_Op bfloat16_sum = MPI_OP_NULL;  // MPI has no 16-bit float types: sums of raw 16-bit words
  MPI_Op half_sum = MPI_OP_NULL;
};

namespace {

// Reduction kernels for 16-bit floats carried as MPI_UINT16_T. Each pair is added in float and rounded
// once, as NCCL does for its 16-bit types.
template <typename Float16>
void sum_16bit(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  const auto* a = static_cast<const Float16*>(in);
  auto* b = static_cast<Float16*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = static_cast<Float16>(static_cast<float>(a[i]) + static_cast<float>(b[i]));
}

MPI_Datatype mpi_type(const at::Tensor& tensor) {
  switch (tensor.scalar_type()) {
    case at::kFloat: return MPI_FLOAT;
    case at::kDouble: return MPI_DOUBLE;
    case at::kInt: return MPI_INT32_T;
    case at::kLong: return MPI_INT64_T;
    case at::kByte: return MPI_UINT8_T;
    case at::kChar: return MPI_INT8_T;
    case at::kBFloat16:
    case at::kHalf: return MPI_UINT16_T;  // with the matching sum op from reduce_op()
    default:
      throw CommError(detail::mpi_origin(), "MPI backend: unsupported dtype " +
                      std::string(c10::toString(tensor.scalar_type())) +
                      "; expected float, double, bfloat16, half, int8, uint8, int32 or int64");
  }
}

int mpi_count(const at::Tensor& tensor, const char* what) {
  DTRAIN_CHECK_AT(tensor.device().is_cpu(), CommError, detail::mpi_origin(),
                  what << ": MPI needs a host tensor, got " << tensor.device());
  DTRAIN_CHECK_AT(tensor.is_contiguous(), CommError, detail::mpi_origin(),
                  what << ": tensor must be contiguous (shape " << tensor.sizes() << ")");
  DTRAIN_CHECK_AT(tensor.numel() <= INT_MAX, CommError, detail::mpi_origin(),
                  what << ": " << tensor.numel() << " elements exceed MPI's int count; split the tensor");
  return static_cast<int>(tensor.numel());
}

// MPI works on host memory: a CUDA tensor is copied into a pinned host buffer first (waiting for the
// kernels that wrote it) and the result copied back after completion. CPU tensors are used as they are.
at::Tensor host_copy(const at::Tensor& tensor) {
  if (!tensor.is_cuda()) return tensor;
  at::Tensor staged = at::empty(tensor.sizes(), tensor.options().device(at::kCPU).pinned_memory(true));
  staged.copy_(tensor);
  return staged;
}

class MpiWork final : public Work {
 public:
  // `tensor` is the host buffer MPI reduces into; `device_tensor`, if defined, receives the result. The
  // progress thread tests `request` and says when it is done.
  MpiWork(at::Tensor tensor, at::Tensor device_tensor, ReduceOp op, int world_size, const WaitOptions& wait,
          std::shared_ptr<detail::MpiRequest> request, detail::MpiProgress* progress)
      : progress_(progress),
        tensor_(std::move(tensor)),
        device_tensor_(std::move(device_tensor)),
        op_(op),
        world_size_(world_size),
        wait_(wait),
        request_(std::move(request)) {}

  ~MpiWork() override {
    // Only an error path destroys an unfinished work, typically while a peer is dead or stuck, so waiting
    // here could block forever, and MPI cannot cancel a collective. Keep the buffer alive instead, so a
    // late completion never writes into freed memory; the job is about to end anyway.
    if (!finished_) new at::Tensor(std::move(tensor_));  // deliberately never freed
  }

  bool is_completed() override {
    if (finished_) return true;
    if (polled_here()) {
      int done = 0;
      DTRAIN_MPI_CHECK(MPI_Test(&request_->request, &done, MPI_STATUS_IGNORE));
      if (!done) return false;
    } else {
      std::lock_guard<std::mutex> lock(request_->mutex);
      if (!request_->done) return false;
    }
    finish();
    return true;
  }

  void wait() override {
    if (finished_) return;
    const std::string what = "MPI_Iallreduce of " + std::to_string(tensor_.nbytes()) + " bytes";
    if (polled_here()) {
      detail::wait_mpi_request(&request_->request, wait_, what);
      finish();
      return;
    }
    WaitScope scope(wait_.activity, what);
    // Looked at every second at most: a gap of 3 s is this process having been stopped (WaitClock).
    WaitClock watch(3.0);
    {
      // Blocks: the progress thread wakes it. The deadline is checked every second.
      std::unique_lock<std::mutex> lock(request_->mutex);
      while (!request_->done) {
        const double left = wait_.timeout_s - watch.waited_s();
        if (left <= 0) detail::throw_wait_timeout(wait_, what);
        request_->completed.wait_for(lock, std::chrono::duration<double>(std::min(left, 1.0)));
      }
    }
    finish();
  }

 private:
  // No progress thread (all ranks on one host): this work tests its request itself.
  bool polled_here() const { return progress_ == nullptr; }

  void finish() {
    if (request_->error != MPI_SUCCESS) {
      finished_ = true;  // the library failed the request: nothing will write into the buffer any more
      const std::string call = "MPI_Test(MPI_Iallreduce of " + std::to_string(tensor_.nbytes()) + " bytes)";
      detail::throw_call_error(detail::mpi_origin(), call.c_str(), detail::mpi_error_string(request_->error), __FILE__,
                               __LINE__);
    }
    finished_ = true;
    if (op_ == ReduceOp::kAverage && world_size_ > 1) tensor_.div_(world_size_);
    if (device_tensor_.defined()) device_tensor_.copy_(tensor_);
  }

  detail::MpiProgress* progress_;  // the communicator's, or null
  at::Tensor tensor_;
  at::Tensor device_tensor_;
  ReduceOp op_;
  int world_size_;
  const WaitOptions& wait_;  // the communicator's, which outlives its works
  std::shared_ptr<detail::MpiRequest> request_;
  bool finished_ = false;
};

}  // namespace

MpiCommunicator::MpiCommunicator(const Session& session, WaitOptions wait, std::optional<bool> progress_thread)
    : impl_(std::make_unique<Impl>()),
      rank_(session.rank()),
      world_size_(session.world_size()),
      wait_(std::move(wait)),
      across_hosts_(progress_thread.value_or(session.unique_hosts().size() > 1)) {
  // On one host Open MPI's shared-memory transport copies the data inside the MPI calls themselves: the
  // waits are that copying, and a progress thread only took cores from the ranks' computation (2 ranks
  // on 2 cores: 15% fewer samples/s, docs/benchmarks.md). There the hooks and the waits poll, as MPI does.
  if (!across_hosts_) wait_.active = true;
  DTRAIN_CHECK(session.mpi_world().has_value(), ConfigError,
               "comm.backend 'mpi' needs ranks that an MPI launcher started (comm.bootstrap 'mpi')");
  DTRAIN_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &impl_->comm));
  DTRAIN_MPI_CHECK(MPI_Comm_set_errhandler(impl_->comm, MPI_ERRORS_RETURN));
  DTRAIN_MPI_CHECK(MPI_Op_create(&sum_16bit<c10::BFloat16>, /*commute=*/1, &impl_->bfloat16_sum));
  DTRAIN_MPI_CHECK(MPI_Op_create(&sum_16bit<c10::Half>, /*commute=*/1, &impl_->half_sum));
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  impl_->progress.reset();  // before the communicator it tests requests of
  if (impl_->bfloat16_sum != MPI_OP_NULL) MPI_Op_free(&impl_->bfloat16_sum);
  if (impl_->half_sum != MPI_OP_NULL) MPI_Op_free(&impl_->half_sum);
  if (impl_->comm != MPI_COMM_NULL) MPI_Comm_free(&impl_->comm);
}

ErrorOrigin MpiCommunicator::error_origin() const { return detail::mpi_origin(); }

std::unique_ptr<Work> MpiCommunicator::allreduce_checked(at::Tensor tensor, ReduceOp op) {
  at::Tensor host = host_copy(tensor);
  at::Tensor device = tensor.is_cuda() ? std::move(tensor) : at::Tensor();
  const int count = mpi_count(host, "allreduce");
  const MPI_Datatype type = mpi_type(host);
  MPI_Op sum = MPI_SUM;
  if (host.scalar_type() == at::kBFloat16) sum = impl_->bfloat16_sum;
  if (host.scalar_type() == at::kHalf) sum = impl_->half_sum;
  auto request = std::make_shared<detail::MpiRequest>();
  DTRAIN_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, host.data_ptr(), count, type, sum, impl_->comm, &request->request));
  if (!across_hosts_) {
    return std::make_unique<MpiWork>(std::move(host), std::move(device), op, world_size_, wait_, std::move(request),
                                     nullptr);
  }
  if (!impl_->progress) impl_->progress = std::make_unique<detail::MpiProgress>(wait_.active);
  impl_->progress->add(request);
  return std::make_unique<MpiWork>(std::move(host), std::move(device), op, world_size_, wait_, std::move(request),
                                   impl_->progress.get());
}

void MpiCommunicator::broadcast_checked(at::Tensor& tensor, int root) {
  at::Tensor host = host_copy(tensor);
  const int count = mpi_count(host, "broadcast");
  MPI_Request request = MPI_REQUEST_NULL;
  DTRAIN_MPI_CHECK(MPI_Ibcast(host.data_ptr(), count, mpi_type(host), root, impl_->comm, &request));
  detail::wait_mpi_request(&request, wait_, "MPI_Ibcast of " + std::to_string(host.nbytes()) + " bytes");
  if (tensor.is_cuda()) tensor.copy_(host);
}

at::Tensor MpiCommunicator::allgather_checked(const at::Tensor& tensor) {
  at::Tensor input = host_copy(tensor);
  const int count = mpi_count(input, "allgather");
  std::vector<int64_t> shape{world_size_};
  shape.insert(shape.end(), input.sizes().begin(), input.sizes().end());
  at::Tensor output = at::empty(shape, input.options());
  MPI_Request request = MPI_REQUEST_NULL;
  DTRAIN_MPI_CHECK(MPI_Iallgather(input.data_ptr(), count, mpi_type(input), output.data_ptr(), count,
                                  mpi_type(input), impl_->comm, &request));
  detail::wait_mpi_request(&request, wait_, "MPI_Iallgather");
  return output.to(tensor.device());
}

void MpiCommunicator::exchange_checked(const at::Tensor& send, at::Tensor& recv, int peer) {
  const at::Tensor out = host_copy(send);
  at::Tensor in = recv.is_cuda() ? at::empty(recv.sizes(), recv.options().device(at::kCPU).pinned_memory(true)) : recv;
  const int count = mpi_count(out, "exchange");
  const std::string what = "exchange of " + std::to_string(out.nbytes()) + " bytes with rank " + std::to_string(peer);
  constexpr int kExchangeTag = 7;  // the private communicator carries no other point-to-point messages
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  DTRAIN_MPI_CHECK(MPI_Irecv(in.data_ptr(), count, mpi_type(in), peer, kExchangeTag, impl_->comm, &requests[0]));
  DTRAIN_MPI_CHECK(MPI_Isend(out.data_ptr(), count, mpi_type(out), peer, kExchangeTag, impl_->comm, &requests[1]));
  detail::wait_mpi_request(&requests[0], wait_, "MPI_Irecv of the " + what);
  detail::wait_mpi_request(&requests[1], wait_, "MPI_Isend of the " + what);
  if (recv.is_cuda()) recv.copy_(in);
}

void MpiCommunicator::barrier() {
  MPI_Request request = MPI_REQUEST_NULL;
  DTRAIN_MPI_CHECK(MPI_Ibarrier(impl_->comm, &request));
  detail::wait_mpi_request(&request, wait_, "MPI_Ibarrier");
}

}  // namespace dtrain
