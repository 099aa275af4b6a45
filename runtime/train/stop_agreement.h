// The ranks stop together. A stop signal (stop_signals.h) reaches one rank, or several at different
// moments; each rank only notes it, and the ranks agree at step boundaries on whether any of them has
// one, in one small allgather, so that every rank stops at the same step with the same checkpoint. The
// allgather also carries one flag of rank 0's (its clock's verdict that a timed checkpoint is due), so a
// run with both pays one collective.
#pragma once

#include <cstdint>
#include <functional>

#include "runtime/comm/communicator.h"

namespace dtrain {

// What the ranks agreed at a step boundary.
struct StepDecision {
  bool checkpoint = false;  // a checkpoint inside the epoch is due
  int stop_signal = 0;      // a stop signal reached a rank: stop here (0: none)
  int stop_rank = -1;       // the lowest rank it reached
};

class StopAgreement final {
 public:
  // `check_steps`: optimizer steps between two agreements (1 on CPUs, where the collective costs
  // microseconds against steps of milliseconds; more on GPUs, whose steps the host does not otherwise
  // wait for).
  StopAgreement(Communicator& comm, int64_t check_steps);

  // Where each rank learns of a stop signal it received (0: none); set alike on every rank. Without
  // one, no rank stops for signals and no agreement is made.
  void stop_on(std::function<int()> local_signal) { local_signal_ = std::move(local_signal); }
  bool watching() const { return static_cast<bool>(local_signal_); }
  int64_t check_steps() const { return check_steps_; }

  // An optimizer step was taken; steps_since_agreement() counts them until the next agreement.
  void step_taken() { ++steps_since_agreement_; }
  int64_t steps_since_agreement() const { return steps_since_agreement_; }

  // Collective: every rank's stop signal, and rank 0's `root_flag` as the decision's `checkpoint`.
  StepDecision agree(bool root_flag = false);
  // Collective where signals are watched (else nothing): whether a signal reached any rank.
  StepDecision agree_stop() { return watching() ? agree(false) : StepDecision{}; }

 private:
  Communicator& comm_;
  const int64_t check_steps_;
  std::function<int()> local_signal_;
  int64_t steps_since_agreement_ = 0;
};

}  // namespace dtrain
