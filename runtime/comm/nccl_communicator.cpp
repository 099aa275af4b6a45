#include "runtime/comm/nccl_communicator.h"

#include <ATen/ATen.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "runtime/device/cuda_check.h"
#include "runtime/util/terminal.h"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;

// How often the watchdog looks at the collectives in flight. Short enough that a timeout is reported
// within a fraction of a second of comm.timeout_s, long enough to cost nothing.
constexpr std::chrono::milliseconds kWatchdogPeriod{10};

std::string nccl_error_string(ncclResult_t code) {
  std::string text = ncclGetErrorString(code);
  const char* last = ncclGetLastError(nullptr);  // NCCL's detail on the most recent failure, if any
  if (last != nullptr && *last != '\0') text += "; " + std::string(last);
  return text;
}

ncclDataType_t nccl_type(const at::Tensor& tensor) {
  switch (tensor.scalar_type()) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kInt: return ncclInt32;
    case at::kLong: return ncclInt64;
    case at::kByte: return ncclUint8;
    case at::kChar: return ncclInt8;
    default:
      throw CommError(detail::device_origin(), "NCCL backend: unsupported dtype " +
                      std::string(c10::toString(tensor.scalar_type())) +
                      "; expected float, double, half, bfloat16, int8, uint8, int32 or int64");
  }
}

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

namespace detail {

// One collective in flight, shared by its Work and the watchdog.
struct Op {
  cudaEvent_t done = nullptr;  // recorded on the communication stream after the collective; null: not a kernel
  Clock::time_point start = Clock::now();
  std::string what;
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;
  explicit Op(std::string description) : what(std::move(description)) {}
  ~Op() {
    if (done != nullptr) cudaEventDestroy(done);  // safe while pending: released when the event completes
  }
};

struct NcclState {
  NcclOptions options;
  int rank = 0;
  int world_size = 1;
  std::unique_ptr<Communicator> host;  // CPU tensors; null: through the GPU
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;  // the communication stream
  cudaEvent_t ready = nullptr;    // marks "inputs written" on the compute stream, re-recorded per collective

  std::mutex mutex;
  std::condition_variable wake;
  std::vector<std::shared_ptr<Op>> watched;  // guarded by mutex
  bool stopping = false;                     // guarded by mutex
  std::atomic<bool> failed{false};
  std::string failure;         // guarded by mutex; set before `failed`
  ErrorOrigin failure_origin;  // guarded by mutex
  std::thread watchdog;

  cudaStream_t compute_stream() const {
    return options.compute_stream ? static_cast<cudaStream_t>(options.compute_stream()) : cudaStreamLegacy;
  }

  void watch(const std::shared_ptr<Op>& op) {
    std::lock_guard<std::mutex> lock(mutex);
    watched.push_back(op);
  }

  void unwatch(const std::shared_ptr<Op>& op) {
    std::lock_guard<std::mutex> lock(mutex);
    watched.erase(std::remove(watched.begin(), watched.end(), op), watched.end());
  }

  void throw_if_failed() {
    if (!failed.load()) return;
    std::lock_guard<std::mutex> lock(mutex);
    throw CommError(failure_origin, failure);
  }

  // A failed NCCL call leaves the communicator unusable: abort it, so that peers blocked in a collective
  // with this rank fail too, then throw with the call, NCCL's message and the context.
  void check_nccl(ncclResult_t code, const char* call, const std::string& context, const char* file, int line) {
    if (code == ncclSuccess) return;
    const std::string message = nccl_error_string(code);
    abort_comm();
    detail::throw_call_error(detail::device_origin(), call, message + (context.empty() ? "" : "), (" + context),
                             file, line);
  }

