#include "runtime/log/run_logger.h"

#include <unistd.h>

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

std::string epoch_json(const EpochStats& s) {
  return event("epoch_end")
      .add("epoch", s.epoch)
      .add("lr", s.lr)
      .add("steps", s.steps)
      .add("train_samples", s.train_samples)
      .add("train_loss", s.train_loss)
      .add("test_loss", s.test_loss)
      .add("test_accuracy", s.test_accuracy)
      .add("test_correct", s.test_correct)
      .add("test_samples", s.test_samples)
      .add("epoch_s", s.epoch_s)
      .add("train_s", s.train_s)
      .add("eval_s", s.eval_s)
      .add("samples_per_s", s.samples_per_s)
      .add("comm_s", s.comm_s)
      .add("exposed_comm_s", s.exposed_comm_s)
      .add("bytes_allreduced", s.bytes_allreduced)
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
  if (ec) throw Error("cannot create run log directory '" + run_dir_ + "' (log.dir): " + ec.message());
  const std::string events_path = (fs::path(run_dir_) / "events.jsonl").string();
  events_.open(events_path, std::ios::app);
  if (!events_) throw Error("cannot open run log '" + events_path + "' for writing (log.dir)");
}

void RunLogger::write_event(const std::string& json_line) {
  events_ << json_line << '\n';
  events_.flush();  // a killed run keeps every event written so far
}

void RunLogger::clear_bar() {
  if (!bar_visible_) return;
  std::cerr << "\r\033[K" << std::flush;
  bar_visible_ = false;
}

void RunLogger::run_start(const RunInfo& info) {
  if (!is_root_) return;
  const std::string hosts = join(info.hosts);
  out_ << "dtrain " << info.dtrain_version << " | workload " << info.workload << " | world size "
      << info.world_size << " on " << info.hosts.size() << (info.hosts.size() == 1 ? " host" : " hosts") << " ("
      << hosts << ") | backend " << info.backend << " | device " << info.device << " | threads per rank "
      << info.threads_per_rank << "\n"
      << "libtorch " << info.torch_version << " | " << info.mpi_version << "\n"
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
  out_ << std::flush;

  std::ofstream config_file(std::filesystem::path(run_dir_) / "config.yaml");
  config_file << info.config_yaml;
  write_event(event("run_start")
                  .add("dtrain_version", info.dtrain_version)
                  .add("workload", info.workload)
                  .add("world_size", info.world_size)
                  .add("hosts", info.hosts)
                  .add("ranks_per_host", info.ranks_per_host)
                  .add("backend", info.backend)
                  .add("device", info.device)
                  .add("threads_per_rank", info.threads_per_rank)
                  .add("torch_version", info.torch_version)
                  .add("mpi_version", info.mpi_version)
                  .add("data", info.data_description)
                  .add("train_samples", info.train_samples)
                  .add("test_samples", info.test_samples)
                  .add("parameters", info.parameters)
                  .add("config", info.config_yaml)
                  .str());
}

void RunLogger::info(const std::string& message) {
  if (!is_root_) return;
  clear_bar();
  out_ << message << std::endl;
}

void RunLogger::train_progress(const ProgressInfo& progress) {
  if (!is_root_) return;
  clear_bar();
  out_ << (options_.format == LogFormat::kKatib ? katib_progress_line(progress) : pytorch_progress_line(progress))
      << std::endl;
}

void RunLogger::step_progress(int64_t epoch, int64_t step, int64_t steps) {
  if (!is_root_ || !draw_bar_) return;
  // Redrawing every step would cost more than a small model's step; five times a second is enough.
  if (step != steps && bar_visible_ && since_bar_.elapsed_s() < 0.2) return;
  since_bar_.reset();
  std::cerr << "\repoch " << epoch << " " << progress_bar(step, steps, 30) << std::flush;
  bar_visible_ = true;
}

void RunLogger::epoch_end(const EpochStats& stats) {
  if (!is_root_) return;
  clear_bar();
  if (options_.format == LogFormat::kPytorch) {
    out_ << "\n" << pytorch_test_line(stats) << "\n\n";
  }
  out_ << epoch_summary_line(stats) << "\n";
  if (options_.format == LogFormat::kKatib) out_ << katib_metrics_line(stats, std::time(nullptr)) << "\n";
  out_ << std::flush;
  write_event(epoch_json(stats));
}

void RunLogger::run_end(const RunSummary& summary) {
  if (!is_root_) return;
  clear_bar();
  int64_t peak = 0;
  for (int64_t bytes : summary.peak_rss_bytes) peak = std::max(peak, bytes);
  out_ << "done: " << summary.epochs_run << " epochs in " << summary.total_s << " s | final test_acc "
      << 100.0 * summary.final_test_accuracy << "% | peak memory per rank " << (peak >> 20) << " MiB"
      << std::endl;
  write_event(event("run_end")
                  .add("epochs_run", summary.epochs_run)
                  .add("total_s", summary.total_s)
                  .add("final_test_accuracy", summary.final_test_accuracy)
                  .add("final_test_loss", summary.final_test_loss)
                  .add("peak_rss_bytes", summary.peak_rss_bytes)
                  .str());
}

}  // namespace dtrain
