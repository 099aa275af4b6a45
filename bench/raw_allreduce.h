// The library's own allreduce, called directly on the same buffers the benchmark gives dtrain: the
// baseline that dtrain's communicator layer is measured against.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>

#include "runtime/bootstrap/mpi_session.h"
#include "runtime/config/config.h"

namespace dtrain::bench {

class RawAllreduce {
 public:
  virtual ~RawAllreduce() = default;
  virtual std::string name() const = 0;  // e.g. "MPI_Allreduce"
  // Collective, in-place float sum. MPI returns with the result in place; NCCL queues it on its stream.
  virtual void sum(at::Tensor& tensor) = 0;
  // Returns once every sum() issued so far has completed.
  virtual void synchronize() = 0;
  // How many of the stream-ordering calls dtrain's NCCL communicator makes around each collective sum()
  // makes too (NCCL only, 0 to 3): 1 marks the caller's stream and has the collective's stream wait for
  // it, 2 also marks the collective's end, 3 also has the caller's stream wait for that. Splits dtrain's
  // cost per call into NCCL's, the ordering's and its own (dtrain_allreduce_bench --breakdown).
  virtual int max_stage() const { return 0; }
  virtual void set_stage(int /*stage*/) {}
};

// MPI: blocking MPI_Allreduce on MPI_COMM_WORLD. NCCL: ncclAllReduce on a communicator and stream of
// its own, as nccl-tests time it: iterations queued back to back, one synchronisation at the end. Gloo:
// LibTorch's ProcessGroupGloo allreduce, waited on, in a process group of its own with PyTorch's default
// options (2 threads; the interface in GLOO_SOCKET_IFNAME): what torch.distributed.all_reduce runs on
// the gloo backend. Throws ConfigError for a backend this build lacks.
std::unique_ptr<RawAllreduce> make_raw_allreduce(BackendKind backend, MpiSession& session, int cuda_device,
                                                 double timeout_s);

}  // namespace dtrain::bench
