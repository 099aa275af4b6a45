#include "runtime/bootstrap/store_session.h"

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include "runtime/bootstrap/parent_watch.h"
#include "runtime/util/terminal.h"

namespace dtrain {
namespace {

std::string this_hostname() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name) != 0) return "unknown-host";
  return name;
}

std::string to_string(const std::vector<uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }
std::vector<uint8_t> to_bytes(const std::string& text) { return std::vector<uint8_t>(text.begin(), text.end()); }

// A Failure as bytes, and back: "code rank world host_length message_length\n" + host + message.
std::string encode(const Failure& failure) {
  std::ostringstream out;
  out << failure.exit_code << ' ' << failure.origin.rank << ' ' << failure.origin.world_size << ' '
      << failure.origin.host.size() << ' ' << failure.message.size() << '\n'
      << failure.origin.host << failure.message;
  return out.str();
}

Failure decode(const std::string& bytes) {
  std::istringstream in(bytes);
  Failure failure;
  size_t host_size = 0;
  size_t message_size = 0;
  in >> failure.exit_code >> failure.origin.rank >> failure.origin.world_size >> host_size >> message_size;
  const size_t body = bytes.find('\n');
  if (!in || body == std::string::npos || body + 1 + host_size + message_size != bytes.size()) {
    return Failure{kExitComm, "a rank sent an unreadable error record through the store", {}};
  }
  failure.origin.host = bytes.substr(body + 1, host_size);
  failure.message = bytes.substr(body + 1 + host_size);
  return failure;
}

// "" when `host` resolves to an address here, else why not: a name that does not resolve is the usual
// reason a store cannot be reached in containers (torchrun passes rank 0's host name).
std::string resolution_problem(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int code = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (code == 0) {
    freeaddrinfo(found);
    return "";
  }
  return "MASTER_ADDR '" + host + "' does not resolve to an address here (" + gai_strerror(code) +
         "); it must resolve on every node (DNS, or /etc/hosts in containers)";
}

// Waits, up to `deadline`, until `host` resolves here: a pod's DNS record can come after the pod. Says so
// at once, once, on stderr, and returns "" when it resolves, else the last problem.
std::string wait_for_resolution(const std::string& host, std::chrono::steady_clock::time_point deadline,
                                const ErrorOrigin& origin, double timeout_s) {
  std::string problem = resolution_problem(host);
  if (problem.empty()) return "";
  print_line_to_stderr(origin.prefix() + "dtrain: warning: " + problem + "; retrying until comm.timeout_s (" +
                       std::to_string(static_cast<int64_t>(timeout_s)) + " s)");
  while (!problem.empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    problem = resolution_problem(host);
  }
  return problem;
}

// Connects to the store (starting it on rank 0) and makes one round trip, on a thread of its own: a
// service at MASTER_PORT that takes the connection but is not a c10d store never answers, and LibTorch's
// client would wait for its answer for ever. The caller waits up to its deadline and, past it, leaves the
// thread blocked (it owns only what it shares with the caller) and fails the run, which ends the process.
struct StoreConnection {
  std::mutex mutex;
  std::condition_variable changed;
  bool done = false;
  c10::intrusive_ptr<c10d::TCPStore> store;
  std::exception_ptr error;
};

