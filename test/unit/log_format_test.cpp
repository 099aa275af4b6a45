#include "test/support/catch.h"

#include <regex>

#include <sstream>

#include "runtime/log/json_line.h"
#include "runtime/log/log_format.h"
#include "runtime/log/progress_meter.h"

using namespace dtrain;

namespace {
EpochStats sample_stats() {
  EpochStats s;
  s.epoch = 3;
  s.epochs = 10;
  s.train = MetricValues({{"loss", 0.12344, 1234.4, 10000}});
  s.test = MetricValues({{"accuracy", 0.8101, 8101, 10000}, {"loss", 0.52118, 5211.8, 10000}});
  s.test_samples = 10000;
  s.epoch_s = 12.34;
  s.samples_per_s = 48213.4;
  return s;
}
}  // namespace

TEST_CASE("the Katib metrics line is the one the analysis tools parse", "[log]") {
  // Its grammar is console_lines.json's `katib_metrics` (log_contract_test.cpp).
  const std::string line = katib_metrics_line(sample_stats(), 1795255200);  // 2026-11-21T10:00:00Z
  CHECK(line ==
        "2026-11-21T10:00:00Z INFO     {metricName: accuracy, metricValue: 0.8101};"
        "{metricName: loss, metricValue: 0.5212}");
}

TEST_CASE("progress lines use global sample counts", "[log]") {
  ProgressInfo p{1, 1280, 60000, MetricValues({{"loss", 0.693147, 887.23, 1280}})};
  CHECK(katib_progress_line(p) == "Train Epoch: 1 [1280/60000 (2%)]\tloss=0.6931");
  CHECK(pytorch_progress_line(p) == "Train Epoch: 1 [1280/60000 (2%)]\tLoss: 0.693147");
}

TEST_CASE("lines carry every metric a workload names, in its order", "[log]") {
  EpochStats s = sample_stats();
  s.train = MetricValues({{"d_loss", 0.5, 5, 10}, {"g_loss", 1.25, 12.5, 10}});
  s.test = MetricValues({{"fid", 31.4159, 31.4159, 1}});
  CHECK(katib_metrics_line(s, 1795255200) == "2026-11-21T10:00:00Z INFO     {metricName: fid, metricValue: 31.4159}");
  CHECK(epoch_summary_line(s) == "epoch 3/10 | train_d_loss 0.5000 | train_g_loss 1.2500 | test_fid 31.4159 | 12.3 s | 48213 samples/s");
  CHECK(pytorch_test_line(s) == "Test set: fid: 31.4159");
  ProgressInfo p{2, 640, 6400, s.train};
  CHECK(katib_progress_line(p) == "Train Epoch: 2 [640/6400 (10%)]\td_loss=0.5000\tg_loss=1.2500");
  CHECK(pytorch_progress_line(p) == "Train Epoch: 2 [640/6400 (10%)]\td_loss: 0.500000\tg_loss: 1.250000");
  CHECK(final_metrics_text(s.test) == "test_fid 31.4159");
}

TEST_CASE("pytorch and summary lines have a fixed field order", "[log]") {
  CHECK(pytorch_test_line(sample_stats()) == "Test set: Average loss: 0.5212, Accuracy: 8101/10000 (81%)");
  CHECK(epoch_summary_line(sample_stats()) ==
        "epoch 3/10 | train_loss 0.1234 | test_acc 81.01% | test_loss 0.5212 | 12.3 s | 48213 samples/s");
}

TEST_CASE("the run's last line formats its figures as the epoch lines do", "[log]") {
  RunSummary summary;
  summary.epochs_run = 3;
  summary.total_s = 69.0221;
  summary.final_test = MetricValues({{"accuracy", 1.0, 500, 500}, {"loss", 0.0015, 0.75, 500}});
  summary.peak_rss_bytes = {700LL << 20, 844LL << 20};
  CHECK(run_summary_line(summary) ==
        "done: 3 epochs in 69.0 s | final test_acc 100.00% | test_loss 0.0015 | peak memory per rank 844 MiB");
  summary.epochs_run = 1;
  summary.final_test = MetricValues();
  CHECK(run_summary_line(summary) == "done: 1 epoch in 69.0 s | peak memory per rank 844 MiB");
}

