// The console and run-log formats other programs read, checked on what the real writers produce:
// console lines against runtime/log/console_lines.json (the patterns dtrain-report and the end-to-end
// tests parse with), and a run log holding every record kind the RunLogger writes, which the
// run_log_schema test validates against runtime/log/run_log.schema.json.
#include "test/support/catch.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/log/json_line.h"
#include "runtime/log/log_format.h"
#include "runtime/log/run_logger.h"
#include "test/support/temp_dir.h"

using namespace dtrain;

namespace {

JsonRecord read_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in);
  return JsonRecord::parse(in);
}

const JsonRecord& console_formats() {
  static const JsonRecord formats = read_json(std::string(DTRAIN_LOG_FORMATS_DIR) + "/console_lines.json");
  return formats;
}

// The pattern of console line `kind`, compiled as C++ compiles it (ECMAScript).
std::regex line_pattern(const std::string& kind) {
  const JsonRecord& lines = console_formats().at("lines");
  REQUIRE(lines.contains(kind));
  return std::regex(lines.at(kind).at("pattern").get<std::string>());
}

// The capture groups of `line` under pattern `kind`, by the names the file gives them; empty if it does
// not match.
std::map<std::string, std::string> parse_line(const std::string& kind, const std::string& line) {
  std::smatch m;
  std::map<std::string, std::string> groups;
  if (!std::regex_search(line, m, line_pattern(kind))) return groups;
  const JsonRecord& names = console_formats().at("lines").at(kind).at("groups");
  REQUIRE(names.size() + 1 == m.size());
  for (size_t i = 0; i < names.size(); ++i) groups[names[i].get<std::string>()] = m[i + 1].str();
  return groups;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

EpochStats classifier_epoch() {
  EpochStats s;
  s.epoch = 2;
  s.epochs = 3;
  s.lr = 0.7;
  s.steps = 469;
  s.train_samples = 60000;
  s.train = MetricValues({{"loss", 0.31234, 18740.4, 60000}});
  s.test = MetricValues({{"accuracy", 0.8812, 8812, 10000}, {"loss", 0.33718, 3371.8, 10000}});
  s.test_samples = 10000;
  s.epoch_s = 12.34;
  s.train_s = 11.5;
  s.eval_s = 0.84;
  s.samples_per_s = 5217.4;
  s.comm_s = 1.25;
  s.exposed_comm_s = 0.5;
  s.bytes_allreduced = 469LL * 4799528;
  s.bytes_allreduced_per_step = 4799528;
  s.algbw_gbps = 0.88;
  s.busbw_gbps = 0.88;
  s.flops_per_sample = 71565312;
  s.tflops_achieved = 0.37;
  s.mfu = 0.12;
  s.checkpoint_path = "logs/run/checkpoints/checkpoint-epoch-000002.safetensors";
  return s;
}

// A GAN's epoch: other metric names, one of them NaN (a diverged loss).
EpochStats gan_epoch() {
  EpochStats s = classifier_epoch();
  s.epoch = 3;
  s.train = MetricValues({{"d_loss", 1.25, 125, 100}, {"d_accuracy", 0.625, 125, 200}, {"g_loss", std::nan(""), 0, 100}});
  s.test = MetricValues({{"d_accuracy", 0.5, 100, 200}, {"d_loss", 2.0, 200, 100}, {"g_loss", -0.25, -25, 100}});
  s.mfu.reset();
  s.checkpoint_path.clear();
  return s;
}

RunInfo run_info(const std::string& checkpoint_dir) {
  RunInfo info;
  info.workload = "mnist";
  info.config_yaml = "workload: mnist\ntrain:\n  batch_size: 64\n";
  info.config_changes = {"train.epochs: 3"};
  info.run_name = "20261125T101500Z-mnist";
  info.checkpoint_dir = checkpoint_dir;
  info.world_size = 2;
  info.hosts = {"node-0", "node-1"};
  info.backend = "mpi";
  info.device = "cpu";
  info.threads_source = "OMP_NUM_THREADS=1";
  info.torch_version = "1.13.0";
  info.bootstrap = "mpi";
  info.launcher = "Open MPI v4.1.4";
  info.dtrain_version = "0.1.0";
  info.data_description = "synthetic MNIST-shaped data (seed 1)";
  info.train_samples = 60000;
  info.test_samples = 10000;
  info.parameters = 1199882;
  info.network = NetworkInfo{"tcp", "node-1", "eth0", "10.213.0.1", 1500};
  return info;
}

}  // namespace

