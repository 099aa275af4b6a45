// Liveness of the other ranks, so that a stuck one can be named. A thread on every rank sends this
// rank's Activity to rank 0 every period over a private MPI communicator; rank 0 answers each with its
// own record and the ranks it suspects. Every rank therefore knows, even while one rank is frozen
// (SIGSTOP, a hung node, a cut network), which ranks stopped reporting, where each last was, and which
// live ranks are not in the collective that the others wait in. A frozen rank's threads stop with it,
// so silence is the signal; a rank that is merely busy keeps reporting.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "runtime/bootstrap/session.h"
#include "runtime/config/config.h"
#include "runtime/util/activity.h"

namespace dtrain {

struct HeartbeatOptions {
  double period_s = 1.0;        // between reports
  double stale_after_s = 10.0;  // no report for this long: the rank is stopped, dead or cut off
  double warn_after_s = 60.0;   // a collective waited on this long: warn, naming the ranks not in it
  double timeout_s = kDefaultCommTimeoutS;  // comm.timeout_s: how long stop() waits for the other ranks
};

// Options for a collective timeout of `timeout_s`: a report every min(1 s, timeout_s / 30) (at least
// every 0.1 s), a rank stale after 10 silent periods (at least 2 s), warnings after a fifth of it.
HeartbeatOptions heartbeat_options_for(double timeout_s);

struct HeartbeatCallbacks {
  // A warning about stopped or lagging ranks. Called from the heartbeat thread of one rank only: the
  // lowest-numbered rank that still reports. Unset: written to stderr.
  std::function<void(const std::string& message)> on_warning;
  // Rank 0, from the heartbeat thread: `rank` is ending the job with `message` (see report_fatal).
  std::function<void(int rank, const std::string& message, const ActivitySnapshot& where)> on_peer_fatal;
};

class Heartbeat final {
 public:
  // Collective: duplicates MPI_COMM_WORLD and starts the thread. Needs session.has_thread_multiple()
  // and a world size above 1. `activity` must outlive the heartbeat. Throws CommError.
  Heartbeat(const Session& session, const Activity& activity, HeartbeatOptions options,
            HeartbeatCallbacks callbacks);
  // Stops the thread without the goodbye exchange: for error paths, where peers may be gone and the job
  // is about to be aborted.
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // Collective, at the normal end of a run, before MPI_Finalize: a goodbye exchange after which no
  // heartbeat message is in flight. Throws CommError when a rank does not take part within timeout_s.
  void stop();

  // Thread-safe. Which ranks stopped reporting or are not in the collective the others wait in, with
  // their hosts and what each last reported; "" when there is nothing to say.
  std::string diagnose() const;

  // Ranks other than 0, on a fatal error before the job is aborted: hands `message` and this rank's
  // activity to rank 0, whose on_peer_fatal records it in the run log, and waits up to stale_after_s for
  // its acknowledgement. Returns whether rank 0 acknowledged; false at once on rank 0.
  bool report_fatal(const std::string& message);

  struct State;  // shared with the thread; defined in the .cpp

 private:
  std::unique_ptr<State> state_;
};

}  // namespace dtrain
