#include "runtime/log/run_logger.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <thread>

#include "runtime/log/json_line.h"
#include "runtime/log/log_format.h"
#include "runtime/util/error.h"
#include "runtime/util/strings.h"
#include "runtime/util/terminal.h"
#include "runtime/util/timer.h"

namespace dtrain {

// The records the run log writes field for field (runtime/log/run_log.schema.json); the others have
// fields written only when known, or derived, and are built below.
DTRAIN_JSON_RECORD(NetworkInfo, transport, peer_host, interface, address, mtu)
DTRAIN_JSON_RECORD(BucketProbeRecord, latency_s, bytes_per_s, small_bytes, small_s, small_cpu_s, large_bytes, large_s,
                   probe_s, compute_cores, per_bucket_s)
DTRAIN_JSON_RECORD(GradientBuckets, module, bucket_bytes)
DTRAIN_JSON_RECORD(DeterministicRecord, shards, shards_per_rank, global_batch, samples_per_shard)
DTRAIN_JSON_RECORD(CheckpointRecord, epoch, step, epoch_samples, path, save_s, persist_s, async, wait_s)
DTRAIN_JSON_RECORD(ProfileRecord, rank, first_step, last_step, kineto, cuda, events, trace, table)

namespace {

// Every run-log record starts with the event's name and UTC time.
JsonRecord event(const char* name) {
  JsonRecord record = JsonRecord::object();
  record["event"] = name;
  record["time"] = utc_timestamp(std::time(nullptr));
  return record;
}

// "<prefix><name>" for each metric; a classifier's accuracy also gives its count of correct predictions
// ("test_correct").
void add_metrics(JsonRecord& record, const std::string& prefix, const MetricValues& metrics) {
  for (const MetricValue& m : metrics.all()) {
    record[prefix + m.name] = m.value;
    if (m.name == "accuracy") record[prefix + "correct"] = static_cast<int64_t>(m.sum);
  }
}

JsonRecord epoch_metrics(const char* name, const EpochStats& s) {
  JsonRecord record = event(name);
  record["epoch"] = s.epoch;
  record["lr"] = s.lr;
  record["train_samples"] = s.train_samples;
  add_metrics(record, "train_", s.train);
  add_metrics(record, "test_", s.test);
  record["test_samples"] = s.test_samples;
  return record;
}

// What Kubeflow Katib's File metrics collector reads from a JSON-lines file (fileFormat: JSON): the
// objective's metric under its own name with its value as a string, and "timestamp" in RFC 3339. The
// names and values are those of the Katib console line.
void add_katib_metrics(JsonRecord& record, const EpochStats& s) {
  for (const auto& [name, value] : katib_metric_values(s.test)) record[name] = value;
  record["timestamp"] = utc_timestamp_ms(unix_now_s());
}

JsonRecord epoch_record(const EpochStats& s) {
  JsonRecord record = epoch_metrics("epoch_end", s);
  record["steps"] = s.steps;
  record["first_step"] = s.first_step;
  record["skipped_steps"] = s.skipped_steps;
  record["bad_samples"] = s.bad_samples;
  record["epoch_s"] = s.epoch_s;
  record["train_s"] = s.train_s;
  record["eval_s"] = s.eval_s;
  record["samples_per_s"] = s.samples_per_s;
  record["flops_per_sample"] = s.flops_per_sample;
  record["tflops_achieved"] = s.tflops_achieved;
  if (s.mfu) record["mfu"] = *s.mfu;
  record["comm_s"] = s.comm_s;
  record["exposed_comm_s"] = s.exposed_comm_s;
  record["comm_wait_cpu_s"] = s.comm_wait_cpu_s;
  if (!s.straggler_by_rank.empty()) {
    record["exposed_comm_s_by_rank"] = s.exposed_comm_s_by_rank;
    record["comm_wait_cpu_s_by_rank"] = s.comm_wait_cpu_s_by_rank;
    record["straggler_by_rank"] = s.straggler_by_rank;
  }
  record["bytes_allreduced"] = s.bytes_allreduced;
  record["bytes_allreduced_per_step"] = s.bytes_allreduced_per_step;
  record["algbw_gbps"] = s.algbw_gbps;
  record["busbw_gbps"] = s.busbw_gbps;
  record["net_tx_bytes_per_step"] = s.net_tx_bytes_per_step;
  record["net_rx_bytes_per_step"] = s.net_rx_bytes_per_step;
  record["checkpoint"] = s.checkpoint_path;
  if (s.run_left_s) record["run_left_s"] = *s.run_left_s;
  add_katib_metrics(record, s);
  return record;
}

ProgressStyle progress_style(ProgressMode mode) {
  switch (mode) {
    case ProgressMode::kBar: return ProgressStyle::kBar;
    case ProgressMode::kLines: return ProgressStyle::kLines;
    case ProgressMode::kOff: return ProgressStyle::kOff;
    case ProgressMode::kAuto: break;
  }
  return stderr_reaches_terminal() ? ProgressStyle::kBar : ProgressStyle::kLines;
}

// "tcp over eth0 (10.213.0.1, MTU 1500) to node2", or the transport alone on one host.
std::string network_text(const NetworkInfo& network) {
  std::string text = network.transport.empty() ? std::string("unknown") : network.transport;
  if (!network.interface.empty()) {
    text += " over " + network.interface + " (" + network.address +
            (network.mtu > 0 ? ", MTU " + std::to_string(network.mtu) : std::string()) + ")";
  }
  if (!network.peer_host.empty()) text += " to " + network.peer_host;
  return text;
}

}  // namespace

RunLogger::RunLogger(const LogOptions& options, bool is_root, std::optional<Directory> run_dir, std::ostream& console,
                     std::ostream& progress)
    : options_(options), is_root_(is_root), out_(console) {
  if (!is_root_) return;
  if (!run_dir) throw Error("RunLogger: rank 0 needs its run directory");
  directory_ = std::move(run_dir);
  run_dir_ = directory_->path();
  meter_ = std::make_unique<ProgressMeter>(progress_style(options_.progress), options_.progress_interval_s, progress);
  events_ = std::make_unique<AppendFile>(*directory_, "events.jsonl");
}

const Directory& RunLogger::run_directory() const {
  if (!directory_) throw Error("RunLogger::run_directory: only rank 0 has the run directory");
  return *directory_;
}

void RunLogger::write_event(const JsonRecord& record) {
  // One write(2) per record: a killed run keeps every event written so far, a full disk throws here.
  events_->append(json_line(record) + '\n');
}

void RunLogger::flush_console() {
  errno = 0;
  out_.flush();
  if (!out_) {
    const int code = errno;
    out_.clear();  // later lines (the error record's) may still get through
    throw IoError(std::string("cannot write the console output (stdout), where the metric lines go: ") +
                  (code != 0 ? errno_text(code) : "the stream failed"));
  }
}

void RunLogger::run_start(const RunInfo& info) {
  if (!is_root_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  meter_->clear();
  const std::string hosts = join(info.hosts);
  out_ << "dtrain " << info.dtrain_version << " | workload " << info.workload << " | world size "
      << info.world_size << " on " << info.hosts.size() << (info.hosts.size() == 1 ? " host" : " hosts") << " ("
      << hosts << ") | backend " << info.backend << " | device " << info.device << " | threads per rank "
      << info.threads_per_rank << (info.threads_source.empty() ? "" : " (" + info.threads_source + ")")
      << (info.deterministic ? " | deterministic: " + std::to_string(info.deterministic->shards) +
                                   (info.deterministic->shards == 1 ? " shard" : " shards")
                             : "")
      << "\n"
      << "libtorch " << info.torch_version << " | " << info.launcher << "\n"
      << "network: " << network_text(info.network) << "\n";
  if (info.bucket_probe) out_ << bucket_probe_line(*info.bucket_probe, info.gradient_buckets) << "\n";
  out_
      << "data: " << info.data_description << " | " << info.train_samples << " train, " << info.test_samples
      << " test samples | " << info.parameters << " parameters\n"
      << "run " << run_dir_ << ": events.jsonl, config.yaml" << (options_.tensorboard ? ", tensorboard/" : "")
      << (info.checkpoint_dir.empty() ? ", no checkpoints" : ", checkpoints in " + info.checkpoint_dir) << "\n"
      << "config, where it differs from the defaults (all of it in config.yaml):\n";
  for (const std::string& change : info.config_changes) out_ << "  " << change << "\n";
  flush_console();

  write_file_atomically(*directory_, "config.yaml", info.config_yaml);
  JsonRecord record = event("run_start");
  record["dtrain_version"] = info.dtrain_version;
  record["workload"] = info.workload;
  record["run_name"] = info.run_name;
  record["world_size"] = info.world_size;
  record["runtime"] = "dtrain";  // what wrote the log: a study's peer (bench/peer/) writes its own name
  record["hosts"] = info.hosts;
  if (!info.rank_hosts.empty()) record["rank_hosts"] = info.rank_hosts;
  record["ranks_per_host"] = info.ranks_per_host;
  record["backend"] = info.backend;
  record["device"] = info.device;
  record["threads_per_rank"] = info.threads_per_rank;
  record["threads_source"] = info.threads_source;
  record["torch_version"] = info.torch_version;
  record["bootstrap"] = info.bootstrap;
  record["launcher"] = info.launcher;
  record["restart_count"] = info.restart_count;
  record["data"] = info.data_description;
  record["bad_files_left_out"] = info.bad_files_left_out;
  record["train_samples"] = info.train_samples;
  record["test_samples"] = info.test_samples;
  record["parameters"] = info.parameters;
  record["accelerator"] = info.accelerator;
  record["peak_tflops"] = info.peak_tflops;
  record["checkpoint_dir"] = info.checkpoint_dir;
  record["network"] = info.network;
  if (info.deterministic) record["deterministic"] = *info.deterministic;
  if (info.bucket_probe) record["bucket_probe"] = *info.bucket_probe;
  record["gradient_buckets"] = info.gradient_buckets;
  record["config"] = info.config_yaml;
  write_event(record);
  if (options_.tensorboard) {
    tensorboard_ = std::make_unique<TensorBoardWriter>(directory_->sub("tensorboard", true), info.train_samples);
  }
}

void RunLogger::info(const std::string& message) {
  if (!is_root_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  meter_->clear();
  out_ << message << "\n";
  flush_console();
}

void RunLogger::train_progress(const ProgressInfo& progress) {
  if (!is_root_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  meter_->clear();
  JsonRecord record = event("train_progress");
  record["epoch"] = progress.epoch;
  record["step"] = progress.step;
  record["samples_done"] = progress.samples_done;
  record["samples_total"] = progress.samples_total;
  add_metrics(record, "train_", progress.metrics);
  record["samples_per_s"] = progress.samples_per_s;
  if (progress.run_left_s) record["run_left_s"] = *progress.run_left_s;
  write_event(record);
  if (tensorboard_) tensorboard_->train_progress(progress);
  out_ << (options_.format == LogFormat::kKatib ? katib_progress_line(progress) : pytorch_progress_line(progress))
      << "\n";
  flush_console();
}

void RunLogger::begin_progress(const std::string& phase, int64_t done, int64_t total) {
  if (!is_root_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  meter_->begin(phase, done, total);
}

void RunLogger::progress(int64_t done, std::optional<double> run_left_s) {
  if (!is_root_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  meter_->update(done, run_left_s);
}

void RunLogger::end_progress() {
  if (!is_root_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  meter_->end();
}

void RunLogger::epoch_end(const EpochStats& stats) {
  if (!is_root_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  meter_->end();
  if (options_.format == LogFormat::kPytorch) {
    out_ << "\n" << pytorch_test_line(stats) << "\n\n";
  }
  write_event(epoch_record(stats));  // first: the run log is what comparisons read
  if (tensorboard_) tensorboard_->epoch_end(stats);
  out_ << epoch_summary_line(stats) << "\n";
  if (options_.format == LogFormat::kKatib) out_ << katib_metrics_line(stats, std::time(nullptr)) << "\n";
  flush_console();
}

void RunLogger::finished_run(const EpochStats& last) {
  if (!is_root_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  meter_->end();
  JsonRecord record = epoch_metrics("finished_run", last);
  record["checkpoint"] = last.checkpoint_path;
  add_katib_metrics(record, last);
  write_event(record);
  if (options_.format == LogFormat::kPytorch) out_ << "\n" << pytorch_test_line(last) << "\n\n";
  out_ << finished_run_line(last) << "\n";
  if (options_.format == LogFormat::kKatib) out_ << katib_metrics_line(last, std::time(nullptr)) << "\n";
  flush_console();
}

void RunLogger::run_end(const RunSummary& summary) {
  if (!is_root_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  meter_->end();
  out_ << run_summary_line(summary) << "\n";
  flush_console();
  JsonRecord record = event("run_end");
  record["epochs_run"] = summary.epochs_run;
  record["total_s"] = summary.total_s;
  add_metrics(record, "final_test_", summary.final_test);
  record["peak_rss_bytes"] = summary.peak_rss_bytes;
  if (summary.trainer_status) {
    record["trainer_status_posts"] = summary.trainer_status->posted;
    record["trainer_status_failures"] = summary.trainer_status->failed;
  }
  write_event(record);
  events_->sync();
}

void RunLogger::samples_written(int64_t epoch, const std::vector<std::string>& paths) {
  if (!is_root_ || paths.empty()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  meter_->clear();
  out_ << "samples of epoch " << epoch << ": " << join(paths) << "\n";
  flush_console();
  JsonRecord record = event("samples");
  record["epoch"] = epoch;
  record["paths"] = paths;
  write_event(record);
  if (tensorboard_) tensorboard_->images(epoch, paths);
}

void RunLogger::profile_written(const ProfileRecord& profile) {
  if (!is_root_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  meter_->clear();
  out_ << "profile of steps " << profile.first_step << "-" << profile.last_step << " on rank " << profile.rank << ": "
       << profile.trace << " (open in ui.perfetto.dev), " << profile.table
       << (profile.kineto ? "" : " (this LibTorch has no Kineto: CPU operators only)") << "\n";
  flush_console();
  JsonRecord record = event("profile");
  record.update(JsonRecord(profile));
  write_event(record);
}

void RunLogger::checkpoint_written(const CheckpointRecord& checkpoint) {
  if (!is_root_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  JsonRecord record = event("checkpoint");
  record.update(JsonRecord(checkpoint));
  write_event(record);
}

namespace {

JsonRecord stopped_record(JsonRecord record, const StopRecord& r) {
  record["signal"] = r.signal;
  record["signal_number"] = r.signal_number;
  record["rank"] = r.rank;
  record["epoch"] = r.epoch;
  record["step"] = r.step;
  record["epoch_samples"] = r.epoch_samples;
  record["checkpoint"] = r.checkpoint.empty() ? JsonRecord() : JsonRecord(r.checkpoint);
  record["saved"] = r.saved;
  record["in_evaluation"] = r.in_evaluation;
  record["stop_s"] = r.stop_s;
  if (!r.at_once.empty()) record["at_once"] = r.at_once;
  return record;
}

}  // namespace

void RunLogger::stopped(const StopRecord& r) {
  if (!is_root_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  meter_->clear();
  std::string where;
  if (r.in_evaluation) {
    where = "during the evaluation of epoch " + std::to_string(r.epoch) + " (its " + std::to_string(r.step) +
            " steps trained)";
  } else if (r.step > 0) {
    where = "in epoch " + std::to_string(r.epoch) + " after step " + std::to_string(r.step);
  } else {
    where = r.epoch > 0 ? "after epoch " + std::to_string(r.epoch) : "before training";
  }
  out_ << "stopped by " << r.signal << " (rank " << r.rank << ") " << where << ": ";
  if (r.saved) {
    out_ << "checkpoint " << r.checkpoint << " saved; --resume continues there"
         << (r.in_evaluation ? " with the epoch's evaluation" : "") << "\n";
  } else if (!r.checkpoint.empty()) {
    out_ << "nothing new to save; --resume continues from " << r.checkpoint << "\n";
  } else if (r.checkpoints) {
    out_ << "nothing trained yet, so nothing to save; the next start begins the run\n";
  } else {
    out_ << "no checkpoint saved (checkpoint.enabled is false)\n";
  }
  flush_console();
  write_event(stopped_record(event("stopped"), r));
  events_->sync();
}

void RunLogger::stopped_at_once(const StopRecord& r) noexcept {
  if (!is_root_) return;
  // Called from the stop watchdog while the training thread may hold the lock, stuck in the write or
  // step that the stop could not wait for: the record is written without it if need be (one write(2)).
  std::unique_lock<std::mutex> lock(mutex_, std::defer_lock);
  for (int attempt = 0; attempt < 50 && !lock.try_lock(); ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  try {
    events_->append(json_line(stopped_record(event("stopped"), r)) + "\n");
    events_->sync();
  } catch (const std::exception& e) {
    print_line_to_stderr(std::string("dtrain: the run log has no record of this stop: ") + e.what());
  }
}

void RunLogger::resumed(const ResumeRecord& r) {
  if (!is_root_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  meter_->clear();
  out_ << "resumed " << (r.step > 0 ? "epoch " + std::to_string(r.epoch) + " at step " + std::to_string(r.step + 1)
                                    : "at epoch " + std::to_string(r.epoch))
       << " from " << r.checkpoint << (r.from_memory ? ", the copy in memory" : "") << " (world size " << r.from_world_size << " then, " << r.world_size << " now"
       << (r.restart_count > 0 ? "; torchrun restart " + std::to_string(r.restart_count) : "")
       << (r.steps_redone >= 0 ? "; " + std::to_string(r.steps_redone) + " steps to redo" : "") << ")\n";
  flush_console();
  JsonRecord record = event("resume");
  record["checkpoint"] = r.checkpoint;
  record["source"] = r.from_memory ? "memory" : "disk";
  record["restart_count"] = r.restart_count;
  record["from_world_size"] = r.from_world_size;
  record["world_size"] = r.world_size;
  record["epoch"] = r.epoch;
  record["step"] = r.step;
  record["epoch_samples"] = r.epoch_samples;
  record["restore_s"] = r.restore_s;
  record["unix_time_ms"] = static_cast<int64_t>(std::llround(r.unix_time_s * 1000.0));
  if (r.steps_redone >= 0) {
    record["steps_redone"] = r.steps_redone;
    record["restart_s"] = r.restart_s;
  }
  if (r.down_s >= 0) record["down_s"] = r.down_s;
  if (r.join_s >= 0) record["join_s"] = r.join_s;
  if (r.setup_s >= 0) record["setup_s"] = r.setup_s;
  if (r.lost_s >= 0) record["lost_s"] = r.lost_s;
  write_event(record);
}

void RunLogger::resource_samples(int rank, const std::vector<ResourceSample>& samples) {
  if (!is_root_ || samples.empty()) return;
  std::string lines;
  for (const ResourceSample& s : samples) {
    // "time" as every record has it, when the sample was taken (the record is written at the epoch's end);
    // "unix_time_ms" to the millisecond, for time series.
    JsonRecord record = JsonRecord::object();
    record["event"] = "sample";
    record["time"] = utc_timestamp(static_cast<std::time_t>(s.unix_time_s));
    record["unix_time_ms"] = static_cast<int64_t>(std::llround(s.unix_time_s * 1000.0));
    record["rank"] = rank;
    record["cpu_percent"] = s.cpu_percent;
    record["rss_bytes"] = s.rss_bytes;
    record["host_mem_used_bytes"] = s.host_mem_used_bytes;
    record["net_rx_bytes"] = s.net_rx_bytes;
    record["net_tx_bytes"] = s.net_tx_bytes;
    if (s.gpu_util_percent) record["gpu_util_percent"] = *s.gpu_util_percent;
    if (s.gpu_mem_used_bytes) record["gpu_mem_used_bytes"] = *s.gpu_mem_used_bytes;
    if (s.gpu_mem_bw_util_percent) record["gpu_mem_bw_util_percent"] = *s.gpu_mem_bw_util_percent;
    if (s.gpu_power_w) record["gpu_power_w"] = *s.gpu_power_w;
    if (s.gpu_sm_clock_mhz) record["gpu_sm_clock_mhz"] = *s.gpu_sm_clock_mhz;
    lines += json_line(record);
    lines += "\n";
  }
  std::lock_guard<std::mutex> lock(mutex_);
  events_->append(lines);  // all of them in one write(2), as write_event writes one record
  if (tensorboard_) tensorboard_->resource_samples(rank, samples);
}

void RunLogger::warning(const std::string& message) {
  if (!is_root_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  meter_->clear();
  print_line_to_stderr("dtrain: warning: " + message);
  JsonRecord record = event("warning");
  record["message"] = message;
  write_event(record);
}

void RunLogger::rank_warning(int rank, const std::string& message) {
  const std::string line = "rank " + std::to_string(rank) + ": " + message;
  if (!is_root_) {
    print_line_to_stderr("dtrain: warning: " + line);
    return;
  }
  warning(line);
}

void RunLogger::error(const std::string& message, int rank, const ActivitySnapshot& where) noexcept {
  if (!is_root_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    meter_->clear();
    JsonRecord record = event("error");
    record["message"] = message;
    record["rank"] = rank;
    record["phase"] = to_string(where.phase);
    record["epoch"] = where.epoch;
    record["step"] = where.step;
    write_event(record);
    events_->sync();
  } catch (const std::exception& e) {
    print_line_to_stderr(std::string("dtrain: the run log has no record of this error: ") + e.what());
  }
}

}  // namespace dtrain