  void abort_comm() {
    ncclComm_t doomed = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex);
      std::swap(doomed, comm);
    }
    if (doomed != nullptr) ncclCommAbort(doomed);
  }

  void fail(const std::string& problem) {
    const CommError error(detail::device_origin(),
                          problem + "; aborted the NCCL communicator so that no rank waits forever");
    {
      std::lock_guard<std::mutex> lock(mutex);
      failure = error.message();
      failure_origin = error.origin();
    }
    failed.store(true);
    abort_comm();
    if (options.on_fatal) {
      options.on_fatal(error);
    } else {
      print_line_to_stderr(error.what());
      std::abort();
    }
  }

  // Runs on its own thread from construction to destruction.
  void watchdog_loop() {
    cudaSetDevice(options.device);  // event queries are per device; failure here shows up as query errors
    std::unique_lock<std::mutex> lock(mutex);
    while (!stopping) {
      wake.wait_for(lock, kWatchdogPeriod);
      if (stopping) return;
      const Clock::time_point now = Clock::now();
      std::string problem;
      for (auto it = watched.begin(); it != watched.end() && problem.empty();) {
        Op& op = **it;
        if (op.done != nullptr) {
          const cudaError_t state = cudaEventQuery(op.done);
          if (state == cudaSuccess) {
            it = watched.erase(it);
            continue;
          }
          if (state != cudaErrorNotReady) {
            problem = op.what + " failed on the GPU (" + detail::cuda_error_string(state) + ")";
            break;
          }
        }
        const double waited_s = seconds_between(op.start, now);
        if (waited_s > options.wait.timeout_s) {
          problem = with_stall(options.wait, timed_out_text(options.wait, op.what), /*guess=*/true);
        }
        ++it;
      }
      if (problem.empty() && comm != nullptr) {
        ncclResult_t async = ncclSuccess;
        const ncclResult_t rc = ncclCommGetAsyncError(comm, &async);
        if (rc != ncclSuccess) async = rc;
        if (async != ncclSuccess && async != ncclInProgress) {
          problem = "NCCL reported an asynchronous error (" + nccl_error_string(async) + ")";
        }
      }
      if (!problem.empty()) {
        lock.unlock();
        fail(problem);
        return;
      }
    }
  }

  // Blocks the host until `op` completed on the GPU. The watchdog enforces the timeout.
  void wait_host(const Op& op) {
    for (;;) {
      throw_if_failed();
      const cudaError_t state = cudaEventQuery(op.done);
      if (state == cudaSuccess) return;
      if (state != cudaErrorNotReady) DTRAIN_CUDA_CHECK(state);
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  // Orders the communication stream after everything queued on the compute stream so far.
  void order_after_compute() {
    DTRAIN_CUDA_CHECK(cudaEventRecord(ready, compute_stream()));
    DTRAIN_CUDA_CHECK(cudaStreamWaitEvent(stream, ready, 0));
  }

  std::shared_ptr<Op> finish_enqueue(std::string what) {
    auto op = std::make_shared<Op>(std::move(what));
    DTRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&op->done, cudaEventDisableTiming));
    DTRAIN_CUDA_CHECK(cudaEventRecord(op->done, stream));
    watch(op);
    return op;
  }

  // What NCCL takes beyond the fronts' checks: a tensor on this rank's GPU.
  size_t check_tensor(const at::Tensor& tensor, const char* what) const {
    DTRAIN_CHECK_AT(tensor.device().index() == options.device, CommError, detail::device_origin(),
                    what << ": tensor is on " << tensor.device() << ", but this rank's NCCL communicator uses cuda:"
                         << options.device);
    return static_cast<size_t>(tensor.numel());
  }
};

}  // namespace detail

namespace {

#define DTRAIN_NCCL_CHECK(impl, call, context) (impl).check_nccl((call), #call, (context), __FILE__, __LINE__)

// A CPU tensor's collective run on a GPU copy of it (no host communicator): wait() copies the result
// back, which makes the host wait for the GPU.
class StagedWork final : public Work {
 public:
  StagedWork(std::unique_ptr<Work> work, at::Tensor host, at::Tensor staged)
      : work_(std::move(work)), host_(std::move(host)), staged_(std::move(staged)) {}
  bool is_completed() override { return work_->is_completed(); }
  void wait() override {
    work_->wait();
    host_.copy_(staged_);
  }

 private:
  std::unique_ptr<Work> work_;
  at::Tensor host_;
  at::Tensor staged_;
};

class NcclWork final : public Work {
 public:
  NcclWork(detail::NcclState& impl, at::Tensor tensor, std::shared_ptr<detail::Op> op)
      : impl_(impl), tensor_(std::move(tensor)), op_(std::move(op)) {}

  ~NcclWork() override {
    // Unwaited and unfinished means an error path: the GPU may still write into the tensor, and nothing
    // orders the allocator's reuse of its memory after that. Keep it alive; the job is ending.
    if (!waited_ && cudaEventQuery(op_->done) != cudaSuccess) new at::Tensor(std::move(tensor_));
  }

  bool is_completed() override {
    impl_.throw_if_failed();
    const cudaError_t state = cudaEventQuery(op_->done);
    if (state == cudaErrorNotReady) return false;
    DTRAIN_CUDA_CHECK(state);
    return true;
  }

  void wait() override {
    impl_.throw_if_failed();
    DTRAIN_CUDA_CHECK(cudaStreamWaitEvent(impl_.compute_stream(), op_->done, 0));
    waited_ = true;
  }

 private:
  detail::NcclState& impl_;
  at::Tensor tensor_;
  std::shared_ptr<detail::Op> op_;
  bool waited_ = false;
};

}  // namespace