TEST_CASE("each example of console_lines.json matches its own pattern", "[log][contract]") {
  const JsonRecord& lines = console_formats().at("lines");
  REQUIRE(lines.size() >= 9);
  for (const auto& [kind, line] : lines.items()) {
    INFO(kind);
    CHECK(std::regex_search(line.at("example").get<std::string>(), line_pattern(kind)));
    CHECK(line.at("example").get<std::string>().find("real") == std::string::npos);
  }
}

TEST_CASE("the console lines dtrain writes parse with console_lines.json's patterns", "[log][contract]") {
  const EpochStats classifier = classifier_epoch();
  const EpochStats gan = gan_epoch();

  auto katib = parse_line("katib_metrics", katib_metrics_line(classifier, 1795255200));
  CHECK(katib["metrics"] == "{metricName: accuracy, metricValue: 0.8812};{metricName: loss, metricValue: 0.3372}");
  auto pair = parse_line("katib_metric", katib["metrics"]);
  CHECK(pair["name"] == "accuracy");
  CHECK(pair["value"] == "0.8812");
  CHECK(parse_line("katib_metrics", katib_metrics_line(gan, 1795255200))["metrics"] ==
        "{metricName: d_accuracy, metricValue: 0.5000};{metricName: d_loss, metricValue: 2.0000};"
        "{metricName: g_loss, metricValue: -0.2500}");

  const ProgressInfo progress{2, 1280, 60000, classifier.train};
  const ProgressInfo gan_progress{2, 640, 6400, gan.train};
  auto katib_progress = parse_line("katib_progress", katib_progress_line(progress));
  CHECK(katib_progress["samples_done"] == "1280");
  CHECK(katib_progress["metrics"] == "\tloss=0.3123");
  CHECK(parse_line("katib_progress", katib_progress_line(gan_progress))["metrics"] ==
        "\td_loss=1.2500\td_accuracy=0.6250\tg_loss=nan");
  CHECK(parse_line("pytorch_progress", pytorch_progress_line(progress))["metrics"] == "\tLoss: 0.312340");
  CHECK_FALSE(parse_line("pytorch_progress", pytorch_progress_line(gan_progress)).empty());
  auto test_line = parse_line("pytorch_test", pytorch_test_line(classifier));
  CHECK(test_line["correct"] == "8812");
  CHECK(test_line["samples"] == "10000");

  auto summary = parse_line("epoch_summary", epoch_summary_line(classifier));
  CHECK(summary["epoch"] == "2");
  CHECK(summary["metrics"] == " | train_loss 0.3123 | test_acc 88.12% | test_loss 0.3372");
  CHECK(summary["samples_per_s"] == "5217");
  CHECK_FALSE(parse_line("epoch_summary", epoch_summary_line(gan)).empty());

  RunSummary done{3, 69.0221, classifier.test, {700LL << 20, 844LL << 20}, std::nullopt};
  CHECK(parse_line("done", run_summary_line(done))["final_metrics"] == "test_acc 88.12% | test_loss 0.3372");
  done.final_test = MetricValues();
  CHECK(parse_line("done", run_summary_line(done))["peak_rss_mib"] == "844");
}

TEST_CASE("the run's first console lines name what runs where and the run directory", "[log][contract]") {
  test::TempDir dir;
  for (const std::string& checkpoints : {std::string(), dir.file("run/checkpoints")}) {
    std::filesystem::create_directories(dir.file("run"));
    std::ostringstream console;
    std::ostringstream progress;
    LogOptions options;
    RunLogger logger(options, true, Directory::open(dir.file("run"), false), console, progress);
    RunInfo info = run_info(checkpoints);
    info.hosts = {"node-0"};
    logger.run_start(info);
    const std::vector<std::string> lines = split_lines(console.str());
    REQUIRE(lines.size() >= 5);
    auto header = parse_line("header", lines[0]);
    CHECK(header["workload"] == "mnist");
    CHECK(header["world_size"] == "2");
    CHECK(header["host_count"] == "1");
    CHECK(header["hosts"] == "node-0");
    CHECK(header["threads_per_rank"] == "1");
    CHECK(lines[2] == "network: tcp over eth0 (10.213.0.1, MTU 1500) to node-1");
    CHECK(parse_line("run_directory", lines[4])["run_dir"] == dir.file("run"));
    for (const std::string& line : lines) CHECK(line.find("real") == std::string::npos);
  }
}

