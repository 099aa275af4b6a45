// What the training loop tells the parts that watch it: telemetry (FLOPs, MFU, network bytes), the
// resource sampler, the profiler window (runtime/monitor). An observer sees the run's records, never the
// trainer; launch/main.cpp decides which observers a run has. Every rank calls every hook at the same
// points in the same order, so a hook may be collective (gather samples to rank 0, broadcast a file).
// The idea is PyTorch c10d's Logger, which gathers DDP's runtime statistics beside the Reducer, not in it.
#pragma once

#include <cstdint>

#include "runtime/log/run_events.h"

namespace dtrain {

// One training step (one micro-batch with train.accumulate) of this rank.
struct StepRecord {
  int64_t epoch = 0;
  int64_t step = 0;      // in the epoch, from 1
  int64_t run_step = 0;  // in this run (a resumed run counts from its own first step), from 1
  int64_t samples = 0;   // this rank's batch
};

class RunObserver {
 public:
  virtual ~RunObserver() = default;

  // Before the run_start record: may add what it knows of the run (the accelerator and its peak).
  virtual void run_starting(RunInfo& info) {}
  // After the run_start and resume records: notes, background work.
  virtual void run_started() {}
  // Around an epoch's training steps (not its evaluation).
  virtual void training_begins(int64_t epoch) {}
  virtual void training_ended(int64_t epoch) {}
  // Around one training step; after_step hooks run in the reverse order of the before_step ones.
  virtual void before_step(const StepRecord& step) {}
  virtual void after_step(const StepRecord& step) {}
  // After each train_progress record (every log.interval steps), with its figures.
  virtual void progress(const ProgressInfo& progress) {}
  // Before the epoch_end record, its figures complete but the observers' own: may add those.
  virtual void epoch_ending(EpochStats& stats) {}
  // After the epoch_end record.
  virtual void epoch_ended(const EpochStats& stats) {}
  // Before the run_end record (also when a restored run had nothing left to train).
  virtual void run_ending(RunSummary& summary) {}
};

}  // namespace dtrain
