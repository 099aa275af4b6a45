// How a rank waits for a collective: how long, where it records that it is waiting, and who explains a
// wait that timed out (which peer is stuck, and where it was). No MPI types, so any layer can fill it.
#pragma once

#include <functional>
#include <string>

#include "runtime/util/activity.h"

namespace dtrain {

struct WaitOptions {
  double timeout_s = 0.0;  // from comm.timeout_s; a wait longer than this throws CommError
  Activity* activity = nullptr;  // marks the wait for the heartbeat; may be null
  // Appended to a timeout's message, e.g. Heartbeat::diagnose(). May be empty.
  std::function<std::string()> explain_stall;
  // MPI waits poll without pause (comm.wait active, and always with every rank on one host) instead of
  // sleeping between polls.
  bool active = false;
};

// The one wording of a wait that ended without its collective, whatever the backend (MPI, NCCL, Gloo,
// the c10d store):
//   "<what> did not complete within <timeout_s> s (comm.timeout_s)"
std::string timed_out_text(const WaitOptions& wait, const std::string& what);
// `message`, then the heartbeat's view of which peer is stuck and where ("; rank 3/4 (host n3) has
// stopped reporting ..."); without one, and with `guess`, "; a peer rank is dead, stuck or far behind".
std::string with_stall(const WaitOptions& wait, std::string message, bool guess);

}  // namespace dtrain
