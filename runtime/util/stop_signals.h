// How dtrain stops when a job system takes its resources away. Kubernetes (a pod deleted or evicted),
// Slurm (preemption, scancel, the time limit) and the launchers that relay them (mpirun, srun, torchrun)
// send SIGTERM, SIGINT or SIGHUP and, some seconds later, SIGKILL; Slurm's --signal=USR1@<s> warns before
// a time limit. The handlers here only note the first signal; the trainer asks at its step boundaries,
// the ranks agree there, save a checkpoint and exit 128+signal (docs/failures.md has the whole path).
//
// Two things cannot wait for a step boundary, and the handler does them itself: a second signal (someone
// means it: exit at once) and the stop timeout (the save would not finish before the SIGKILL). Both end
// the process with _exit(128 + the first signal) after removing the temporary files of writes in
// progress, so the newest whole checkpoint stays the newest and no partial `.tmp` is left. Copies of the
// first signal that arrive within a second of it are not a second signal: torchrun and srun relay to
// their workers what the job system also sends to every process of the job.
#pragma once

#include <string>

namespace dtrain {

struct StopSignalOptions {
  bool usr1 = false;         // SIGUSR1 stops too (checkpoint.on_usr1)
  double timeout_s = 25.0;   // from the first signal to an exit at once (checkpoint.stop_timeout_s)
};

// Installs the handlers for SIGTERM, SIGINT, SIGHUP and SIGUSR2 (the signal a launcher that cannot relay
// SIGTERM, Open MPI's mpirun, relays at once), and SIGUSR1 when options.usr1. Called again, it applies
// the new options; a stop already requested keeps its signal and its deadline.
void install_stop_signals(const StopSignalOptions& options);

// The first stop signal this process received, 0 if none. Async-signal-safe.
int stop_signal() noexcept;

// Seconds since that signal arrived (0 if none).
double seconds_since_stop_signal() noexcept;

// "SIGTERM", "SIGUSR1", ... ("signal 42" for others).
std::string signal_name(int signal);

}  // namespace dtrain
