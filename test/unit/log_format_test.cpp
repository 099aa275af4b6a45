#include "test/support/catch.h"

#include <regex>

#include "runtime/log/json_writer.h"
#include "runtime/log/log_format.h"

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

TEST_CASE("the Katib metrics line matches the analysis tools' grammar", "[log]") {
  const std::string line = katib_metrics_line(sample_stats(), 1795255200);  // 2026-11-21T10:00:00Z
  CHECK(line ==
        "2026-11-21T10:00:00Z INFO     {metricName: accuracy, metricValue: 0.8101};"
        "{metricName: loss, metricValue: 0.5212}");
  const std::regex grammar(
      R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ INFO {5}\{metricName: accuracy, metricValue: \d+\.\d{4}\};)"
      R"(\{metricName: loss, metricValue: \d+\.\d{4}\}$)");
  CHECK(std::regex_match(line, grammar));
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
                                  pytorch_test_line(s), epoch_summary_line(s), progress_bar(5, 10, 20),
                                  run_summary_line(RunSummary{2, 12.5, s.test, {1 << 30}})}) {
    CHECK(line.find("real") == std::string::npos);
  }
}

TEST_CASE("the progress bar is bounded", "[log]") {
  CHECK(progress_bar(0, 10, 10) == "[>         ]   0% 0/10 steps");
  CHECK(progress_bar(10, 10, 10) == "[==========] 100% 10/10 steps");
  CHECK(progress_bar(20, 10, 4) == "[====] 100% 20/10 steps");
}

TEST_CASE("JSON objects escape strings and turn non-finite numbers into null", "[log]") {
  const std::string json = JsonObject()
                               .add("s", "a\"b\\c\n\x01")
                               .add("x", 1.5)
                               .add("nan", std::nan(""))
                               .add("n", int64_t{-3})
                               .add("b", true)
                               .add("hosts", std::vector<std::string>{"h1", "h2"})
                               .str();
  CHECK(json == R"({"s":"a\"b\\c\n\u0001","x":1.5,"nan":null,"n":-3,"b":true,"hosts":["h1","h2"]})");
}