c10::intrusive_ptr<c10d::TCPStore> connect_store(const std::string& address, const c10d::TCPStoreOptions& options,
                                                std::chrono::steady_clock::time_point deadline, bool& answered) {
  auto connection = std::make_shared<StoreConnection>();
  std::thread([connection, address, options] {
    c10::intrusive_ptr<c10d::TCPStore> store;
    std::exception_ptr error;
    try {
      store = c10::make_intrusive<c10d::TCPStore>(address, options);
      (void)store->check({"dtrain/hello"});  // a request with an answer: only a c10d store gives one
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(connection->mutex);
    connection->store = std::move(store);
    connection->error = error;
    connection->done = true;
    connection->changed.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(connection->mutex);
  answered = connection->changed.wait_until(lock, deadline, [&] { return connection->done; });
  if (!answered) return {};
  if (connection->error) std::rethrow_exception(connection->error);
  return connection->store;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size() && i < 16; ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > 16) text += " and " + std::to_string(ranks.size() - 16) + " more";
  return text;
}

}  // namespace

StoreSession::StoreSession(const TorchEnv& env, double timeout_s, std::function<void(pid_t agent)> on_agent_gone)
    : env_(env) {
  rank_ = env.rank;
  world_size_ = env.world_size;
  const std::string host = this_hostname();
  if (env.elastic_agent && on_agent_gone) parent_watch_ = std::make_unique<ParentWatch>(0.5, std::move(on_agent_gone));
  if (world_size_ == 1) {
    hostnames_ = {host};
  } else {
    const WaitOptions wait{timeout_s, nullptr, {}};
    c10d::TCPStoreOptions options;
    options.port = static_cast<std::uint16_t>(env.master_port);
    options.isServer = rank_ == 0 && !env.agent_store;
    options.numWorkers = static_cast<size_t>(world_size_);
    options.waitWorkers = false;
    options.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000.0));
    // Every wait of the join is bounded by the one timeout, from here.
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(timeout_s));
    const std::string role = options.isServer ? "start" : "reach";
    const std::string where = address() + " (MASTER_ADDR, MASTER_PORT" +
                              (env.agent_store ? "; torchrun's agent hosts it" : "; rank 0 hosts it") + ")";
    const std::string seconds = std::to_string(static_cast<int64_t>(timeout_s)) + " s";
    const std::string unresolved = wait_for_resolution(env.master_addr, deadline, origin(), timeout_s);
    if (!unresolved.empty()) {
      throw CommError(origin(), "cannot " + role + " the c10d store at " + where + " within " + seconds + ": " +
                                    unresolved + " (the launcher's variables: " + env.summary + ")");
    }
    try {
      bool answered = false;
      auto tcp = connect_store(env.master_addr, options, deadline, answered);
      if (!answered) {
        throw CommError(origin(), "cannot " + role + " the c10d store at " + where + " within " + seconds +
                                      ": something there took the connection but did not answer as a c10d store; "
                                      "MASTER_PORT must be the port of the store (the launcher's variables: " +
                                      env.summary + ")");
      }
      // Keys of this restart only: an agent's store outlives the workers it restarts.
      store_ = c10::make_intrusive<c10d::PrefixStore>("dtrain/attempt_" + std::to_string(env.restart_count), tcp);
      store_->set("host/" + std::to_string(rank_), to_bytes(host));
    } catch (const CommError&) {
      throw;
    } catch (const std::exception& e) {
      const std::string now_unresolved = resolution_problem(env.master_addr);
      throw CommError(origin(), "cannot " + role + " the c10d store at " + where + " within " + seconds + ": " +
                                    (now_unresolved.empty() ? message_without_trace(e) : now_unresolved) +
                                    " (the launcher's variables: " + env.summary + ")");
    }
    std::vector<std::string> keys;
    for (int r = 0; r < world_size_; ++r) keys.push_back("host/" + std::to_string(r));
    wait_for(keys, true, wait, "joining the " + std::to_string(world_size_) + " ranks of WORLD_SIZE");
    for (const std::string& key : keys) hostnames_.push_back(to_string(store_->get(key)));
  }
  int same_host_before = 0;
  int same_host = 0;
  for (int r = 0; r < world_size_; ++r) {
    if (hostnames_[static_cast<size_t>(r)] != hostnames_[static_cast<size_t>(rank_)]) continue;
    same_host_before += r < rank_ ? 1 : 0;
    ++same_host;
  }
  local_rank_ = env.local_rank >= 0 ? env.local_rank : same_host_before;
  local_world_size_ = env.local_world_size > 0 ? env.local_world_size : same_host;
}

