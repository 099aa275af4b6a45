#include "runtime/util/stop_signals.h"

#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <mutex>
#include <thread>

#include "runtime/util/file_io.h"

namespace dtrain {
namespace {

// Further signals this soon after the first are copies of it (a launcher relaying what its workers
// were also sent), not a second request.
constexpr int64_t kRepeatWindow_ns = 2'000'000'000;
// How long the last words may take before the process exits without them.
constexpr unsigned kLastWords_s = 3;

std::atomic<int> first_signal{0};
std::atomic<int64_t> first_signal_ns{0};
std::atomic<pid_t> first_sender{0};  // si_pid of the first signal
std::atomic<bool> second_signal{false};
std::atomic<int64_t> timeout_ns{25'000'000'000};
std::atomic<bool> at_step_boundaries{false};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<int64_t>::is_always_lock_free &&
                  std::atomic<bool>::is_always_lock_free,
              "the signal handlers need lock-free atomics");

// The handlers wake the watchdog with sem_post, which is async-signal-safe.
sem_t wakeup;
pid_t watchdog_owner = 0;  // the process whose watchdog runs (a forked child needs its own)
std::mutex last_words_mutex;
StopLastWords last_words;
StopFirstWords first_words;  // guarded by last_words_mutex

int64_t monotonic_ns() noexcept {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

void say(const char* text) noexcept {
  const ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

std::atomic<int> exit_status{0};  // 0: 128 + the first signal

// The async-signal-safe exit: for last words that did not finish in time.
[[noreturn]] void exit_now() noexcept {
  unlink_files_being_written();
  const int status = exit_status.load();
  ::_exit(status != 0 ? status : 128 + first_signal.load());
}

void on_last_words_timeout(int) {
  say("dtrain: the run log's record of the stop took too long; exiting without it\n");
  exit_now();
}

// The last words, bounded: SIGALRM ends the process if they hang (a console or disk that blocks).
std::string say_last_words(int signal, const std::string& why) {
  struct sigaction action {};
  action.sa_handler = on_last_words_timeout;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGALRM, &action, nullptr);
  ::alarm(kLastWords_s);
  std::lock_guard<std::mutex> lock(last_words_mutex);
  if (!last_words) return "";
  try {
    return last_words(signal, why);
  } catch (...) {
    return "";
  }
}

[[noreturn]] void exit_at_once(const std::string& why) {
  const int signal = first_signal.load();
  const std::string where = say_last_words(signal, why);
  const std::string line = "dtrain: " + why + (where.empty() ? "" : " (" + where + ")") + ": exiting at once" +
                           (at_step_boundaries.load() ? "; the newest complete checkpoint is kept\n" : "\n");
  say(line.c_str());
  exit_now();
}

void watch() {
  // The stop signals are handled by the other threads.
  sigset_t all;
  sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, nullptr);
  while (::sem_wait(&wakeup) != 0) {
  }
  if (at_step_boundaries.load()) {
    std::lock_guard<std::mutex> lock(last_words_mutex);
    if (first_words) {
      try {
        first_words(first_signal.load(), first_sender.load());
      } catch (...) {
      }
    }
  }
  for (;;) {
    const int signal = first_signal.load();
    if (!at_step_boundaries.load()) {
      exit_at_once("stopped by " + signal_name(signal) +
                   " before the run started (joining the other ranks or reading the configuration): nothing was "
                   "trained yet, so there is nothing to save");
    }
    if (second_signal.load()) exit_at_once("a second stop signal");
    if (monotonic_ns() - first_signal_ns.load() >= timeout_ns.load()) {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", static_cast<double>(timeout_ns.load()) * 1e-9);
      exit_at_once("the stop after " + signal_name(signal) + " did not finish within checkpoint.stop_timeout_s (" +
                   seconds + " s)");
    }
    // Woken early by a second signal; else the deadline is checked every 50 ms.
    timespec until{};
    ::clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 50'000'000;
    if (until.tv_nsec >= 1'000'000'000) {
      until.tv_nsec -= 1'000'000'000;
      until.tv_sec += 1;
    }
    ::sem_timedwait(&wakeup, &until);
  }
}

void on_stop_signal(int signal, siginfo_t* info, void*) {
  const int saved_errno = errno;
  int none = 0;
  if (first_signal.compare_exchange_strong(none, signal)) {
    first_signal_ns.store(monotonic_ns());
    first_sender.store(info != nullptr && info->si_code <= 0 ? info->si_pid : 0);  // sent by a process (SI_USER...)
    ::sem_post(&wakeup);
  } else if (monotonic_ns() - first_signal_ns.load() >= kRepeatWindow_ns) {
    second_signal.store(true);
    ::sem_post(&wakeup);
  }
  errno = saved_errno;
}

void handle(int signal, bool stop) {
  struct sigaction action {};
  sigemptyset(&action.sa_mask);
  if (stop) {
    action.sa_sigaction = on_stop_signal;
    action.sa_flags = SA_RESTART | SA_SIGINFO;  // a read or write of the training thread carries on
  } else {
    action.sa_handler = SIG_DFL;
  }
  ::sigaction(signal, &action, nullptr);
}

}  // namespace

void install_stop_signals(const StopSignalOptions& options) {
  timeout_ns.store(static_cast<int64_t>(std::max(1.0, options.timeout_s) * 1e9));
  at_step_boundaries.store(options.at_step_boundaries);
  if (watchdog_owner != ::getpid()) {
    // The first call in this process (a fork does not copy the parent's threads).
    watchdog_owner = ::getpid();
    ::sem_init(&wakeup, 0, first_signal.load() != 0 ? 1 : 0);
    std::thread(watch).detach();
  }
  sigset_t handled;
  sigemptyset(&handled);
  for (const int signal : {SIGTERM, SIGINT, SIGHUP, SIGUSR2}) {
    handle(signal, true);
    sigaddset(&handled, signal);
  }
  handle(SIGUSR1, options.usr1);
  if (options.usr1) sigaddset(&handled, SIGUSR1);
  // A signal mask is inherited across exec: a launcher or container runtime that blocks one of these
  // would keep the stop from ever arriving. Threads started later (MPI's, LibTorch's) inherit this one.
  ::pthread_sigmask(SIG_UNBLOCK, &handled, nullptr);
}

void set_stop_last_words(StopLastWords words) {
  std::lock_guard<std::mutex> lock(last_words_mutex);
  last_words = std::move(words);
}

void set_stop_first_words(StopFirstWords words) {
  std::lock_guard<std::mutex> lock(last_words_mutex);
  first_words = std::move(words);
}

void end_process_at_once(int status, const std::string& why, const std::string& prefix) {
  exit_status.store(status);
  const std::string where = say_last_words(0, why);
  const std::string line = prefix + "dtrain: error: " + why + (where.empty() ? "" : " (" + where + ")") + "\n";
  say(line.c_str());
  exit_now();
}

int stop_signal() noexcept { return first_signal.load(); }

double seconds_since_stop_signal() noexcept {
  if (first_signal.load() == 0) return 0.0;
  return static_cast<double>(monotonic_ns() - first_signal_ns.load()) * 1e-9;
}

std::string signal_name(int signal) {
  switch (signal) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGKILL: return "SIGKILL";
    default: return "signal " + std::to_string(signal);
  }
}

}  // namespace dtrain
