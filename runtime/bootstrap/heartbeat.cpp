#include "runtime/bootstrap/heartbeat.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/bootstrap/mpi_detail.h"
#include "runtime/util/strings.h"
#include "runtime/util/terminal.h"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;

// One tag for every kind: MPI keeps the messages between two ranks in order only within a tag, and the
// goodbye must arrive after everything sent before it.
constexpr int kTag = 1;
constexpr size_t kMaxWaitingText = 96;
constexpr size_t kMaxSuspectsSent = 16;
constexpr size_t kMaxNamed = 8;  // ranks named in one message; the rest are counted

enum class Kind : uint8_t { kBeat = 1, kDigest, kFatal, kFatalAck, kBye };

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string format_s(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", s);
  return text;
}

// Fixed-size fields in native layout: every rank of a job runs the same binary on the same architecture.
class Writer {
 public:
  explicit Writer(Kind kind, int rank) {
    put(static_cast<uint8_t>(kind));
    put(static_cast<int32_t>(rank));
  }
  template <class T>
  void put(const T& value) {
    const char* p = reinterpret_cast<const char*>(&value);
    bytes_.insert(bytes_.end(), p, p + sizeof value);
  }
  void put_text(const std::string& text, size_t max_bytes) {
    const uint32_t n = static_cast<uint32_t>(std::min(text.size(), max_bytes));
    put(n);
    bytes_.insert(bytes_.end(), text.begin(), text.begin() + n);
  }
  void put_activity(const ActivitySnapshot& a) {
    put(static_cast<uint8_t>(a.phase));
    put(a.epoch);
    put(a.step);
    put(a.waiting_s);
    put_text(a.waiting_for, kMaxWaitingText);
  }
  std::vector<char> take() { return std::move(bytes_); }

 private:
  std::vector<char> bytes_;
};

class Reader {
 public:
  explicit Reader(const std::vector<char>& bytes) : bytes_(bytes) {}
  template <class T>
  T get() {
    need(sizeof(T));
    T value;
    std::memcpy(&value, bytes_.data() + pos_, sizeof value);
    pos_ += sizeof value;
    return value;
  }
  std::string get_text() {
    const uint32_t n = get<uint32_t>();
    need(n);
    std::string text(bytes_.data() + pos_, n);
    pos_ += n;
    return text;
  }
  ActivitySnapshot get_activity() {
    ActivitySnapshot a;
    const uint8_t phase = get<uint8_t>();
    if (phase > static_cast<uint8_t>(Phase::kFinishing)) throw CommError("heartbeat: malformed message");
    a.phase = static_cast<Phase>(phase);
    a.epoch = get<int64_t>();
    a.step = get<int64_t>();
    a.waiting_s = get<double>();
    a.waiting_for = get_text();
    return a;
  }

 private:
  void need(size_t n) const {
    if (pos_ + n > bytes_.size()) throw CommError("heartbeat: truncated message");
  }
  const std::vector<char>& bytes_;
  size_t pos_ = 0;
};

// "0, 2-5, 7"
std::string rank_ranges(const std::vector<int>& ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    text += (text.empty() ? "" : ", ") + std::to_string(ranks[i]) + (j > i ? "-" + std::to_string(ranks[j]) : "");
    i = j + 1;
  }
  return text;
}

// What a rank does, without the seconds it has waited, so that ranks doing the same thing group together.
std::string doing(ActivitySnapshot a) {
  a.waiting_s = 0.0;
  std::string text = describe(a);
  const std::string waiting = "; waiting 0.0 s in ";
  const auto at = text.find(waiting);
  return at == std::string::npos ? text : text.substr(0, at) + "; waiting in " + text.substr(at + waiting.size());
}

struct Outgoing {
  int dest = 0;
  MPI_Request request = MPI_REQUEST_NULL;
  std::vector<char> bytes;
};

}  // namespace

// Named, not anonymous: Heartbeat::State (a member of an exported class) holds them.
namespace heartbeat_detail {

struct PeerRecord {
  bool heard = false;
  Clock::time_point last_heard;
  ActivitySnapshot activity;  // as reported at last_heard
  bool said_bye = false;
  bool warned_silent = false;
};

struct Suspect {
  int rank = 0;
  bool silent = false;  // stopped reporting (else: reports, but is not in the collective others wait in)
  double silent_s = 0.0;
  ActivitySnapshot activity;
};

}  // namespace heartbeat_detail

