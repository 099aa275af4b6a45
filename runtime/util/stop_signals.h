// How dtrain stops when a job system takes its resources away. Kubernetes (a pod deleted or evicted),
// Slurm (preemption, scancel, the time limit) and the launchers that relay them (mpirun, srun, torchrun)
// send SIGTERM, SIGINT or SIGHUP and, some seconds later, SIGKILL; Slurm's --signal=USR1@<s> warns before
// a time limit. The handlers here only note the first signal; the trainer asks at its step boundaries,
// the ranks agree there, save a checkpoint and exit 128+signal (docs/failures.md has the whole path).
//
// Three things cannot wait for a step boundary, and a watchdog thread of this file does them: a signal
// before the run is set up (nothing is trained yet, so nothing is to be saved: a rank still joining the
// others stops at once), a second signal (someone means it) and the stop timeout (the save would not
// finish before the SIGKILL). Each ends the process with _exit(128 + the first signal) after the last
// words the caller registered (the run log's `stopped` record) and after removing the temporary files of
// writes in progress, so the newest whole checkpoint stays the newest and no partial `.tmp` is left.
// Copies of the first signal that arrive within two seconds of it are not a second signal: torchrun and
// srun relay to their workers what the job system also sends to every process of the job.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>

namespace dtrain {

struct StopSignalOptions {
  bool usr1 = false;         // SIGUSR1 stops too (checkpoint.on_usr1)
  double timeout_s = 25.0;   // from the first signal to an exit at once (checkpoint.stop_timeout_s)
  // false: a stop signal ends the process at once (before the run is set up: nothing to save); true:
  // the trainer stops at its next step boundary, and the process exits at once only after timeout_s.
  bool at_step_boundaries = false;
};

// Installs the handlers for SIGTERM, SIGINT, SIGHUP and SIGUSR2 (the signal a launcher that cannot relay
// SIGTERM, Open MPI's mpirun, relays at once), and SIGUSR1 when options.usr1, and starts the watchdog.
// Called again, it applies the new options; a stop already requested keeps its signal and its deadline.
void install_stop_signals(const StopSignalOptions& options);

// What the process does last when a stop cannot wait (before the run, a second signal, the timeout):
// called on the watchdog's thread, not in a signal handler, with the signal and why the process exits
// at once; it records the stop where it can and returns where the run was ("" when unknown), for the
// message. It must not wait long: after 3 s the process exits without it. Signal 0: the process ends for
// another reason (end_process_at_once), which `why` gives.
using StopLastWords = std::function<std::string(int signal, const std::string& why)>;
void set_stop_last_words(StopLastWords last_words);

// What the process says as soon as a stop signal arrives at a run that stops at its step boundaries:
// called once, on the watchdog's thread, with the signal and the pid that sent it (0: the kernel, e.g. a
// terminal's Ctrl-C). A launcher may kill the process a second after that signal (mpirun after losing a
// rank), long before the step boundary's record: this one is written at once.
using StopFirstWords = std::function<void(int signal, pid_t sender)>;
void set_stop_first_words(StopFirstWords first_words);

// Ends the process at once for what is not a signal (a worker whose torchrun agent is gone): the last
// words are called with signal 0 and `why` (bounded as for a stop), then "<prefix>dtrain: error: <why>"
// is printed and the process exits with `status`, removing the temporaries of writes in progress.
[[noreturn]] void end_process_at_once(int status, const std::string& why, const std::string& prefix = "");

// The first stop signal this process received, 0 if none. Async-signal-safe.
int stop_signal() noexcept;

// Seconds since that signal arrived (0 if none).
double seconds_since_stop_signal() noexcept;

// "SIGTERM", "SIGUSR1", ... ("signal 42" for others).
std::string signal_name(int signal);

}  // namespace dtrain
