#include "runtime/bootstrap/mpi_detail.h"

#include <sched.h>
#include <time.h>

#include <algorithm>

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

void throw_wait_timeout(const WaitOptions& wait, const std::string& what) {
  throw CommError(mpi_origin(), with_stall(wait, timed_out_text(wait, what), /*guess=*/true));
}

void wait_mpi_request(MPI_Request* request, const WaitOptions& wait, const std::string& what) {
  // Looks come at least every 64 polls, each poll at most 250 us apart: a second without one is this
  // process having been stopped, which does not count against the peers.
  WaitClock watch(1.0);
  WaitScope scope(wait.activity, what);
  // Open MPI moves a non-blocking collective's data only inside MPI calls, and MPI_Wait itself spins, so
  // a rank waiting for a slower peer or a slow link would burn its CPU share (a pod's quota) doing
  // nothing. This wait polls without pause for its first microseconds, where small collectives end, then
  // sleeps between polls, doubling the pause up to kMaxPause. The kernel keeps sending and receiving
  // what MPI handed it while the thread sleeps, so the pause delays only the next round of the
  // collective's schedule. Measured on deploy/local/cluster.sh (docs/benchmarks.md). comm.wait active
  // polls throughout, yielding the core only every few thousand polls.
  constexpr double kSpin = 50e-6;
  constexpr long kFirstPauseNs = 10'000;
  constexpr long kMaxPauseNs = 250'000;
  long pause_ns = kFirstPauseNs;
  for (unsigned polls = 1;; ++polls) {
    int done = 0;
    DTRAIN_MPI_CHECK(MPI_Test(request, &done, MPI_STATUS_IGNORE));
    if (done) return;
    const double waited = polls % 64 == 0 || pause_ns > kFirstPauseNs ? watch.waited_s() : 0.0;
    if (waited > wait.timeout_s) throw_wait_timeout(wait, what);
    if (wait.active) {
      if (polls % 4096 == 0) sched_yield();  // with more ranks than cores, let a peer reach the collective
    } else if (waited > kSpin || pause_ns > kFirstPauseNs) {
      const timespec pause{0, pause_ns};
      nanosleep(&pause, nullptr);
      pause_ns = std::min(2 * pause_ns, kMaxPauseNs);
    }
  }
}

}  // namespace dtrain::detail
