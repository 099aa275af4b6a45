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
  s.train_loss = 0.12344;
  s.test_loss = 0.52118;
  s.test_accuracy = 0.81014;
  s.test_correct = 8101;
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
  ProgressInfo p{1, 1280, 60000, 0.693147};
  CHECK(katib_progress_line(p) == "Train Epoch: 1 [1280/60000 (2%)]\tloss=0.6931");
  CHECK(pytorch_progress_line(p) == "Train Epoch: 1 [1280/60000 (2%)]\tLoss: 0.693147");
}

TEST_CASE("pytorch and summary lines have a fixed field order", "[log]") {
  CHECK(pytorch_test_line(sample_stats()) == "Test set: Average loss: 0.5212, Accuracy: 8101/10000 (81%)");
  CHECK(epoch_summary_line(sample_stats()) ==
        "epoch 3/10 | train_loss 0.1234 | test_loss 0.5212 | test_acc 81.01% | 12.3 s | 48213 samples/s");
}

TEST_CASE("no console line contains the substring 'real'", "[log]") {
  const EpochStats s = sample_stats();
  ProgressInfo p{1, 1280, 60000, 0.5};
  for (const std::string& line : {katib_metrics_line(s, 0), katib_progress_line(p), pytorch_progress_line(p),
                                  pytorch_test_line(s), epoch_summary_line(s), progress_bar(5, 10, 20)}) {
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