TEST_CASE("no console line contains the substring 'real'", "[log]") {
  const EpochStats s = sample_stats();
  ProgressInfo p{1, 1280, 60000, MetricValues({{"loss", 0.5, 640, 1280}})};
  for (const std::string& line : {katib_metrics_line(s, 0), katib_progress_line(p), pytorch_progress_line(p),
                                  pytorch_test_line(s), epoch_summary_line(s),
                                  progress_bar_text(ProgressState{"evaluation 2/10", 5, 10, 3.5, std::nullopt}, 20),
                                  progress_line_text(ProgressState{"epoch 2/10", 5, 10, 3.5, std::nullopt}),
                                  run_summary_line(RunSummary{2, 12.5, s.test, {1 << 30}, std::nullopt})}) {
    CHECK(line.find("real") == std::string::npos);
  }
}

TEST_CASE("the progress bar and line show how far, how fast and how long is left", "[log][progress]") {
  const ProgressState state{"epoch 2/10", 36000, 60000, 1534.4, std::nullopt};
  CHECK(progress_bar_text(state, 20) == "epoch 2/10 [############........]  60% 36000/60000 | 1534 samples/s | 0:16 left");
  CHECK(progress_line_text(state) == "progress: epoch 2/10 60% (36000/60000 samples) | 1534 samples/s | 0:16 left");
  // Before the first rate there is no estimate; past the end the bar stays full.
  CHECK(progress_line_text(ProgressState{"evaluation 1/1", 0, 10000, 0, std::nullopt}) ==
        "progress: evaluation 1/1 0% (0/10000 samples) | -- samples/s | --:-- left");
  CHECK(progress_bar_text(ProgressState{"epoch 1/1", 12, 10, 5, std::nullopt}, 4) == "epoch 1/1 [####] 100% 12/10 | 5 samples/s | 0:00 left");
  // With the whole run's estimate (runtime/train/run_eta.h) after the phase's.
  CHECK(progress_line_text(ProgressState{"epoch 2/10", 36000, 60000, 1534.4, 580.0}) ==
        "progress: epoch 2/10 60% (36000/60000 samples) | 1534 samples/s | 0:16 left | run 9:40 left");
  CHECK(progress_bar_text(ProgressState{"evaluation 1/1", 0, 10000, 0, 3725.0}, 4) ==
        "evaluation 1/1 [....]   0% 0/10000 | -- samples/s | --:-- left | run 1:02:05 left");
  CHECK(format_duration(59.4) == "0:59");
  CHECK(format_duration(3725) == "1:02:05");
  CHECK(format_duration(-1) == "--:--");
}

TEST_CASE("progress output never looks like a Katib metric or bash time", "[log][progress]") {
  // Katib's StdOut collector takes "name=number" anywhere in a line for a metric; analysis tools take a
  // line with "real" for bash time's.
  const std::regex katib_filter(R"(([\w|-]+)\s*=\s*([+-]?\d*(\.\d+)?([Ee][+-]?\d+)?))");
  for (const ProgressState& state : {ProgressState{"epoch 12/100", 0, 60000, 0, std::nullopt}, ProgressState{"epoch 1/1", 60000, 60000, 1e6, std::nullopt},
                                     ProgressState{"evaluation 3/3", 4500, 10000, 3.25, std::nullopt}}) {
    for (const std::string& text : {progress_bar_text(state, 30), progress_line_text(state)}) {
      CHECK_FALSE(std::regex_search(text, katib_filter));
      CHECK(text.find('=') == std::string::npos);
      CHECK(text.find("real") == std::string::npos);
    }
  }
}

TEST_CASE("the progress meter redraws a bar in place and prints lines at most every interval", "[log][progress]") {
  double now = 100.0;
  auto clock = [&now] { return now; };
  std::ostringstream lines_out;
  ProgressMeter lines(ProgressStyle::kLines, 5.0, lines_out, clock);
  lines.begin("epoch 1/2", 0, 1000);
  for (int step = 1; step <= 10; ++step) {
    now += 1.0;  // 100 samples a second
    lines.update(step * 100);
  }
  lines.end();
  // A line 5 s and 10 s after the start; the rate counts from the first update (at 100 samples).
  CHECK(lines_out.str() ==
        "progress: epoch 1/2 50% (500/1000 samples) | 100 samples/s | 0:05 left\n"
        "progress: epoch 1/2 100% (1000/1000 samples) | 100 samples/s | 0:00 left\n");

  std::ostringstream bar_out;
  ProgressMeter bar(ProgressStyle::kBar, 5.0, bar_out, clock);
  bar.begin("evaluation 1/2", 0, 100);
  bar.update(10);  // drawn: nothing was visible
  now += 0.1;
  bar.update(20);  // too soon after the last draw
  now += 0.2;
  bar.update(40);
  bar.clear();  // another line is about to be printed
  bar.update(50);  // drawn again at once
  bar.end();
  const std::string out = bar_out.str();
  CHECK(out.find("\revaluation 1/2 [") == 0);
  CHECK(out.find(" 10/100 |") != std::string::npos);
  CHECK(out.find(" 20/100 |") == std::string::npos);
  CHECK(out.find(" 40/100 | 100 samples/s | 0:01 left") != std::string::npos);
  CHECK(out.find(" 50/100 |") != std::string::npos);
  CHECK(out.substr(out.size() - 4) == "\r\033[K");  // end() leaves a clean line for the epoch's lines
  CHECK(out.find('\n') == std::string::npos);

  std::ostringstream off_out;
  ProgressMeter off(ProgressStyle::kOff, 5.0, off_out, clock);
  off.begin("epoch 1/1", 0, 10);
  now += 60;
  off.update(10);
  off.end();
  CHECK(off_out.str().empty());
}