TEST_CASE("the RunLogger writes every record kind of the run log", "[log][contract]") {
  // The run_log_schema test runs this case with DTRAIN_RUN_LOG_OUT set and validates what it leaves
  // there; alone it checks that each method wrote its record.
  test::TempDir dir;
  const char* out = std::getenv("DTRAIN_RUN_LOG_OUT");
  const std::string run_dir = out != nullptr ? std::string(out) : dir.file("run");
  std::filesystem::create_directories(run_dir);
  std::filesystem::remove(std::filesystem::path(run_dir) / "events.jsonl");
  std::ostringstream console;
  std::ostringstream progress;
  {
    LogOptions options;
    RunLogger logger(options, true, Directory::open(run_dir, false), console, progress);
    logger.run_start(run_info(run_dir + "/checkpoints"));
    logger.checkpoint_written(CheckpointRecord{2, 100, 12800, run_dir + "/checkpoints/checkpoint-epoch-000002-step-000100.safetensors", 0.25});
    ResumeRecord resumed;
    resumed.checkpoint = run_dir + "/checkpoints/checkpoint-epoch-000002-step-000100.safetensors";
    resumed.restart_count = 1;
    resumed.from_world_size = 3;
    resumed.world_size = 2;
    resumed.epoch = 2;
    resumed.step = 100;
    resumed.epoch_samples = 12800;
    resumed.steps_redone = 7;
    resumed.restart_s = 9.5;
    resumed.lost_s = 11.25;
    resumed.restore_s = 0.5;
    resumed.unix_time_s = 1795255200.125;
    logger.resumed(resumed);
    ResourceSample cpu;
    cpu.unix_time_s = 1795255201.5;
    cpu.cpu_percent = 97.5;
    cpu.rss_bytes = 700LL << 20;
    cpu.host_mem_used_bytes = 4LL << 30;
    cpu.net_rx_bytes = 1000;
    cpu.net_tx_bytes = 2000;
    ResourceSample gpu = cpu;
    gpu.gpu_util_percent = 99.0;
    gpu.gpu_mem_used_bytes = 30LL << 30;
    gpu.gpu_mem_bw_util_percent = 45.0;
    gpu.gpu_power_w = 650.0;
    gpu.gpu_sm_clock_mhz = 1980.0;
    logger.resource_samples(1, {cpu, gpu});
    ProgressInfo progress{2, 1280, 60000, classifier_epoch().train, 10, 1534.5, 95.0};
    logger.train_progress(progress);
    logger.profile_written(ProfileRecord{0, 11, 12, false, false, 1234, run_dir + "/profile-rank0.trace.json",
                                         run_dir + "/profile-rank0-ops.csv"});
    logger.epoch_end(classifier_epoch());
    logger.epoch_end(gan_epoch());
    // A real PNG (1x1, RGB) where a GAN's sample grid would be: TensorBoard gets it as an image.
    static const unsigned char kPng[] = {
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00,
        0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53, 0xde, 0x00, 0x00, 0x00,
        0x0c, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0x00, 0x00, 0x03, 0x01, 0x01, 0x00, 0xc9,
        0xfe, 0x92, 0xef, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82};
    std::filesystem::create_directories(std::filesystem::path(run_dir) / "samples");
    std::ofstream(run_dir + "/samples/epoch-000002.png", std::ios::binary)
        .write(reinterpret_cast<const char*>(kPng), sizeof kPng);
    logger.samples_written(2, {run_dir + "/samples/epoch-000002.png"});
    logger.finished_run(classifier_epoch());
    logger.warning("rank 1 (node-1) sent no heartbeat for 30.0 s; it was training, epoch 2, step 17");
    // Rank 0 posted progress to Kubeflow Trainer's status server: run_end counts the posts.
    logger.run_end(RunSummary{2, 25.5, classifier_epoch().test, {700LL << 20, 710LL << 20}, StatusPosts{41, 2}});
    StopRecord stopped;
    stopped.signal = "SIGTERM";
    stopped.signal_number = 15;
    stopped.rank = 1;
    stopped.epoch = 3;
    stopped.step = 17;
    stopped.epoch_samples = 2176;
    stopped.checkpoint = run_dir + "/checkpoints/checkpoint-epoch-000003-step-00000017.safetensors";
    stopped.saved = true;
    stopped.stop_s = 0.25;
    logger.stopped(stopped);
    ActivitySnapshot where;
    where.phase = Phase::kTraining;
    where.epoch = 3;
    where.step = 17;
    logger.error("[rank 1/2] MPI_Iallreduce failed", 1, where);
  }
  std::ifstream in(std::filesystem::path(run_dir) / "events.jsonl");
  std::multiset<std::string> kinds;
  for (std::string line; std::getline(in, line);) kinds.insert(JsonRecord::parse(line).at("event").get<std::string>());
  CHECK(kinds == std::multiset<std::string>{"run_start", "checkpoint", "resume", "sample", "sample", "train_progress", "profile",
                                            "epoch_end", "epoch_end", "samples", "finished_run", "warning",
                                            "run_end", "stopped", "error"});
}