NcclCommunicator::NcclCommunicator(const Session& session, std::unique_ptr<Communicator> host, const NcclOptions& options)
    : impl_(std::make_unique<detail::NcclState>()) {
  detail::NcclState& impl = *impl_;
  impl.options = options;
  impl.rank = session.rank();
  impl.world_size = session.world_size();
  impl.host = std::move(host);

  int devices = 0;
  DTRAIN_CUDA_CHECK(cudaGetDeviceCount(&devices));
  DTRAIN_CHECK_AT(options.device >= 0 && options.device < devices, CommError, detail::device_origin(),
                  "CUDA device " << options.device << " does not exist; this process sees " << devices
                                 << " device(s)");
  DTRAIN_CUDA_CHECK(cudaSetDevice(options.device));

  // Rank 0's id reaches the others through the session: 128 opaque bytes.
  ncclUniqueId id{};
  if (impl.rank == 0) DTRAIN_NCCL_CHECK(impl, ncclGetUniqueId(&id), "");
  const std::string id_bytes = session.broadcast(std::string(reinterpret_cast<const char*>(&id), sizeof id), 0,
                                                 options.wait, "the NCCL unique id");
  DTRAIN_CHECK_AT(id_bytes.size() == sizeof id, CommError, detail::device_origin(),
                  "the NCCL unique id from rank 0 has " << id_bytes.size() << " bytes, expected " << sizeof id);
  std::memcpy(&id, id_bytes.data(), sizeof id);

  int lowest = 0;
  int highest = 0;
  DTRAIN_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lowest, &highest));
  // Highest priority: gradient kernels must not queue behind backward's compute kernels.
  DTRAIN_CUDA_CHECK(cudaStreamCreateWithPriority(&impl.stream, cudaStreamNonBlocking, highest));
  DTRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&impl.ready, cudaEventDisableTiming));

  // The watchdog covers creation too: a rank that never arrives must not hang the others in init.
  impl.watchdog = std::thread([&impl] { impl.watchdog_loop(); });
  auto init = std::make_shared<detail::Op>("ncclCommInitRank (world size " + std::to_string(impl.world_size) + ")");
  impl.watch(init);
  ncclComm_t comm = nullptr;
  try {
    DTRAIN_NCCL_CHECK(impl, ncclCommInitRank(&comm, impl.world_size, id, impl.rank),
                      "world size " + std::to_string(impl.world_size) + ", cuda:" + std::to_string(options.device));
  } catch (...) {
    impl.unwatch(init);
    {
      std::lock_guard<std::mutex> lock(impl.mutex);
      impl.stopping = true;
    }
    impl.wake.notify_all();
    impl.watchdog.join();
    cudaEventDestroy(impl.ready);
    cudaStreamDestroy(impl.stream);
    throw;
  }
  {
    std::lock_guard<std::mutex> lock(impl.mutex);
    impl.comm = comm;
  }
  impl.unwatch(init);
}

NcclCommunicator::~NcclCommunicator() {
  detail::NcclState& impl = *impl_;
  bool busy = false;
  {
    std::lock_guard<std::mutex> lock(impl.mutex);
    impl.stopping = true;
    for (const auto& op : impl.watched) busy = busy || op->done == nullptr || cudaEventQuery(op->done) != cudaSuccess;
  }
  impl.wake.notify_all();
  if (impl.watchdog.joinable()) impl.watchdog.join();
  // Destroying with collectives still running could block on a dead peer: abort instead.
  if (busy || impl.failed.load()) {
    impl.abort_comm();
  } else if (impl.comm != nullptr) {
    ncclCommDestroy(impl.comm);
    impl.comm = nullptr;
  }
  if (impl.ready != nullptr) cudaEventDestroy(impl.ready);
  if (impl.stream != nullptr) cudaStreamDestroy(impl.stream);
}

int NcclCommunicator::rank() const { return impl_->rank; }
int NcclCommunicator::world_size() const { return impl_->world_size; }
int NcclCommunicator::device() const { return impl_->options.device; }

ErrorOrigin NcclCommunicator::error_origin() const { return detail::device_origin(); }

std::unique_ptr<Work> NcclCommunicator::allreduce_checked(at::Tensor tensor, ReduceOp op) {
  if (!tensor.is_cuda()) {
    if (impl_->host) return impl_->host->allreduce_async(std::move(tensor), op);
    at::Tensor staged = tensor.to(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(impl_->options.device)));
    std::unique_ptr<Work> work = allreduce_async(staged, op);
    return std::make_unique<StagedWork>(std::move(work), std::move(tensor), std::move(staged));
  }
  detail::NcclState& impl = *impl_;
  impl.throw_if_failed();
  const size_t count = impl.check_tensor(tensor, "allreduce");
  const ncclDataType_t type = nccl_type(tensor);
  const std::string what = "ncclAllReduce of " + std::to_string(tensor.nbytes()) + " bytes";
  impl.order_after_compute();
  DTRAIN_NCCL_CHECK(impl,
                    ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), count, type,
                                  op == ReduceOp::kAverage ? ncclAvg : ncclSum, impl.comm, impl.stream),
                    what);
  return std::make_unique<NcclWork>(impl, std::move(tensor), impl.finish_enqueue(what));
}