HeartbeatOptions heartbeat_options_for(double timeout_s) {
  HeartbeatOptions options;
  options.period_s = std::clamp(timeout_s / 30.0, 0.1, 1.0);
  options.stale_after_s = std::max(10.0 * options.period_s, 2.0);
  // Not before a frozen rank counts as silent, or it would be reported as alive but elsewhere.
  options.warn_after_s = std::max(timeout_s / 5.0, options.stale_after_s + 2.0 * options.period_s);
  options.timeout_s = timeout_s;
  return options;
}

struct Heartbeat::State {
  using PeerRecord = heartbeat_detail::PeerRecord;
  using Suspect = heartbeat_detail::Suspect;

  State(const Session& session, const Activity& a, HeartbeatOptions o, HeartbeatCallbacks c)
      : rank(session.rank()),
        world_size(session.world_size()),
        hosts(session.hostnames()),
        activity(a),
        options(o),
        callbacks(std::move(c)),
        started(Clock::now()),
        peers(static_cast<size_t>(world_size)) {}

  const int rank;
  const int world_size;
  const std::vector<std::string> hosts;
  const Activity& activity;
  const HeartbeatOptions options;
  const HeartbeatCallbacks callbacks;
  Clock::time_point started;  // silence of a rank never heard from counts from here
  MPI_Comm comm = MPI_COMM_NULL;

  mutable std::mutex mutex;
  std::condition_variable changed;
  // Rank 0: one record per rank. Other ranks: peers[0] is rank 0; the rest is known from its digests.
  std::vector<PeerRecord> peers;
  std::vector<Suspect> digest_suspects;  // other ranks: as of the last digest
  Clock::time_point digest_time;
  bool stopping = false;     // stop(): say goodbye, then end
  bool quitting = false;     // destructor: end now
  bool thread_done = false;
  std::string thread_error;  // why the thread ended early, if it did
  std::string fatal_message;  // report_fatal(): waiting to be sent
  ActivitySnapshot fatal_where;
  bool fatal_pending = false;
  bool fatal_acked = false;
  Clock::time_point next_wait_warning;  // rank 0: when lagging ranks may be named again
  std::thread thread;

  bool is_root() const { return rank == 0; }

  std::string who(int r) const {
    return "rank " + std::to_string(r) + "/" + std::to_string(world_size) + " (host " + hosts[static_cast<size_t>(r)] + ")";
  }

  double silent_s(const PeerRecord& p, Clock::time_point now) const {
    return seconds(now - (p.heard ? p.last_heard : started));
  }

  // How long `p` has been waiting in a collective by now, extrapolated from its last report.
  static double waited_s(const PeerRecord& p, Clock::time_point now) {
    if (!p.heard || p.activity.waiting_for.empty()) return 0.0;
    return p.activity.waiting_s + seconds(now - p.last_heard);
  }

  // Rank 0, mutex held: ranks that stopped reporting, and, once some rank has waited `laggard_after_s`
  // in a collective, the reporting ranks that are not in one.
  std::vector<Suspect> suspects(Clock::time_point now, double laggard_after_s) const {
    const ActivitySnapshot own = activity.snapshot();
    std::vector<Suspect> found;
    double longest_wait = own.waiting_for.empty() ? 0.0 : own.waiting_s;
    for (int r = 1; r < world_size; ++r) {
      const PeerRecord& p = peers[static_cast<size_t>(r)];
      const double silent = silent_s(p, now);
      if (p.said_bye) continue;
      if (silent > options.stale_after_s) {
        found.push_back(Suspect{r, true, silent, p.activity});
      } else {
        longest_wait = std::max(longest_wait, waited_s(p, now));
      }
    }
    if (longest_wait >= laggard_after_s && longest_wait > 0.0) {
      if (own.waiting_for.empty()) found.push_back(Suspect{0, false, 0.0, own});
      for (int r = 1; r < world_size; ++r) {
        const PeerRecord& p = peers[static_cast<size_t>(r)];
        if (!p.said_bye && p.heard && silent_s(p, now) <= options.stale_after_s && p.activity.waiting_for.empty()) {
          found.push_back(Suspect{r, false, silent_s(p, now), p.activity});
        }
      }
    }
    std::sort(found.begin(), found.end(), [](const Suspect& a, const Suspect& b) { return a.rank < b.rank; });
    return found;
  }

