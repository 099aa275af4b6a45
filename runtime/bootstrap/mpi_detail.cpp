#include "runtime/bootstrap/mpi_detail.h"

#include <sched.h>

#include <sstream>

#include "runtime/util/timer.h"

namespace dtrain::detail {

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(length));
}

ErrorOrigin mpi_origin() {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  ErrorOrigin origin;
  if (!initialized || finalized) return origin;
  MPI_Comm_rank(MPI_COMM_WORLD, &origin.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &origin.world_size);
  return origin;
}

void wait_mpi_request(MPI_Request* request, const WaitOptions& wait, const std::string& what) {
  Stopwatch watch;
  WaitScope scope(wait.activity, what);
  // MPI_Test drives progress like MPI_Wait does; checking the clock every few thousand polls keeps the
  // timeout from adding measurable latency to small collectives.
  for (unsigned polls = 1;; ++polls) {
    int done = 0;
    DTRAIN_MPI_CHECK(MPI_Test(request, &done, MPI_STATUS_IGNORE));
    if (done) return;
    if (polls % 4096 == 0) {
      if (watch.elapsed_s() > wait.timeout_s) {
        std::ostringstream os;
        os << what << " did not complete within " << wait.timeout_s << " s (comm.timeout_s)";
        const std::string peers = wait.explain_stall ? wait.explain_stall() : "";
        os << "; " << (peers.empty() ? "a peer rank is dead, stuck or far behind" : peers);
        throw CommError(mpi_origin(), os.str());
      }
      // With more ranks than cores, give the core to a peer that still has to reach the collective.
      sched_yield();
    }
  }
}

}  // namespace dtrain::detail