TEST_CASE("JSON records escape strings, keep their key order and turn non-finite numbers into null", "[log]") {
  JsonRecord record = JsonRecord::object();
  record["s"] = "a\"b\\c\n\x01";
  record["x"] = 1.5;
  record["nan"] = std::nan("");
  record["n"] = int64_t{-3};
  record["b"] = true;
  record["hosts"] = std::vector<std::string>{"h1", "h2"};
  record["nested"]["k"] = 1;
  CHECK(json_line(record) == R"({"s":"a\"b\\c\n\u0001","x":1.5,"nan":null,"n":-3,"b":true,"hosts":["h1","h2"],"nested":{"k":1}})");
}

TEST_CASE("JSON records are valid UTF-8 whatever bytes their strings hold", "[log]") {
  JsonRecord record = JsonRecord::object();
  record["path"] = std::string("logs-\xe9t\xc3\xa9/run");  // a Latin-1 e-acute, then a UTF-8 one
  record["cut"] = std::string("\xe2\x82");                   // a UTF-8 sequence cut short
  // Each invalid byte becomes U+FFFD; valid UTF-8 passes through unchanged.
  CHECK(json_line(record) == "{\"path\":\"logs-\xef\xbf\xbdt\xc3\xa9/run\",\"cut\":\"\xef\xbf\xbd\"}");
  CHECK(JsonRecord::parse(json_line(record))["path"] == "logs-\xef\xbf\xbdt\xc3\xa9/run");
}

TEST_CASE("Katib's File collector values are the console line's, as text", "[log]") {
  const EpochStats s = sample_stats();
  const auto values = katib_metric_values(s.test);
  REQUIRE(values.size() == 2);
  CHECK(values[0] == std::make_pair(std::string("accuracy"), std::string("0.8101")));
  CHECK(values[1] == std::make_pair(std::string("loss"), std::string("0.5212")));
  CHECK(utc_timestamp_ms(1764000000.25) == "2025-11-24T16:00:00.250Z");
  CHECK(utc_timestamp_ms(1764000000.9996) == "2025-11-24T16:00:00.999Z");
}

TEST_CASE("the network probe's console line gives its figures and each module's buckets", "[log]") {
  BucketProbeRecord probe;
  probe.latency_s = 4.2e-4;
  probe.bytes_per_s = 96.14e6;
  probe.small_cpu_s = 3.1e-4;
  probe.compute_cores = 0.25;
  probe.per_bucket_s = 1.66e-3;
  probe.probe_s = 0.207;
  const std::vector<GradientBuckets> layouts{{"generator", {1048576, 3041280, 3041280}}, {"discriminator", {262144}}};
  std::string line = bucket_probe_line(probe, layouts);
  CHECK(line ==
        "buckets from the network: allreduce latency 0.42 ms, 96.1 MB/s, 0.31 ms CPU each on 0.25 cores per rank -> "
        "1.66 ms per bucket (probe 0.21 s); generator: 7.1 MB in 3 buckets of up to 2.90 MiB; discriminator: 0.3 MB in "
        "1 bucket of up to 0.25 MiB");
  CHECK(line.find("real") == std::string::npos);
  probe.compute_cores = 0;
  line = bucket_probe_line(probe, {});
  CHECK(line.find("0.31 ms CPU each on a device (not counted) -> 1.66 ms per bucket (probe 0.21 s)") != std::string::npos);
}