  // Other ranks, mutex held: rank 0 if it went silent, then the suspects of its last digest.
  std::vector<Suspect> known_suspects(Clock::time_point now) const {
    std::vector<Suspect> found;
    const double root_silent_s = silent_s(peers[0], now);
    const bool root_silent = root_silent_s > options.stale_after_s;
    if (root_silent) found.push_back(Suspect{0, true, root_silent_s, peers[0].activity});
    for (const Suspect& s : digest_suspects) {
      if (!(root_silent && s.rank == 0)) found.push_back(s);  // rank 0's own view of itself is older
    }
    return found;
  }

  std::string describe_suspects(const std::vector<Suspect>& found) const {
    std::string text;
    for (size_t i = 0; i < found.size() && i < kMaxNamed; ++i) {
      const Suspect& s = found[i];
      if (!text.empty()) text += "; ";
      if (s.silent) {
        text += who(s.rank) + " has sent no heartbeat for " + format_s(s.silent_s) +
                " s (stopped, dead or cut off from the network); it last reported " + describe(s.activity);
      } else {
        text += who(s.rank) + " is alive but not in a collective: " + describe(s.activity);
      }
    }
    if (found.size() > kMaxNamed) text += "; and " + std::to_string(found.size() - kMaxNamed) + " more";
    return text;
  }

