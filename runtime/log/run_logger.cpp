#include "runtime/log/run_logger.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "runtime/log/json_writer.h"
#include "runtime/log/log_format.h"
#include "runtime/util/error.h"
#include "runtime/util/strings.h"

namespace dtrain {
namespace {

// Every run-log line starts with the event's name and UTC time.
JsonObject event(const char* name) { return JsonObject().add("event", name).add("time", utc_timestamp(std::time(nullptr))); }

// "<prefix><name>" for each metric; a classifier's accuracy also gives its count of correct predictions
// ("test_correct").
JsonObject& add_metrics(JsonObject& record, const std::string& prefix, const MetricValues& metrics) {
  for (const MetricValue& m : metrics.all()) {
    record.add(prefix + m.name, m.value);
    if (m.name == "accuracy") record.add(prefix + "correct", static_cast<int64_t>(m.sum));
  }
  return record;
}

JsonObject epoch_metrics(JsonObject record, const EpochStats& s) {
  record.add("epoch", s.epoch).add("lr", s.lr).add("train_samples", s.train_samples);
  add_metrics(record, "train_", s.train);
  add_metrics(record, "test_", s.test);
  return record.add("test_samples", s.test_samples);
}

std::string epoch_json(const EpochStats& s) {
  JsonObject record = epoch_metrics(event("epoch_end"), s);
  record.add("steps", s.steps)
      .add("first_step", s.first_step)
      .add("skipped_steps", s.skipped_steps)
      .add("epoch_s", s.epoch_s)
      .add("train_s", s.train_s)
      .add("eval_s", s.eval_s)
      .add("samples_per_s", s.samples_per_s)
      .add("flops_per_sample", s.flops_per_sample)
      .add("tflops_achieved", s.tflops_achieved);
  if (s.mfu) record.add("mfu", *s.mfu);
  return record.add("comm_s", s.comm_s)
      .add("exposed_comm_s", s.exposed_comm_s)
      .add("bytes_allreduced", s.bytes_allreduced)
      .add("bytes_allreduced_per_step", s.bytes_allreduced_per_step)
      .add("algbw_gbps", s.algbw_gbps)
      .add("busbw_gbps", s.busbw_gbps)
      .add("net_tx_bytes_per_step", s.net_tx_bytes_per_step)
      .add("net_rx_bytes_per_step", s.net_rx_bytes_per_step)
      .add("checkpoint", s.checkpoint_path)
      .str();
}

}  // namespace

RunLogger::RunLogger(const LogOptions& options, bool is_root, const std::string& workload, std::ostream& console)
    : options_(options), is_root_(is_root), out_(console) {
  if (!is_root_) return;
  draw_bar_ = options_.progress_bar && isatty(STDERR_FILENO);
  namespace fs = std::filesystem;
  const std::string stem = (fs::path(options_.dir) / (format_utc(std::time(nullptr), "%Y%m%dT%H%M%SZ") + "-" + workload)).string();
  run_dir_ = stem;
  std::error_code ec;
  for (int attempt = 2; fs::exists(run_dir_, ec); ++attempt) run_dir_ = stem + "-" + std::to_string(attempt);
  fs::create_directories(run_dir_, ec);
  if (ec) throw IoError("cannot create run log directory '" + run_dir_ + "' (log.dir): " + ec.message());
  events_ = std::make_unique<AppendFile>((fs::path(run_dir_) / "events.jsonl").string());
}

void RunLogger::write_event(const std::string& json_line) {
  // One write(2) per record: a killed run keeps every event written so far, a full disk throws here.
  events_->append(json_line + '\n');
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

void RunLogger::clear_bar() {
  if (!bar_visible_) return;
  std::cerr << "\r\033[K" << std::flush;
  bar_visible_ = false;
}

void RunLogger::run_start(const RunInfo& info) {
  if (!is_root_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string hosts = join(info.hosts);
  out_ << "dtrain " << info.dtrain_version << " | workload " << info.workload << " | world size "
      << info.world_size << " on " << info.hosts.size() << (info.hosts.size() == 1 ? " host" : " hosts") << " ("
      << hosts << ") | backend " << info.backend << " | device " << info.device << " | threads per rank "
      << info.threads_per_rank << (info.threads_source.empty() ? "" : " (" + info.threads_source + ")") << "\n"
      << "libtorch " << info.torch_version << " | " << info.launcher << "\n"
      << "data: " << info.data_description << " | " << info.train_samples << " train, " << info.test_samples
      << " test samples | " << info.parameters << " parameters\n"
      << "run log: " << run_dir_ << "/events.jsonl\n"
      << "effective config:\n";
  std::string line;
  for (char c : info.config_yaml) {
    if (c == '\n') {
      out_ << "  " << line << "\n";
      line.clear();
    } else {
      line += c;
    }
  }
  flush_console();

  write_file_atomically((std::filesystem::path(run_dir_) / "config.yaml").string(), info.config_yaml);
  write_event(event("run_start")
                  .add("dtrain_version", info.dtrain_version)
                  .add("workload", info.workload)
                  .add("world_size", info.world_size)
                  .add("hosts", info.hosts)
                  .add("ranks_per_host", info.ranks_per_host)
                  .add("backend", info.backend)
                  .add("device", info.device)
                  .add("threads_per_rank", info.threads_per_rank)
                  .add("threads_source", info.threads_source)
                  .add("torch_version", info.torch_version)
                  .add("bootstrap", info.bootstrap)
                  .add("launcher", info.launcher)
                  .add("restart_count", info.restart_count)
                  .add("data", info.data_description)
                  .add("train_samples", info.train_samples)
                  .add("test_samples", info.test_samples)
                  .add("parameters", info.parameters)
                  .add("accelerator", info.accelerator)
                  .add("peak_tflops", info.peak_tflops)
                  .add("config", info.config_yaml)
                  .str());
}

void RunLogger::info(const std::string& message) {
  if (!is_root_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  clear_bar();
  out_ << message << "\n";
  flush_console();
}

void RunLogger::train_progress(const ProgressInfo& progress) {
  if (!is_root_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  clear_bar();
  out_ << (options_.format == LogFormat::kKatib ? katib_progress_line(progress) : pytorch_progress_line(progress))
      << "\n";
  flush_console();
}

void RunLogger::step_progress(int64_t epoch, int64_t step, int64_t steps) {
  if (!is_root_ || !draw_bar_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  // Redrawing every step would cost more than a small model's step; five times a second is enough.
  if (step != steps && bar_visible_ && since_bar_.elapsed_s() < 0.2) return;
  since_bar_.reset();
  std::cerr << "\repoch " << epoch << " " << progress_bar(step, steps, 30) << std::flush;
  bar_visible_ = true;
}

void RunLogger::epoch_end(const EpochStats& stats) {
  if (!is_root_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  clear_bar();
  if (options_.format == LogFormat::kPytorch) {
    out_ << "\n" << pytorch_test_line(stats) << "\n\n";
  }
  write_event(epoch_json(stats));  // first: the run log is what comparisons read
  out_ << epoch_summary_line(stats) << "\n";
  if (options_.format == LogFormat::kKatib) out_ << katib_metrics_line(stats, std::time(nullptr)) << "\n";
  flush_console();
}

void RunLogger::finished_run(const EpochStats& last) {
  if (!is_root_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  clear_bar();
  write_event(epoch_metrics(event("finished_run"), last).add("checkpoint", last.checkpoint_path).str());
  if (options_.format == LogFormat::kPytorch) out_ << "\n" << pytorch_test_line(last) << "\n\n";
  out_ << finished_run_line(last) << "\n";
  if (options_.format == LogFormat::kKatib) out_ << katib_metrics_line(last, std::time(nullptr)) << "\n";
  flush_console();
}

void RunLogger::run_end(const RunSummary& summary) {
  if (!is_root_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  clear_bar();
  out_ << run_summary_line(summary) << "\n";
  flush_console();
  JsonObject record = event("run_end");
  record.add("epochs_run", summary.epochs_run).add("total_s", summary.total_s);
  add_metrics(record, "final_test_", summary.final_test);
  write_event(record.add("peak_rss_bytes", summary.peak_rss_bytes).str());
  events_->sync();
}

void RunLogger::samples_written(int64_t epoch, const std::vector<std::string>& paths) {
  if (!is_root_ || paths.empty()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  clear_bar();
  std::string listed;
  for (const std::string& path : paths) listed += (listed.empty() ? "" : ", ") + path;
  out_ << "samples of epoch " << epoch << ": " << listed << "\n";
  flush_console();
  write_event(event("samples").add("epoch", epoch).add("paths", paths).str());
}

void RunLogger::profile_written(const ProfileRecord& record) {
  if (!is_root_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  clear_bar();
  out_ << "profile of steps " << record.first_step << "-" << record.last_step << " on rank " << record.rank << ": "
       << record.trace_path << " (open in ui.perfetto.dev), " << record.table_path
       << (record.kineto ? "" : " (this LibTorch has no Kineto: CPU operators only)") << "\n";
  flush_console();
  write_event(event("profile")
                  .add("rank", record.rank)
                  .add("first_step", record.first_step)
                  .add("last_step", record.last_step)
                  .add("kineto", record.kineto)
                  .add("cuda", record.cuda)
                  .add("events", record.events)
                  .add("trace", record.trace_path)
                  .add("table", record.table_path)
                  .str());
}

void RunLogger::checkpoint_written(const CheckpointRecord& record) {
  if (!is_root_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  write_event(event("checkpoint")
                  .add("epoch", record.epoch)
                  .add("step", record.step)
                  .add("epoch_samples", record.epoch_samples)
                  .add("path", record.path)
                  .add("save_s", record.save_s)
                  .str());
}

void RunLogger::resumed(const ResumeRecord& r) {
  if (!is_root_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  clear_bar();
  out_ << "resumed " << (r.step > 0 ? "epoch " + std::to_string(r.epoch) + " at step " + std::to_string(r.step + 1)
                                    : "at epoch " + std::to_string(r.epoch))
       << " from " << r.checkpoint << " (world size " << r.from_world_size << " then, " << r.world_size << " now"
       << (r.restart_count > 0 ? "; torchrun restart " + std::to_string(r.restart_count) : "")
       << (r.steps_redone >= 0 ? "; " + std::to_string(r.steps_redone) + " steps to redo" : "") << ")\n";
  flush_console();
  JsonObject record = event("resume");
  record.add("checkpoint", r.checkpoint)
      .add("restart_count", r.restart_count)
      .add("from_world_size", r.from_world_size)
      .add("world_size", r.world_size)
      .add("epoch", r.epoch)
      .add("step", r.step)
      .add("epoch_samples", r.epoch_samples)
      .add("restore_s", r.restore_s)
      .add("unix_time_ms", static_cast<int64_t>(std::llround(r.unix_time_s * 1000.0)));
  if (r.steps_redone >= 0) record.add("steps_redone", r.steps_redone).add("restart_s", r.restart_s);
  if (r.lost_s >= 0) record.add("lost_s", r.lost_s);
  write_event(record.str());
}

void RunLogger::resource_samples(int rank, const std::vector<ResourceSample>& samples) {
  if (!is_root_ || samples.empty()) return;
  std::string lines;
  for (const ResourceSample& s : samples) {
    // "time" as every record has it, when the sample was taken (the record is written at the epoch's end);
    // "unix_time_ms" to the millisecond, for time series.
    JsonObject record;
    record.add("event", "sample")
        .add("time", utc_timestamp(static_cast<std::time_t>(s.unix_time_s)))
        .add("unix_time_ms", static_cast<int64_t>(std::llround(s.unix_time_s * 1000.0)))
        .add("rank", rank)
        .add("cpu_percent", s.cpu_percent)
        .add("rss_bytes", s.rss_bytes)
        .add("host_mem_used_bytes", s.host_mem_used_bytes)
        .add("net_rx_bytes", s.net_rx_bytes)
        .add("net_tx_bytes", s.net_tx_bytes);
    if (s.gpu_util_percent) record.add("gpu_util_percent", *s.gpu_util_percent);
    if (s.gpu_mem_used_bytes) record.add("gpu_mem_used_bytes", *s.gpu_mem_used_bytes);
    if (s.gpu_mem_bw_util_percent) record.add("gpu_mem_bw_util_percent", *s.gpu_mem_bw_util_percent);
    if (s.gpu_power_w) record.add("gpu_power_w", *s.gpu_power_w);
    if (s.gpu_sm_clock_mhz) record.add("gpu_sm_clock_mhz", *s.gpu_sm_clock_mhz);
    lines += record.str();
    lines += "\n";
  }
  lines.pop_back();  // write_event ends the last line
  std::lock_guard<std::mutex> lock(mutex_);
  write_event(lines);
}

void RunLogger::warning(const std::string& message) {
  if (!is_root_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  clear_bar();
  std::cerr << "dtrain: warning: " << message << std::endl;
  write_event(event("warning").add("message", message).str());
}

void RunLogger::error(const std::string& message, int rank, const ActivitySnapshot& where) noexcept {
  if (!is_root_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    clear_bar();
    write_event(event("error")
                    .add("message", message)
                    .add("rank", static_cast<int64_t>(rank))
                    .add("phase", std::string(to_string(where.phase)))
                    .add("epoch", where.epoch)
                    .add("step", where.step)
                    .str());
    events_->sync();
  } catch (const std::exception& e) {
    std::cerr << "dtrain: the run log has no record of this error: " << e.what() << std::endl;
  }
}

}  // namespace dtrain
