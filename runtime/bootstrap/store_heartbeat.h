// Liveness of the ranks when torchrun (or a PyTorchJob) started them, so that a stalled collective can
// name the rank it waits for, as the MPI heartbeat does under mpirun. Every rank counts up a key of its
// own in the session's c10d store every period, on a store connection of its own, and writes what it is
// doing beside it. When a collective stalls, diagnose() reads every rank's count twice a few periods apart:
// a rank whose count stopped is stopped, dead or cut off from the network. A rank that cannot reach the
// store itself says so: it is the one cut off (or the store's host is).
#pragma once

#include <memory>
#include <string>

#include "runtime/bootstrap/session.h"
#include "runtime/util/activity.h"

namespace dtrain {

struct StoreHeartbeatOptions {
  double period_s = 1.0;         // between counts
  double store_timeout_s = 5.0;  // a store operation that takes longer: the store is unreachable
};

class StoreHeartbeat final {
 public:
  // Local (no collective): connects to the session's store and starts the thread. `activity` must
  // outlive the heartbeat. Throws CommError when the store cannot be reached.
  StoreHeartbeat(const Session& session, const Activity& activity, StoreHeartbeatOptions options);
  ~StoreHeartbeat();  // stops the thread, within one store timeout
  StoreHeartbeat(const StoreHeartbeat&) = delete;
  StoreHeartbeat& operator=(const StoreHeartbeat&) = delete;

  // Thread-safe; blocks for about three periods (plus store timeouts when the store is unreachable).
  // Which ranks stopped counting, with their hosts and what each last reported, or that this rank cannot
  // reach the store; "" when every rank still counts.
  std::string diagnose() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace dtrain