  // Rank 0, mutex held: what the ranks that are not suspects do, grouped ("ranks 0, 2-3: training, epoch
  // 1, step 4; waiting in MPI_Iallreduce of 4724264 bytes").
  std::string others(const std::vector<Suspect>& found) const {
    std::vector<std::pair<std::string, std::vector<int>>> groups;
    for (int r = 0; r < world_size; ++r) {
      if (std::any_of(found.begin(), found.end(), [r](const Suspect& s) { return s.rank == r; })) continue;
      const PeerRecord& p = peers[static_cast<size_t>(r)];
      if (r != 0 && !p.heard) continue;
      const std::string what = doing(r == 0 ? activity.snapshot() : p.activity);
      auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == what; });
      if (it == groups.end()) {
        groups.emplace_back(what, std::vector<int>{r});
      } else {
        it->second.push_back(r);
      }
    }
    std::string text;
    for (size_t i = 0; i < groups.size() && i < 4; ++i) {
      const auto& [what, ranks] = groups[i];
      text += (text.empty() ? "" : "; ") + std::string(ranks.size() == 1 ? "rank " : "ranks ") + rank_ranges(ranks) +
              ": " + what;
    }
    if (groups.size() > 4) text += "; and " + std::to_string(groups.size() - 4) + " more groups";
    return text;
  }

  // Mutex held.
  std::string diagnose_locked() const {
    const Clock::time_point now = Clock::now();
    if (is_root()) {
      const std::vector<Suspect> found = suspects(now, 0.0);
      const std::string rest = others(found);
      if (found.empty()) return "every rank still sends its heartbeat (" + rest + ")";
      return describe_suspects(found) + (rest.empty() ? "" : ". The others: " + rest);
    }
    const std::vector<Suspect> found = known_suspects(now);
    std::string text = describe_suspects(found);
    if (peers[0].heard && !digest_suspects.empty()) {
      text += " (as rank 0 saw it " + format_s(seconds(now - digest_time)) + " s ago)";
    }
    const bool root_suspect = std::any_of(found.begin(), found.end(), [](const Suspect& s) { return s.rank == 0; });
    if (!root_suspect && peers[0].heard) {
      text += std::string(text.empty() ? "" : ". ") + "rank 0 reported " + describe(peers[0].activity) + " " +
              format_s(seconds(now - peers[0].last_heard)) + " s ago";
    }
    return text.empty() ? "rank 0 has not reported yet" : text;
  }

  // Mutex held: this rank speaks for the job when every lower rank has gone silent.
  bool is_reporter(Clock::time_point now) const {
    if (is_root()) return true;
    if (silent_s(peers[0], now) <= options.stale_after_s) return false;
    for (int r = 1; r < rank; ++r) {
      const bool silent = std::any_of(digest_suspects.begin(), digest_suspects.end(),
                                      [r](const Suspect& s) { return s.rank == r && s.silent; });
      if (!silent) return false;
    }
    return true;
  }

  // Mutex held: the warnings due now (emitted by the caller without the lock).
  std::vector<std::string> warnings_due(Clock::time_point now) {
    std::vector<std::string> due;
    if (!is_reporter(now)) return due;
    const std::string limit = " Ranks waiting for it fail after comm.timeout_s (" + format_s(options.timeout_s) + " s).";
    const int first = is_root() ? 1 : 0;
    const int last = is_root() ? world_size : 1;
    for (int r = first; r < last; ++r) {
      PeerRecord& p = peers[static_cast<size_t>(r)];
      if (p.said_bye) continue;
      const bool silent = silent_s(p, now) > options.stale_after_s;
      if (silent && !p.warned_silent) {
        p.warned_silent = true;
        due.push_back(describe_suspects({Suspect{r, true, silent_s(p, now), p.activity}}) + "." + limit);
      } else if (!silent && p.warned_silent) {
        p.warned_silent = false;
        due.push_back(who(r) + " sends its heartbeat again");
      }
    }
    if (is_root()) {
      std::vector<Suspect> lagging;
      for (const Suspect& s : suspects(now, options.warn_after_s)) {
        if (!s.silent) lagging.push_back(s);
      }
      if (lagging.empty()) {
        next_wait_warning = now;
      } else if (now >= next_wait_warning) {
        next_wait_warning = now + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(options.warn_after_s));
        int waiter = 0;
        ActivitySnapshot longest = activity.snapshot();
        if (longest.waiting_for.empty()) longest.waiting_s = 0.0;
        for (int r = 1; r < world_size; ++r) {
          const PeerRecord& p = peers[static_cast<size_t>(r)];
          if (!p.said_bye && waited_s(p, now) > longest.waiting_s) {
            waiter = r;
            longest = p.activity;
            longest.waiting_s = waited_s(p, now);
          }
        }
        due.push_back(who(waiter) + " has waited " + format_s(longest.waiting_s) + " s in " + longest.waiting_for +
                      "; " + describe_suspects(lagging) + ". The wait fails after comm.timeout_s (" +
                      format_s(options.timeout_s) + " s).");
      }
    }
    return due;
  }

  void send(std::vector<Outgoing>& outgoing, int dest, std::vector<char> bytes) {
    outgoing.push_back(Outgoing{dest, MPI_REQUEST_NULL, std::move(bytes)});
    Outgoing& o = outgoing.back();
    DTRAIN_MPI_CHECK(MPI_Isend(o.bytes.data(), static_cast<int>(o.bytes.size()), MPI_BYTE, dest, kTag, comm, &o.request));
  }

  static bool sending_to(const std::vector<Outgoing>& outgoing, int dest) {
    return std::any_of(outgoing.begin(), outgoing.end(), [dest](const Outgoing& o) { return o.dest == dest; });
  }

  void complete_sends(std::vector<Outgoing>& outgoing) {
    for (auto it = outgoing.begin(); it != outgoing.end();) {
      int done = 0;
      DTRAIN_MPI_CHECK(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE));
      it = done ? outgoing.erase(it) : it + 1;
    }
  }

  // Receives everything queued for this rank. Returns true once rank 0's goodbye arrived (other ranks).
  bool drain(std::vector<Outgoing>& outgoing, bool& root_said_bye) {
    for (;;) {
      int flag = 0;
      MPI_Status status;
      DTRAIN_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, kTag, comm, &flag, &status));
      if (!flag) return root_said_bye;
      int count = 0;
      DTRAIN_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &count));
      std::vector<char> bytes(static_cast<size_t>(count));
      DTRAIN_MPI_CHECK(MPI_Recv(bytes.data(), count, MPI_BYTE, status.MPI_SOURCE, kTag, comm, MPI_STATUS_IGNORE));
      Reader in(bytes);
      const Kind kind = static_cast<Kind>(in.get<uint8_t>());
      in.get<int32_t>();  // the sender's rank as it wrote it; MPI's status is the one to trust
      const int from = status.MPI_SOURCE;
      const Clock::time_point now = Clock::now();
      if (kind == Kind::kFatal) {
        const ActivitySnapshot where = in.get_activity();
        const std::string message = in.get_text();
        if (callbacks.on_peer_fatal) callbacks.on_peer_fatal(from, message, where);
        send(outgoing, from, Writer(Kind::kFatalAck, rank).take());
        continue;
      }
      std::lock_guard<std::mutex> lock(mutex);
      PeerRecord& p = peers[static_cast<size_t>(is_root() ? from : 0)];
      switch (kind) {
        case Kind::kBeat:
          p.activity = in.get_activity();
          break;
        case Kind::kDigest: {
          p.activity = in.get_activity();
          digest_suspects.clear();
          const uint32_t n = in.get<uint32_t>();
          for (uint32_t i = 0; i < n; ++i) {
            Suspect s;
            s.rank = in.get<int32_t>();
            s.silent = in.get<uint8_t>() != 0;
            s.silent_s = in.get<double>();
            s.activity = in.get_activity();
            if (s.rank >= 0 && s.rank < world_size) digest_suspects.push_back(s);
          }
          digest_time = now;
          break;
        }
        case Kind::kFatalAck:
          fatal_acked = true;
          changed.notify_all();
          break;
        case Kind::kBye:
          p.said_bye = true;
          if (!is_root()) root_said_bye = true;
          break;
        default:
          throw CommError("heartbeat: unknown message kind " + std::to_string(static_cast<int>(kind)));
      }
      p.heard = true;
      p.last_heard = now;
    }
  }

  void report(std::vector<Outgoing>& outgoing, Clock::time_point now) {
    if (is_root()) {
      std::vector<Suspect> found;
      std::vector<int> to;
      {
        std::lock_guard<std::mutex> lock(mutex);
        found = suspects(now, options.warn_after_s);
        for (int r = 1; r < world_size; ++r) {
          if (!peers[static_cast<size_t>(r)].said_bye && !sending_to(outgoing, r)) to.push_back(r);
        }
      }
      if (found.size() > kMaxSuspectsSent) found.resize(kMaxSuspectsSent);
      Writer digest(Kind::kDigest, rank);
      digest.put_activity(activity.snapshot());
      digest.put(static_cast<uint32_t>(found.size()));
      for (const Suspect& s : found) {
        digest.put(static_cast<int32_t>(s.rank));
        digest.put(static_cast<uint8_t>(s.silent));
        digest.put(s.silent_s);
        digest.put_activity(s.activity);
      }
      const std::vector<char> bytes = digest.take();
      for (int r : to) send(outgoing, r, bytes);
    } else if (!sending_to(outgoing, 0)) {
      Writer beat(Kind::kBeat, rank);
      beat.put_activity(activity.snapshot());
      send(outgoing, 0, beat.take());
    }
  }

  void emit(const std::vector<std::string>& warnings) const {
    for (const std::string& w : warnings) {
      if (callbacks.on_warning) {
        callbacks.on_warning(w);
      } else {
        print_line_to_stderr(ErrorOrigin{rank, world_size, {}}.prefix() + "dtrain: warning: " + w);
      }
    }
  }

  void run() {
    std::vector<Outgoing> outgoing;
    Clock::time_point next_report = Clock::now();
    Clock::time_point last_tick = next_report;
    Clock::time_point deadline = Clock::time_point::max();
    bool bye_sent = false;
    bool root_said_bye = false;
    const auto tick = std::chrono::duration<double>(std::min(0.05, options.period_s / 2.0));
    try {
      for (;;) {
        bool stop_now = false;
        {
          std::unique_lock<std::mutex> lock(mutex);
          if (quitting) break;
          if (stopping && deadline == Clock::time_point::max()) {
            deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(options.timeout_s));
          }
          stop_now = stopping;
        }
        drain(outgoing, root_said_bye);
        const Clock::time_point now = Clock::now();
        if (seconds(now - last_tick) > options.stale_after_s / 2.0) {
          // This process was stopped (or starved) itself: what it knows of the others is as old as the
          // gap. Start their silence over rather than blame them for it.
          std::lock_guard<std::mutex> lock(mutex);
          started = now;
          for (PeerRecord& p : peers) {
            if (p.heard) p.last_heard = now;
          }
          digest_time = now;
        }
        last_tick = now;
        if (!bye_sent && now >= next_report) {
          report(outgoing, now);
          next_report = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.period_s));
          std::vector<std::string> due;
          {
            std::lock_guard<std::mutex> lock(mutex);
            due = warnings_due(now);
          }
          emit(due);
        }
        {
          std::unique_lock<std::mutex> lock(mutex);
          if (fatal_pending && !is_root()) {
            Writer fatal(Kind::kFatal, rank);
            fatal.put_activity(fatal_where);
            fatal.put_text(fatal_message, 1 << 16);
            fatal_pending = false;
            lock.unlock();
            send(outgoing, 0, fatal.take());
          }
        }
        if (stop_now) {
          if (!bye_sent) {
            bool everyone = true;
            if (is_root()) {
              std::lock_guard<std::mutex> lock(mutex);
              for (int r = 1; r < world_size; ++r) everyone = everyone && peers[static_cast<size_t>(r)].said_bye;
            }
            if (everyone) {
              for (int r = is_root() ? 1 : 0; r < (is_root() ? world_size : 1); ++r) {
                send(outgoing, r, Writer(Kind::kBye, rank).take());
              }
              bye_sent = true;
            }
          }
          complete_sends(outgoing);
          if (bye_sent && outgoing.empty() && (is_root() || root_said_bye)) break;
          if (Clock::now() > deadline) {
            std::vector<int> missing;
            std::lock_guard<std::mutex> lock(mutex);
            for (int r = is_root() ? 1 : 0; r < (is_root() ? world_size : 1); ++r) {
              if (!peers[static_cast<size_t>(r)].said_bye) missing.push_back(r);
            }
            const std::string names = join(missing, ", ", [this](int r) { return who(r); });
            thread_error = "heartbeat: " + (names.empty() ? std::string("messages still in flight") : names + " did not end its run") +
                           " within comm.timeout_s (" + format_s(options.timeout_s) + " s) of this rank";
            break;
          }
        } else {
          complete_sends(outgoing);
        }
        std::unique_lock<std::mutex> lock(mutex);
        changed.wait_for(lock, tick, [this, stop_now] { return quitting || fatal_pending || (stopping && !stop_now); });
      }
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mutex);
      thread_error = std::string("heartbeat stopped: ") + e.what();
    }
    // Sends still pending here (error paths only) keep their buffers: MPI may still read them.
    for (Outgoing& o : outgoing) {
      if (o.request != MPI_REQUEST_NULL) new std::vector<char>(std::move(o.bytes));  // deliberately never freed
    }
    std::lock_guard<std::mutex> lock(mutex);
    thread_done = true;
    changed.notify_all();
  }
};

