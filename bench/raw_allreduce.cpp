#include "bench/raw_allreduce.h"

#include <mpi.h>

#include <stdexcept>

#include "runtime/util/error.h"

#if DTRAIN_WITH_NCCL
#include <cuda_runtime.h>
#include <nccl.h>
#endif
#if DTRAIN_WITH_GLOO
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <chrono>
#include <cstdlib>
#endif

namespace dtrain::bench {
namespace {

void check_mpi(int rc, const char* call) {
  if (rc != MPI_SUCCESS) throw CommError(std::string(call) + " failed with MPI error " + std::to_string(rc));
}

class RawMpi final : public RawAllreduce {
 public:
  std::string name() const override { return "MPI_Allreduce"; }
  void sum(at::Tensor& tensor) override {
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, tensor.data_ptr(), static_cast<int>(tensor.numel()), MPI_FLOAT, MPI_SUM,
                            MPI_COMM_WORLD),
              "MPI_Allreduce");
  }
  void synchronize() override {}
};

#if DTRAIN_WITH_NCCL
void check_nccl(ncclResult_t rc, const char* call) {
  if (rc != ncclSuccess) throw CommError(std::string(call) + " failed (" + ncclGetErrorString(rc) + ")");
}
void check_cuda(cudaError_t rc, const char* call) {
  if (rc != cudaSuccess) throw CommError(std::string(call) + " failed (" + cudaGetErrorString(rc) + ")");
}

class RawNccl final : public RawAllreduce {
 public:
  RawNccl(const MpiSession& session, int device) {
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
    ncclUniqueId id{};
    if (session.is_root()) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    check_mpi(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast");
    check_nccl(ncclCommInitRank(&comm_, session.world_size(), id, session.rank()), "ncclCommInitRank");
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cuda(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreate");
  }
  ~RawNccl() override {
    cudaEventDestroy(done_);
    cudaEventDestroy(ready_);
    cudaStreamDestroy(stream_);
    ncclCommDestroy(comm_);
  }
  std::string name() const override { return "ncclAllReduce"; }
  void sum(at::Tensor& tensor) override {
    // The caller's stream is the legacy default stream, LibTorch's current stream unless one is set.
    if (stage_ >= 1) {
      check_cuda(cudaEventRecord(ready_, cudaStreamLegacy), "cudaEventRecord");
      check_cuda(cudaStreamWaitEvent(stream_, ready_, 0), "cudaStreamWaitEvent");
    }
    check_nccl(ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), static_cast<size_t>(tensor.numel()), ncclFloat32,
                             ncclSum, comm_, stream_),
               "ncclAllReduce");
    if (stage_ >= 2) check_cuda(cudaEventRecord(done_, stream_), "cudaEventRecord");
    if (stage_ >= 3) check_cuda(cudaStreamWaitEvent(cudaStreamLegacy, done_, 0), "cudaStreamWaitEvent");
  }
  void synchronize() override {
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    check_cuda(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize");
  }
  int max_stage() const override { return 3; }
  void set_stage(int stage) override { stage_ = stage; }

 private:
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  cudaEvent_t done_ = nullptr;
  int stage_ = 0;
};
#endif

#if DTRAIN_WITH_GLOO
class RawGloo final : public RawAllreduce {
 public:
  RawGloo(MpiSession& session, double timeout_s) {
    WaitOptions wait;
    wait.timeout_s = timeout_s;
    const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000.0));
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    const char* interface = std::getenv("GLOO_SOCKET_IFNAME");
    options->devices.push_back(interface != nullptr && *interface != '\0'
                                   ? c10d::ProcessGroupGloo::createDeviceForInterface(interface)
                                   : c10d::ProcessGroupGloo::createDefaultDevice());
    group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>("bench/raw-gloo", session.store(wait)), session.rank(),
        session.world_size(), options);
  }
  std::string name() const override { return "ProcessGroupGloo::allreduce"; }
  void sum(at::Tensor& tensor) override {
    std::vector<at::Tensor> tensors{tensor};
    group_->allreduce(tensors)->wait();
  }
  void synchronize() override {}

 private:
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
};
#endif

}  // namespace

std::unique_ptr<RawAllreduce> make_raw_allreduce(BackendKind backend, MpiSession& session, int cuda_device,
                                                 double timeout_s) {
  if (backend == BackendKind::kMpi) return std::make_unique<RawMpi>();
#if DTRAIN_WITH_GLOO
  if (backend == BackendKind::kGloo) return std::make_unique<RawGloo>(session, timeout_s);
#endif
#if DTRAIN_WITH_NCCL
  if (backend == BackendKind::kNccl) return std::make_unique<RawNccl>(session, cuda_device);
#endif
  throw ConfigError(std::string("no raw allreduce for backend '") + to_string(backend) + "' in this build");
}

}  // namespace dtrain::bench
