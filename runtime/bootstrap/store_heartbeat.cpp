#include "runtime/bootstrap/store_heartbeat.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/util/check.h"
#include "runtime/util/error.h"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;

std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", s);
  return text;
}

}  // namespace

struct StoreHeartbeat::State {
  const Activity* activity = nullptr;
  StoreHeartbeatOptions options;
  int rank = 0;
  int world_size = 1;
  std::vector<std::string> hosts;
  std::string address;  // "node1:29500", for messages
  // A connection of the heartbeat's own: a client blocked here (the store unreachable) holds up neither
  // the session's collectives nor Gloo's. Operations are serialised by store_mutex.
  c10::intrusive_ptr<c10d::Store> store;
  mutable std::mutex store_mutex;

  mutable std::mutex mutex;  // guards what follows
  std::condition_variable wake;
  bool stopping = false;
  bool reachable = true;
  Clock::time_point last_reached = Clock::now();

  static std::string count_key(int r) { return "alive/" + std::to_string(r); }
  static std::string doing_key(int r) { return "doing/" + std::to_string(r); }
  std::string who(int r) const {
    return "rank " + std::to_string(r) + "/" + std::to_string(world_size) + " (host " + hosts[static_cast<size_t>(r)] + ")";
  }

  void beat(const std::string& doing) {
    bool ok = true;
    try {
      std::lock_guard<std::mutex> lock(store_mutex);
      store->set(doing_key(rank), std::vector<uint8_t>(doing.begin(), doing.end()));
      // add() waits for the store's answer, set() does not: only add() finds out that the store is
      // unreachable, within the connection's timeout.
      store->add(count_key(rank), 1);
    } catch (const std::exception&) {
      ok = false;
    }
    std::lock_guard<std::mutex> lock(mutex);
    reachable = ok;
    if (ok) last_reached = Clock::now();
  }

  void loop() {
    std::unique_lock<std::mutex> lock(mutex);
    while (!stopping) {
      // Read under the lock that the destructor takes: once it returns, activity is not touched again.
      const std::string doing = describe(activity->snapshot());
      lock.unlock();
      beat(doing);
      lock.lock();
      wake.wait_for(lock, std::chrono::duration<double>(options.period_s), [this] { return stopping; });
    }
  }

  // Every rank's count, or nothing when the store does not answer.
  bool read_counts(std::vector<int64_t>& counts) const {
    counts.assign(static_cast<size_t>(world_size), 0);
    try {
      std::lock_guard<std::mutex> lock(store_mutex);
      for (int r = 0; r < world_size; ++r) counts[static_cast<size_t>(r)] = store->add(count_key(r), 0);
    } catch (const std::exception&) {
      return false;
    }
    return true;
  }

  std::string doing_of(int r) const {
    try {
      std::lock_guard<std::mutex> lock(store_mutex);
      const std::vector<uint8_t> bytes = store->get(doing_key(r));
      return std::string(bytes.begin(), bytes.end());
    } catch (const std::exception&) {
      return "unknown";
    }
  }

  std::string unreachable_text(double silent_s) const {
    return "this rank (host " + hosts[static_cast<size_t>(rank)] + ") has not reached the c10d store at " + address +
           " for " + seconds_text(silent_s) +
           " s: this host is cut off from the others (or the store's host is down), so the peers it waits for "
           "are unreachable from here";
  }

  std::string diagnose() const {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!reachable) {
        return unreachable_text(std::chrono::duration<double>(Clock::now() - last_reached).count());
      }
    }
    const Clock::time_point started = Clock::now();
    std::vector<int64_t> before, after;
    if (!read_counts(before)) return unreachable_text(std::chrono::duration<double>(Clock::now() - started).count());
    // Three periods: a live rank counts at least twice in them, however its beats and this read interleave.
    std::this_thread::sleep_for(std::chrono::duration<double>(3 * options.period_s));
    if (!read_counts(after)) return unreachable_text(std::chrono::duration<double>(Clock::now() - started).count());
    std::string text;
    for (int r = 0; r < world_size; ++r) {
      if (after[static_cast<size_t>(r)] != before[static_cast<size_t>(r)]) continue;
      text += (text.empty() ? "" : "; ") + who(r) + " has stopped reporting to the store (stopped, dead or cut off " +
              "from the network); it last reported " + doing_of(r);
    }
    return text;
  }
};

StoreHeartbeat::StoreHeartbeat(const Session& session, const Activity& activity, StoreHeartbeatOptions options)
    : state_(std::make_shared<State>()) {
  const std::optional<StoreEndpoint> endpoint = session.store_endpoint();
  DTRAIN_CHECK_AT(endpoint.has_value(), CommError, session.origin(),
                  "the store heartbeat needs ranks that met through a launcher's c10d store (comm.bootstrap 'env')");
  State& s = *state_;
  s.activity = &activity;
  s.options = options;
  s.rank = session.rank();
  s.world_size = session.world_size();
  s.hosts = session.hostnames();
  s.address = endpoint->host + ":" + std::to_string(endpoint->port);
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(endpoint->port);
  store_options.isServer = false;
  store_options.waitWorkers = false;
  store_options.timeout = std::chrono::milliseconds(static_cast<int64_t>(options.store_timeout_s * 1000.0));
  try {
    auto tcp = c10::make_intrusive<c10d::TCPStore>(endpoint->host, store_options);
    // The keys of this start of the group only, beside the session's own.
    s.store = c10::make_intrusive<c10d::PrefixStore>("dtrain/heartbeat_" + std::to_string(endpoint->restart_count), tcp);
  } catch (const std::exception& e) {
    throw CommError(session.origin(), "the heartbeat cannot reach the c10d store at " + s.address + ": " + e.what());
  }
  s.beat(describe(activity.snapshot()));
  std::shared_ptr<State> state = state_;
  std::thread([state] { state->loop(); }).detach();
}

StoreHeartbeat::~StoreHeartbeat() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  // The thread shares the state and ends at its next wake-up; a beat blocked on an unreachable store
  // ends within the store's timeout, without holding up this rank's exit.
}

std::string StoreHeartbeat::diagnose() const { return state_->diagnose(); }

}  // namespace dtrain