Heartbeat::Heartbeat(const Session& session, const Activity& activity, HeartbeatOptions options,
                     HeartbeatCallbacks callbacks)
    : state_(std::make_unique<State>(session, activity, options, std::move(callbacks))) {
  const std::optional<MpiWorld> world = session.mpi_world();
  DTRAIN_CHECK_AT(world.has_value(), CommError, session.origin(),
                  "the heartbeat runs over MPI and needs ranks that an MPI launcher started");
  DTRAIN_CHECK_AT(world->thread_multiple, CommError, session.origin(),
                  "the heartbeat needs MPI_THREAD_MULTIPLE, which this MPI did not provide");
  DTRAIN_CHECK(session.world_size() > 1, CommError, "the heartbeat needs more than one rank");
  DTRAIN_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &state_->comm));
  DTRAIN_MPI_CHECK(MPI_Comm_set_errhandler(state_->comm, MPI_ERRORS_RETURN));
  state_->next_wait_warning = Clock::now();
  State* state = state_.get();
  state_->thread = std::thread([state] { state->run(); });
}

Heartbeat::~Heartbeat() {
  bool clean = false;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    clean = state_->thread_done && state_->thread_error.empty() && state_->stopping;
    state_->quitting = true;
  }
  state_->changed.notify_all();
  if (state_->thread.joinable()) state_->thread.join();
  // After a clean goodbye nothing is in flight on the communicator; otherwise it stays (the job aborts).
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (clean && !finalized) MPI_Comm_free(&state_->comm);
}

void Heartbeat::stop() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
  }
  state_->changed.notify_all();
  if (state_->thread.joinable()) state_->thread.join();
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (!state_->thread_error.empty()) throw CommError(detail::mpi_origin(), state_->thread_error);
}

std::string Heartbeat::diagnose() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->diagnose_locked();
}

bool Heartbeat::report_fatal(const std::string& message) {
  if (state_->is_root()) return false;
  std::unique_lock<std::mutex> lock(state_->mutex);
  // No one to hand the record to: waiting for a silent rank 0 would only delay ending the job.
  if (state_->thread_done || state_->silent_s(state_->peers[0], Clock::now()) > state_->options.stale_after_s) {
    return false;
  }
  state_->fatal_message = message;
  state_->fatal_where = state_->activity.snapshot();
  state_->fatal_pending = true;
  state_->changed.notify_all();
  const auto limit = std::chrono::duration<double>(state_->options.stale_after_s);
  return state_->changed.wait_for(lock, limit, [this] { return state_->fatal_acked || state_->thread_done; }) &&
         state_->fatal_acked;
}

}  // namespace dtrain
