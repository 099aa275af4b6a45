#include "runtime/comm/mpi_communicator.h"

#include <ATen/ATen.h>

#include <climits>

#include "runtime/bootstrap/mpi_detail.h"

namespace dtrain {

struct MpiCommunicator::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
};

namespace {

MPI_Datatype mpi_type(const at::Tensor& tensor) {
  switch (tensor.scalar_type()) {
    case at::kFloat: return MPI_FLOAT;
    case at::kDouble: return MPI_DOUBLE;
    case at::kInt: return MPI_INT32_T;
    case at::kLong: return MPI_INT64_T;
    case at::kByte: return MPI_UINT8_T;
    case at::kChar: return MPI_INT8_T;
    default:
      throw CommError(detail::mpi_rank_prefix() + "MPI backend: unsupported dtype " +
                      std::string(c10::toString(tensor.scalar_type())) +
                      "; expected float, double, int8, uint8, int32 or int64");
  }
}

int mpi_count(const at::Tensor& tensor, const char* what) {
  DTRAIN_CHECK(tensor.device().is_cpu(), CommError,
               detail::mpi_rank_prefix() << what << ": MPI backend needs a CPU tensor, got " << tensor.device());
  DTRAIN_CHECK(tensor.is_contiguous(), CommError,
               detail::mpi_rank_prefix() << what << ": tensor must be contiguous (shape " << tensor.sizes() << ")");
  DTRAIN_CHECK(tensor.numel() <= INT_MAX, CommError,
               detail::mpi_rank_prefix() << what << ": " << tensor.numel()
                                         << " elements exceed MPI's int count; split the tensor");
  return static_cast<int>(tensor.numel());
}

class MpiWork final : public Work {
 public:
  MpiWork(at::Tensor tensor, ReduceOp op, int world_size, double timeout_s, MPI_Request request)
      : tensor_(std::move(tensor)), op_(op), world_size_(world_size), timeout_s_(timeout_s), request_(request) {}

  ~MpiWork() override {
    // Only an error path destroys an unfinished work, typically while a peer is dead or stuck, so waiting
    // here could block forever, and MPI cannot cancel a collective. Keep the buffer alive instead, so a
    // late completion never writes into freed memory; the job is about to end anyway.
    if (!finished_) new at::Tensor(std::move(tensor_));  // deliberately never freed
  }

  bool is_completed() override {
    if (finished_) return true;
    int done = 0;
    DTRAIN_MPI_CHECK(MPI_Test(&request_, &done, MPI_STATUS_IGNORE));
    if (done) finish();
    return finished_;
  }

  void wait() override {
    if (finished_) return;
    detail::wait_mpi_request(&request_, timeout_s_,
                             "MPI_Iallreduce of " + std::to_string(tensor_.nbytes()) + " bytes");
    finish();
  }

 private:
  void finish() {
    finished_ = true;
    if (op_ == ReduceOp::kAverage && world_size_ > 1) tensor_.div_(world_size_);
  }

  at::Tensor tensor_;
  ReduceOp op_;
  int world_size_;
  double timeout_s_;
  MPI_Request request_;
  bool finished_ = false;
};

}  // namespace

MpiCommunicator::MpiCommunicator(const MpiSession& session, double timeout_s)
    : impl_(std::make_unique<Impl>()), rank_(session.rank()), world_size_(session.world_size()), timeout_s_(timeout_s) {
  DTRAIN_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &impl_->comm));
  DTRAIN_MPI_CHECK(MPI_Comm_set_errhandler(impl_->comm, MPI_ERRORS_RETURN));
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && impl_->comm != MPI_COMM_NULL) MPI_Comm_free(&impl_->comm);
}

std::unique_ptr<Work> MpiCommunicator::allreduce_async(at::Tensor tensor, ReduceOp op) {
  const int count = mpi_count(tensor, "allreduce");
  const MPI_Datatype type = mpi_type(tensor);
  DTRAIN_CHECK(op == ReduceOp::kSum || tensor.is_floating_point(), CommError,
               detail::mpi_rank_prefix() << "allreduce average needs a floating-point tensor, got "
                                         << tensor.scalar_type());
  MPI_Request request = MPI_REQUEST_NULL;
  DTRAIN_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, tensor.data_ptr(), count, type, MPI_SUM, impl_->comm, &request));
  return std::make_unique<MpiWork>(std::move(tensor), op, world_size_, timeout_s_, request);
}

void MpiCommunicator::broadcast(at::Tensor& tensor, int root) {
  DTRAIN_CHECK(root >= 0 && root < world_size_, CommError,
               detail::mpi_rank_prefix() << "broadcast root " << root << " out of range [0, " << world_size_ << ")");
  const int count = mpi_count(tensor, "broadcast");
  MPI_Request request = MPI_REQUEST_NULL;
  DTRAIN_MPI_CHECK(MPI_Ibcast(tensor.data_ptr(), count, mpi_type(tensor), root, impl_->comm, &request));
  detail::wait_mpi_request(&request, timeout_s_, "MPI_Ibcast of " + std::to_string(tensor.nbytes()) + " bytes");
}

at::Tensor MpiCommunicator::allgather(const at::Tensor& tensor) {
  at::Tensor input = tensor.contiguous();
  const int count = mpi_count(input, "allgather");
  std::vector<int64_t> shape{world_size_};
  shape.insert(shape.end(), input.sizes().begin(), input.sizes().end());
  at::Tensor output = at::empty(shape, input.options());
  MPI_Request request = MPI_REQUEST_NULL;
  DTRAIN_MPI_CHECK(MPI_Iallgather(input.data_ptr(), count, mpi_type(input), output.data_ptr(), count,
                                  mpi_type(input), impl_->comm, &request));
  detail::wait_mpi_request(&request, timeout_s_, "MPI_Iallgather");
  return output;
}

void MpiCommunicator::barrier() {
  MPI_Request request = MPI_REQUEST_NULL;
  DTRAIN_MPI_CHECK(MPI_Ibarrier(impl_->comm, &request));
  detail::wait_mpi_request(&request, timeout_s_, "MPI_Ibarrier");
}

}  // namespace dtrain