void NcclCommunicator::broadcast_checked(at::Tensor& tensor, int root) {
  if (!tensor.is_cuda()) {
    if (impl_->host) return impl_->host->broadcast(tensor, root);
    at::Tensor staged = tensor.to(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(impl_->options.device)));
    broadcast(staged, root);
    tensor.copy_(staged);  // waits for the GPU
    return;
  }
  detail::NcclState& impl = *impl_;
  impl.throw_if_failed();
  const size_t count = impl.check_tensor(tensor, "broadcast");
  const std::string what = "ncclBroadcast of " + std::to_string(tensor.nbytes()) + " bytes from rank " + std::to_string(root);
  impl.order_after_compute();
  DTRAIN_NCCL_CHECK(impl, ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), count, nccl_type(tensor), root,
                                        impl.comm, impl.stream),
                    what);
  const std::shared_ptr<detail::Op> op = impl.finish_enqueue(what);
  impl.wait_host(*op);
}

at::Tensor NcclCommunicator::allgather_checked(const at::Tensor& tensor) {
  if (!tensor.is_cuda()) {
    if (impl_->host) return impl_->host->allgather(tensor);
    return allgather(tensor.to(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(impl_->options.device)))).cpu();
  }
  detail::NcclState& impl = *impl_;
  impl.throw_if_failed();
  const at::Tensor& input = tensor;
  const size_t count = impl.check_tensor(input, "allgather");
  std::vector<int64_t> shape{impl.world_size};
  shape.insert(shape.end(), input.sizes().begin(), input.sizes().end());
  at::Tensor output = at::empty(shape, input.options());
  const std::string what = "ncclAllGather of " + std::to_string(input.nbytes()) + " bytes per rank";
  impl.order_after_compute();
  DTRAIN_NCCL_CHECK(impl, ncclAllGather(input.data_ptr(), output.data_ptr(), count, nccl_type(input), impl.comm,
                                        impl.stream),
                    what);
  const std::shared_ptr<detail::Op> op = impl.finish_enqueue(what);
  impl.wait_host(*op);
  return output;
}

void NcclCommunicator::exchange_checked(const at::Tensor& send, at::Tensor& recv, int peer) {
  if (!send.is_cuda()) {
    if (impl_->host) return impl_->host->exchange(send, recv, peer);
    const at::Device gpu(at::kCUDA, static_cast<c10::DeviceIndex>(impl_->options.device));
    at::Tensor staged = at::empty(recv.sizes(), recv.options().device(gpu));
    exchange(send.to(gpu), staged, peer);
    recv.copy_(staged);  // waits for the GPU
    return;
  }
  detail::NcclState& impl = *impl_;
  impl.throw_if_failed();
  const size_t count = impl.check_tensor(send, "exchange");
  const std::string what = "ncclSend/ncclRecv of " + std::to_string(send.nbytes()) + " bytes with rank " + std::to_string(peer);
  impl.order_after_compute();
  DTRAIN_NCCL_CHECK(impl, ncclGroupStart(), what);
  DTRAIN_NCCL_CHECK(impl, ncclSend(send.data_ptr(), count, nccl_type(send), peer, impl.comm, impl.stream), what);
  DTRAIN_NCCL_CHECK(impl, ncclRecv(recv.data_ptr(), count, nccl_type(recv), peer, impl.comm, impl.stream), what);
  DTRAIN_NCCL_CHECK(impl, ncclGroupEnd(), what);
  const std::shared_ptr<detail::Op> op = impl.finish_enqueue(what);
  impl.wait_host(*op);
}

void NcclCommunicator::barrier() {
  // Every collective this rank issued has been handed to the GPU; what remains is the ranks meeting.
  impl_->throw_if_failed();
  if (impl_->host) return impl_->host->barrier();
  at::Tensor token = at::zeros({1}, at::TensorOptions(at::kCUDA).device_index(static_cast<c10::DeviceIndex>(impl_->options.device)));
  allreduce(token, ReduceOp::kSum);
  (void)token.cpu();  // the host waits until every rank has contributed
}

std::string nccl_runtime_version() {
  int code = 0;
  if (ncclGetVersion(&code) != ncclSuccess) return "unknown";
  // NCCL >= 2.9 encodes major * 10000 + minor * 100 + patch.
  return std::to_string(code / 10000) + "." + std::to_string(code % 10000 / 100) + "." + std::to_string(code % 100);
}

}  // namespace dtrain
