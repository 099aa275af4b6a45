#include "runtime/util/stop_signals.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstring>

#include "runtime/util/file_io.h"

namespace dtrain {
namespace {

// Further signals this soon after the first are copies of it (a launcher relaying what its workers
// were also sent), not a second request.
constexpr int64_t kRepeatWindow_ns = 2'000'000'000;

std::atomic<int> first_signal{0};
std::atomic<int64_t> first_signal_ns{0};
std::atomic<unsigned> timeout_whole_s{25};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<int64_t>::is_always_lock_free,
              "the signal handlers need lock-free atomics");

int64_t monotonic_ns() noexcept {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

void say(const char* text) noexcept {
  const ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

[[noreturn]] void exit_at_once(const char* why) noexcept {
  say("dtrain: ");
  say(why);
  say(": exiting at once; the newest complete checkpoint is kept\n");
  unlink_files_being_written();
  ::_exit(128 + first_signal.load());
}

void on_stop_signal(int signal) {
  const int saved_errno = errno;
  int none = 0;
  if (first_signal.compare_exchange_strong(none, signal)) {
    first_signal_ns.store(monotonic_ns());
    ::alarm(timeout_whole_s.load());
  } else if (monotonic_ns() - first_signal_ns.load() >= kRepeatWindow_ns) {
    exit_at_once("a second stop signal");
  }
  errno = saved_errno;
}

void on_stop_timeout(int) {
  if (first_signal.load() == 0) return;  // an alarm of someone else's: dtrain sets none before a stop
  exit_at_once("the step and the checkpoint after the stop signal did not finish within checkpoint.stop_timeout_s");
}

void handle(int signal, void (*handler)(int)) {
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // a read or write of the training thread carries on
  ::sigaction(signal, &action, nullptr);
}

}  // namespace

void install_stop_signals(const StopSignalOptions& options) {
  timeout_whole_s.store(static_cast<unsigned>(std::max(1.0, std::ceil(options.timeout_s))));
  handle(SIGALRM, on_stop_timeout);
  sigset_t handled;
  sigemptyset(&handled);
  sigaddset(&handled, SIGALRM);
  for (const int signal : {SIGTERM, SIGINT, SIGHUP, SIGUSR2}) {
    handle(signal, on_stop_signal);
    sigaddset(&handled, signal);
  }
  handle(SIGUSR1, options.usr1 ? on_stop_signal : SIG_DFL);
  if (options.usr1) sigaddset(&handled, SIGUSR1);
  // A signal mask is inherited across exec: a launcher or container runtime that blocks one of these
  // would keep the stop from ever arriving. Threads started later (MPI's, LibTorch's) inherit this one.
  ::pthread_sigmask(SIG_UNBLOCK, &handled, nullptr);
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