TEST_CASE("a stop's console line says what was saved and where a resume continues", "[log][signals]") {
  using Catch::Matchers::Contains;
  test::TempDir dir;
  const std::string run_dir = dir.file("run");
  std::filesystem::create_directories(run_dir);
  std::ostringstream console;
  std::ostringstream progress;
  {
    LogOptions options;
    RunLogger logger(options, true, Directory::open(run_dir, false), console, progress);
    logger.run_start(run_info(run_dir + "/checkpoints"));
    StopRecord stop;
    stop.signal = "SIGTERM";
    stop.signal_number = 15;
    logger.stopped(stop);  // before training, checkpoints on
    stop.checkpoints = false;
    logger.stopped(stop);  // before training, checkpoints off
    stop.checkpoints = true;
    stop.epoch = 2;
    stop.step = 40;
    stop.in_evaluation = true;
    stop.saved = true;
    stop.checkpoint = "ck/checkpoint-epoch-000002-step-00000040.safetensors";
    logger.stopped(stop);
    stop.in_evaluation = false;
    stop.saved = false;
    stop.at_once = "the stop after SIGTERM did not finish within checkpoint.stop_timeout_s (25 s)";
    logger.stopped_at_once(stop);
  }
  const std::string text = console.str();
  CHECK_THAT(text, Contains("stopped by SIGTERM (rank 0) before training: nothing trained yet, so nothing to save; "
                            "the next start begins the run"));
  CHECK_THAT(text, Contains("stopped by SIGTERM (rank 0) before training: no checkpoint saved (checkpoint.enabled is false)"));
  CHECK_THAT(text, Contains("stopped by SIGTERM (rank 0) during the evaluation of epoch 2 (its 40 steps trained): checkpoint "
                            "ck/checkpoint-epoch-000002-step-00000040.safetensors saved; --resume continues there with the "
                            "epoch's evaluation"));
  std::ifstream in(std::filesystem::path(run_dir) / "events.jsonl");
  std::vector<JsonRecord> stops;
  for (std::string line; std::getline(in, line);) {
    JsonRecord record = JsonRecord::parse(line);
    if (record.at("event").get<std::string>() == "stopped") stops.push_back(record);
  }
  REQUIRE(stops.size() == 4);
  CHECK(stops[2].at("in_evaluation").get<bool>());
  CHECK_FALSE(stops[1].contains("at_once"));
  CHECK(stops[3].at("at_once").get<std::string>() == "the stop after SIGTERM did not finish within checkpoint.stop_timeout_s (25 s)");
  CHECK_FALSE(stops[3].at("saved").get<bool>());
}