StoreSession::~StoreSession() {
  // Rank 0's store must outlive the other ranks' last use of it: each says goodbye, and the host waits
  // for all (bounded, and silent: a peer that died has already failed the run).
  if (!store_ || world_size_ == 1) return;
  try {
    store_->add("goodbye", 1);
    if (rank_ != 0 || env_.agent_store) return;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (store_->add("goodbye", 0) < world_size_ && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  } catch (const std::exception&) {
  }
}

std::string StoreSession::address() const { return env_.master_addr + ":" + std::to_string(env_.master_port); }

std::string StoreSession::description() const {
  std::string text = env_.elastic_agent ? "torchrun" : "RANK/WORLD_SIZE environment";
  if (world_size_ > 1) text += ", store at " + address();
  if (env_.elastic_agent) {
    text += ", restart " + std::to_string(env_.restart_count) + " of at most " + std::to_string(env_.max_restarts);
  }
  return text;
}

void StoreSession::wait_for(const std::vector<std::string>& keys, bool per_rank, const WaitOptions& wait,
                            const std::string& what) const {
  WaitScope scope(wait.activity, what);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait.timeout_s);
  auto pause = std::chrono::milliseconds(1);
  try {
    while (!store_->check(keys)) {
      if (std::chrono::steady_clock::now() >= deadline) {
        std::vector<int> missing;
        for (size_t i = 0; i < keys.size(); ++i) {
          if (!store_->check({keys[i]})) missing.push_back(static_cast<int>(i));
        }
        std::string message = timed_out_text(wait, what);
        if (per_rank) {
          message += ": rank" + std::string(missing.size() == 1 ? " " : "s ") + rank_list(missing) + " of " +
                     std::to_string(world_size_) + " did not arrive";
        }
        message += " (store at " + address() + ", " + env_.summary + ")";
        message = with_stall(wait, std::move(message), /*guess=*/false);
        throw CommError(origin(), message);
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(50));
    }
  } catch (const CommError&) {
    throw;
  } catch (const std::exception& e) {
    throw CommError(origin(), "the c10d store at " + address() + " failed while " + what + ": " + message_without_trace(e));
  }
}

Failure StoreSession::first_error(const Failure& local, const WaitOptions& wait) const {
  if (world_size_ == 1) return local;
  const std::string prefix = "error/" + std::to_string(round_++) + "/";
  std::vector<std::string> keys;
  for (int r = 0; r < world_size_; ++r) keys.push_back(prefix + std::to_string(r));
  try {
    store_->set(keys[static_cast<size_t>(rank_)], to_bytes(encode(local)));
  } catch (const std::exception& e) {
    throw CommError(origin(), "the c10d store at " + address() + " failed while agreeing on errors: " + message_without_trace(e));
  }
  wait_for(keys, true, wait, "agreeing on errors across ranks");
  for (int r = 0; r < world_size_; ++r) {
    Failure failure = r == rank_ ? local : decode(to_string(store_->get(keys[static_cast<size_t>(r)])));
    if (!failure.failed()) continue;
    if (!failure.origin.known() && r != 0) failure.origin = ErrorOrigin{r, world_size_, {}};
    return failure;
  }
  return Failure{};
}

std::string StoreSession::broadcast(const std::string& bytes, int root, const WaitOptions& wait,
                                    const std::string& what) const {
  if (world_size_ == 1) return bytes;
  const std::string key = "broadcast/" + std::to_string(round_++);
  try {
    if (rank_ == root) {
      store_->set(key, to_bytes(bytes));
      return bytes;
    }
  } catch (const std::exception& e) {
    throw CommError(origin(), "the c10d store at " + address() + " failed while broadcasting " + what + ": " + message_without_trace(e));
  }
  wait_for({key}, false, wait, "the broadcast of " + what + " from rank " + std::to_string(root));
  return to_string(store_->get(key));
}

c10::intrusive_ptr<c10d::Store> StoreSession::store(const WaitOptions&) {
  if (!store_) store_ = c10::make_intrusive<c10d::HashStore>();  // a world of one: the store is in-process
  return store_;
}

void StoreSession::abort(int exit_code) {
  std::cout.flush();
  std::cerr.flush();
  std::_Exit(exit_code);
}

}  // namespace dtrain
