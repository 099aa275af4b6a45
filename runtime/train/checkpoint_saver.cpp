#include "runtime/train/checkpoint_saver.h"

#include <cstdio>
#include <utility>

#include "runtime/util/timer.h"

namespace dtrain {
namespace {
constexpr double kWarnWait_s = 0.1;
}  // namespace

CheckpointSaver::CheckpointSaver(const CheckpointOptions& options, Communicator& comm, RunLogger& logger)
    : options_(options), comm_(comm), logger_(logger), checkpointer_(options, comm) {
  if (!options_.enabled) return;
  // A place for the copy in memory that cannot be used is said at the start, not at the first checkpoint.
  checkpointer_.open_memory_copy();
  warn_memory();
}

CheckpointSaver::~CheckpointSaver() {
  join_prepare();
  if (writer_.joinable()) writer_.join();
}

void CheckpointSaver::prepare(const std::vector<TrainedModule>& modules) {
  if (!comm_.is_root() || !options_.enabled || !options_.async || preparer_.joinable()) return;
  preparer_ = std::thread([this, &modules] {
    try {
      checkpointer_.prepare_host_copies(modules);
    } catch (const std::exception&) {
      // Memory that cannot be prepared now is allocated by the snapshot, as without preparing.
    }
  });
}

void CheckpointSaver::join_prepare() {
  if (preparer_.joinable()) preparer_.join();
}

std::string CheckpointSaver::take(const CheckpointMeta& meta, const std::vector<TrainedModule>& modules) {
  return take(hold(meta, modules));
}

CheckpointSnapshot CheckpointSaver::hold(const CheckpointMeta& meta, const std::vector<TrainedModule>& modules) {
  if (!comm_.is_root()) return {};
  const bool inside_epoch = meta.epoch_samples > 0;
  Stopwatch blocked;
  join_prepare();
  held_wait_s_ = 0.0;
  if (writer_.joinable()) {
    const bool busy = !done_.load();
    wait_and_log();
    held_wait_s_ = blocked.elapsed_s();
    // Waits of a few milliseconds (a small model's checkpoints, taken steps apart) are not worth a line.
    if (busy && held_wait_s_ >= kWarnWait_s && !warned_wait_) {
      warned_wait_ = true;
      char waited[32];
      std::snprintf(waited, sizeof waited, "%.3f", held_wait_s_);
      logger_.warning("the checkpoint of epoch " + std::to_string(meta.epoch + (inside_epoch ? 1 : 0)) +
                      (inside_epoch ? ", step " + std::to_string(meta.epoch_steps) : std::string(" (its end)")) +
                      " fell due while the previous one was still being written; training waited " + waited +
                      " s for it (each checkpoint record's wait_s says how long): checkpoint less often, or on a "
                      "faster disk");
    }
  }
  CheckpointSnapshot snapshot =
      checkpointer_.snapshot(meta, modules, options_.async ? SnapshotCopy::kHostCopy : SnapshotCopy::kLive);
  held_save_s_ = blocked.elapsed_s();
  return snapshot;
}

std::string CheckpointSaver::take(CheckpointSnapshot snapshot) {
  if (!comm_.is_root() || snapshot.empty()) return "";
  const CheckpointMeta& meta = snapshot.meta();
  const bool inside_epoch = meta.epoch_samples > 0;
  CheckpointRecord record;
  record.epoch = meta.epoch + (inside_epoch ? 1 : 0);
  record.step = meta.epoch_steps;
  record.epoch_samples = meta.epoch_samples;
  record.wait_s = held_wait_s_;
  std::string path = snapshot.path();
  record.path = path;
  if (snapshot.live()) {
    Stopwatch persist;
    checkpointer_.persist(std::move(snapshot));
    record.persist_s = persist.elapsed_s();
    record.save_s = held_save_s_ + record.persist_s;
    if (inside_epoch) logger_.checkpoint_written(record);
    warn_memory();
  } else {
    record.async = true;
    record.save_s = held_save_s_;
    start(std::move(snapshot), std::move(record));
  }
  return path;
}

void CheckpointSaver::start(CheckpointSnapshot snapshot, CheckpointRecord record) {
  pending_ = std::move(record);
  done_.store(false);
  failure_ = nullptr;
  writer_ = std::thread([this, snapshot = std::move(snapshot)]() mutable {
    Stopwatch persist;
    try {
      checkpointer_.persist(std::move(snapshot));
    } catch (...) {
      failure_ = std::current_exception();
    }
    persist_s_ = persist.elapsed_s();
    done_.store(true);
  });
}

void CheckpointSaver::wait_and_log() {
  writer_.join();
  if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
  pending_.persist_s = persist_s_;
  if (pending_.epoch_samples > 0) logger_.checkpoint_written(pending_);  // epoch ends: in epoch_end
  warn_memory();
}

void CheckpointSaver::warn_memory() {
  if (warned_memory_ || checkpointer_.memory_problem().empty()) return;
  warned_memory_ = true;
  logger_.warning("the copy of checkpoints in memory (checkpoint.memory_dir '" + options_.memory_dir +
                  "') is off for this run: " + checkpointer_.memory_problem() +
                  "; checkpoints go to disk only, and a restart reads them from there (--checkpoint-memory-dir "
                  "names another place, '' turns the copy off)");
}

void CheckpointSaver::poll() {
  if (writer_.joinable() && done_.load()) wait_and_log();
}

void CheckpointSaver::flush() {
  if (writer_.joinable()) wait_and_log();
}

void CheckpointSaver::finish() {
  if (writer_.joinable()) wait_and_log();
  // The run is over: nothing will restart from the copy in memory, and the disk holds the last state.
  checkpointer_.remove_memory_copy();
}

}  // namespace dtrain
