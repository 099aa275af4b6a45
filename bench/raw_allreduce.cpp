#include "bench/raw_allreduce.h"

#include <mpi.h>

#include <stdexcept>

#include "runtime/util/error.h"

#if DTRAIN_WITH_NCCL
#include <cuda_runtime.h>
#include <nccl.h>
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
  }
  ~RawNccl() override {
    cudaStreamDestroy(stream_);
    ncclCommDestroy(comm_);
  }
  std::string name() const override { return "ncclAllReduce"; }
  void sum(at::Tensor& tensor) override {
    check_nccl(ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), static_cast<size_t>(tensor.numel()), ncclFloat32,
                             ncclSum, comm_, stream_),
               "ncclAllReduce");
  }
  void synchronize() override { check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

 private:
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
};
#endif

}  // namespace

std::unique_ptr<RawAllreduce> make_raw_allreduce(BackendKind backend, const MpiSession& session, int cuda_device) {
  if (backend == BackendKind::kMpi) return std::make_unique<RawMpi>();
#if DTRAIN_WITH_NCCL
  if (backend == BackendKind::kNccl) return std::make_unique<RawNccl>(session, cuda_device);
#endif
  throw ConfigError(std::string("no raw allreduce for backend '") + to_string(backend) + "' in this build");
}

}  // namespace dtrain::bench
