#include "test/support/catch.h"

#include <ATen/ATen.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "runtime/comm/local_communicator.h"
#include "runtime/monitor/run_telemetry.h"
#include "runtime/train/batch_plan.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/trainer.h"
#include "runtime/util/error.h"
#include "test/support/params.h"
#include "test/support/temp_dir.h"
#include "test/support/train_run.h"
#include "test/support/tiny_workload.h"

using namespace dtrain;
using Catch::Matchers::Contains;

TEST_CASE("training on one rank lowers the loss and logs every epoch", "[train]") {
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  config.train.epochs = 3;
  config.train.lr_schedule = LrSchedule::kStep;
  config.train.lr_gamma = 0.7;
  config.train.lr_step_epochs = 1;
  auto workload = test::make_tiny_workload();
  const test::TrainRun run = test::train_alone(config, *workload);
  REQUIRE(run.result.epochs.size() == 3);
  CHECK(run.result.epochs[2].train.at("loss") < run.result.epochs[0].train.at("loss"));
  CHECK(run.result.epochs[0].train_samples == 256);
  CHECK(run.result.epochs[0].test_samples == 64);
  CHECK(run.result.epochs[1].lr == Approx(0.05 * 0.7));
  CHECK(std::filesystem::exists(run.result.epochs[2].checkpoint_path));
  // The console shows one Katib metrics line per epoch, with the reduced test accuracy.
  size_t katib_lines = 0;
  for (size_t at = run.console.find("{metricName: accuracy"); at != std::string::npos;
       at = run.console.find("{metricName: accuracy", at + 1)) {
    ++katib_lines;
  }
  CHECK(katib_lines == 3);
  // One run directory with the config and three epoch events between run_start and run_end.
  std::filesystem::path run_dir = *std::filesystem::directory_iterator(config.log.dir);
  CHECK(std::filesystem::exists(run_dir / "config.yaml"));
  std::ifstream events(run_dir / "events.jsonl");
  std::vector<std::string> lines;
  for (std::string line; std::getline(events, line);) lines.push_back(line);
  REQUIRE(lines.size() == 5);
  CHECK_THAT(lines.front(), Contains("\"event\":\"run_start\""));
  CHECK_THAT(lines[1], Contains("\"event\":\"epoch_end\""));
  CHECK_THAT(lines.back(), Contains("\"event\":\"run_end\""));
}

TEST_CASE("training under bf16 autocast lowers the loss", "[train][precision]") {
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  config.train.epochs = 3;
  config.train.precision = Precision::kBf16;
  config.checkpoint.enabled = false;
  auto workload = test::make_tiny_workload();
  const test::TrainRun run = test::train_alone(config, *workload);
  REQUIRE(run.result.epochs.size() == 3);
  CHECK(run.result.epochs[2].train.at("loss") < run.result.epochs[0].train.at("loss"));
  CHECK(std::isfinite(run.result.epochs[2].test.at("loss")));
}

TEST_CASE("resuming after an epoch reproduces the uninterrupted run exactly", "[train][checkpoint]") {
  for (OptimizerKind optimizer : {OptimizerKind::kSgd, OptimizerKind::kAdadelta}) {
    test::TempDir whole_dir;
    test::TempDir split_dir;
    test::TinyOptions tiny;
    tiny.dropout = 0.3;  // dropout: masks must be reproduced too
    auto workload = test::make_tiny_workload(tiny);
    TrainConfig config = test::tiny_config(whole_dir.path());
    config.train.optimizer = optimizer;
    config.train.lr = optimizer == OptimizerKind::kSgd ? 0.05 : 1.0;
    config.train.epochs = 3;
    const test::TrainRun whole = test::train_alone(config, *workload);

    TrainConfig first = test::tiny_config(split_dir.path());
    first.train = config.train;
    first.train.epochs = 1;
    test::train_alone(first, *workload);
    TrainConfig rest = first;
    rest.train.epochs = 3;
    rest.checkpoint.resume = true;
    const test::TrainRun resumed = test::train_alone(rest, *workload);
    REQUIRE(resumed.result.epochs.size() == 2);
    CHECK(resumed.result.epochs[0].epoch == 2);
    CHECK(at::equal(resumed.params, whole.params));
  }
}

TEST_CASE("resuming from a checkpoint inside an epoch continues it as the uninterrupted run did", "[train][checkpoint]") {
  test::TempDir whole_dir;
  test::TempDir split_dir;
  auto workload = test::make_tiny_workload();  // no dropout: the masks after a resume are drawn afresh
  TrainConfig config = test::tiny_config(whole_dir.path());
  config.train.epochs = 2;
  config.checkpoint.every_steps = 3;
  config.checkpoint.keep = 0;
  const test::TrainRun whole = test::train_alone(config, *workload);
  REQUIRE(whole.result.epochs.size() == 2);
  const int64_t steps = whole.result.epochs[1].steps;
  REQUIRE(steps > 6);

  // A failure after the checkpoint at step 6 of epoch 2: only the checkpoints before it survive.
  namespace fs = std::filesystem;
  TrainConfig split = test::tiny_config(split_dir.path());
  split.train = config.train;
  split.checkpoint.every_steps = 3;
  split.checkpoint.keep = 0;
  fs::create_directories(split.checkpoint.dir);
  for (const char* name : {"checkpoint-epoch-000001.safetensors", "checkpoint-epoch-000002-step-00000003.safetensors",
                           "checkpoint-epoch-000002-step-00000006.safetensors"}) {
    REQUIRE(fs::exists(config.checkpoint.dir + "/" + name));
    fs::copy_file(config.checkpoint.dir + "/" + name, split.checkpoint.dir + "/" + name);
  }
  split.checkpoint.resume = true;
  const test::TrainRun resumed = test::train_alone(split, *workload);
  REQUIRE(resumed.result.epochs.size() == 1);
  const EpochStats& epoch = resumed.result.epochs[0];
  CHECK(epoch.epoch == 2);
  CHECK(epoch.first_step == 7);
  CHECK(epoch.steps == steps - 6);  // no step repeated or skipped
  CHECK(epoch.train_samples == whole.result.epochs[1].train_samples);
  CHECK(epoch.train.at("loss") == Approx(whole.result.epochs[1].train.at("loss")).epsilon(1e-12));
  CHECK(at::equal(resumed.params, whole.params));
  CHECK_THAT(resumed.console, Contains("resumed epoch 2 at step 7 from ") && Contains("checkpoint-epoch-000002-step-00000006.safetensors"));
}

TEST_CASE("checkpoint.every_s checkpoints inside epochs when rank 0's clock says so", "[train][checkpoint]") {
  test::TempDir dir;
  auto workload = test::make_tiny_workload();
  TrainConfig config = test::tiny_config(dir.path());
  config.train.epochs = 1;
  config.train.batch_size = 8;  // 32 steps: the clock is read after steps 10, 20 and 30
  config.checkpoint.keep = 0;
  config.checkpoint.every_s = 1e-9;  // always due when read
  test::train_alone(config, *workload);
  namespace fs = std::filesystem;
  for (const char* name : {"checkpoint-epoch-000001-step-00000010.safetensors", "checkpoint-epoch-000001-step-00000020.safetensors",
                           "checkpoint-epoch-000001-step-00000030.safetensors", "checkpoint-epoch-000001.safetensors"}) {
    CHECK(fs::exists(config.checkpoint.dir + "/" + name));
  }
  int64_t files = 0;
  for (const auto& entry : fs::directory_iterator(config.checkpoint.dir)) files += entry.path().extension() == ".safetensors";
  CHECK(files == 4);

  // Never due within the run: only the epoch's own checkpoint.
  test::TempDir slow_dir;
  TrainConfig slow = test::tiny_config(slow_dir.path());
  slow.train = config.train;
  slow.checkpoint.keep = 0;
  slow.checkpoint.every_s = 3600;
  test::train_alone(slow, *workload);
  files = 0;
  for (const auto& entry : fs::directory_iterator(slow.checkpoint.dir)) files += entry.path().extension() == ".safetensors";
  CHECK(files == 1);
}

TEST_CASE("an elastic global batch is split over the ranks, accumulating when it does not fit", "[train]") {
  CHECK(plan_global_batch(96, 3, 64).text() == "global batch 96 = 3 ranks x 32");
  const BatchPlan two = plan_global_batch(96, 2, 32);
  CHECK(two.per_rank == 24);
  CHECK(two.accumulate == 2);
  CHECK(two.text() == "global batch 96 = 2 ranks x 24 x 2 passes");
  CHECK(plan_global_batch(96, 1, 7).per_rank == 6);  // 96 = 16 passes of 6: the largest divisor that fits
  CHECK_THROWS_WITH(plan_global_batch(64, 3, 64), Contains("global batch of 64 samples") &&
                                                      Contains("cannot be split evenly over 3 ranks") &&
                                                      Contains("it divides over 1, 2, 4, 8, 16, 32, 64 ranks"));

  // On one rank, the plan's micro-batches with accumulation train what one batch of the global size does
  // (in float64: the bound is its rounding, test::kReorderBound, whatever the CPU).
  test::TempDir a;
  test::TempDir b;
  test::TinyOptions tiny;
  tiny.float64 = true;
  auto workload = test::make_tiny_workload(tiny);
  TrainConfig whole = test::tiny_config(a.path());
  whole.train.batch_size = 32;
  whole.train.epochs = 1;
  TrainConfig split = test::tiny_config(b.path());
  split.train = whole.train;
  split.train.batch_size = 8;  // at most 8 fit: 4 passes of 8
  split.train.elastic_batch = ElasticBatch::kGlobal;
  split.train.global_batch_size = 32;
  const test::TrainRun one = test::train_alone(whole, *workload);
  const test::TrainRun four = test::train_alone(split, *workload);
  CHECK_THAT(four.console, Contains("elastic batch: global batch 32 = 1 rank x 8 x 4 passes"));
  CHECK(four.result.epochs[0].steps == 4 * one.result.epochs[0].steps);
  CHECK(test::max_relative_difference(four.params, one.params) < test::kReorderBound);
}

TEST_CASE("resume without a checkpoint starts at epoch 1", "[train][checkpoint]") {
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  config.train.epochs = 1;
  config.checkpoint.resume = true;
  auto workload = test::make_tiny_workload();
  CHECK(test::train_alone(config, *workload).result.epochs.at(0).epoch == 1);
}

TEST_CASE("checkpoints are pruned to the newest `keep` and never left half-written", "[checkpoint]") {
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  config.train.epochs = 4;
  config.checkpoint.keep = 2;
  auto workload = test::make_tiny_workload();
  test::train_alone(config, *workload);
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(config.checkpoint.dir)) {
    if (entry.path().extension() == ".safetensors") names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  CHECK((names == std::vector<std::string>{"checkpoint-epoch-000003.safetensors", "checkpoint-epoch-000004.safetensors"}));
  CHECK(*Checkpointer::latest(config.checkpoint.dir) == config.checkpoint.dir + "/checkpoint-epoch-000004.safetensors");
}

TEST_CASE("unusable checkpoints are clear errors", "[checkpoint]") {
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  config.train.epochs = 1;
  auto workload = test::make_tiny_workload();
  test::train_alone(config, *workload);
  config.train.epochs = 2;
  config.checkpoint.resume = true;

  SECTION("another optimizer") {
    config.train.optimizer = OptimizerKind::kAdadelta;
    CHECK_THROWS_WITH(test::train_alone(config, *workload), Contains("holds sgd optimizer state, this run uses adadelta"));
  }
  SECTION("a corrupt file beside a whole one is passed over, and named") {
    std::ofstream(config.checkpoint.dir + "/checkpoint-epoch-000009.safetensors") << "not a checkpoint";
    const test::TrainRun run = test::train_alone(config, *workload);
    CHECK(run.result.epochs.front().epoch == 2);  // from epoch 1's checkpoint; the test of the warning is
                                                  // checkpoint_integrity_test.cpp's
  }
  SECTION("a safetensors file that is no dtrain checkpoint") {
    std::filesystem::remove(config.checkpoint.dir + "/checkpoint-epoch-000001.safetensors");
    // What `safetensors.torch.save_file({"w": torch.zeros(1)})` writes: the layout, no dtrain records.
    const std::string header = R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
    std::string bytes(8, '\0');
    bytes[0] = static_cast<char>(header.size());
    std::ofstream(config.checkpoint.dir + "/checkpoint-epoch-000009.safetensors") << bytes << header << std::string(4, '\0');
    CHECK_THROWS_WITH(test::train_alone(config, *workload),
                      Contains("checkpoint-epoch-000009.safetensors: it is a safetensors file but not a dtrain checkpoint"));
  }
  SECTION("another workload") {
    class Renamed final : public Workload {
     public:
      explicit Renamed(const Workload& inner) : inner_(inner) {}
      std::string name() const override { return "other"; }
      std::string data_format() const override { return inner_.data_format(); }
      std::vector<NamedModule> make_modules(const WorkloadData& data, const TrainConfig& c) const override {
        return inner_.make_modules(data, c);
      }
      WorkloadData load_data(const TrainConfig& c) const override { return inner_.load_data(c); }
      std::unique_ptr<TrainStep> make_step(const TrainConfig& c) const override { return inner_.make_step(c); }

     private:
      const Workload& inner_;
    };
    Renamed other(*workload);
    CHECK_THROWS_WITH(test::train_alone(config, other), Contains("is for workload 'tiny', this run trains 'other'"));
  }
}

TEST_CASE("train.eval_samples evaluates exactly the first samples of the test set", "[train]") {
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  config.train.epochs = 1;
  config.checkpoint.enabled = false;
  test::TinyOptions options;
  options.nan_test_from = 20;  // evaluating any sample from index 20 on gives a NaN loss, which stops the run
  auto workload = test::make_tiny_workload(options);

  config.train.eval_samples = 20;
  const test::TrainRun run = test::train_alone(config, *workload);
  REQUIRE(run.result.epochs.size() == 1);
  CHECK(run.result.epochs[0].test_samples == 20);
  CHECK(std::isfinite(run.result.epochs[0].test.at("loss")));

  config.train.eval_samples = 21;
  CHECK_THAT(test::training_error<NonFiniteError>(config, *workload), Contains("evaluation after the epoch gave a NaN"));

  config.train.eval_samples = 1000;  // more than the test set has: all of it
  options.nan_test_from = -1;
  const test::TrainRun all = test::train_alone(config, *test::make_tiny_workload(options));
  CHECK(all.result.epochs[0].test_samples == 64);
}

namespace {

// Writes down the hooks a run calls, in order, with the step records; adds a figure of its own to the
// run_start and epoch_end records.
class RecordingObserver final : public RunObserver {
 public:
  RecordingObserver(std::string name, std::vector<std::string>& calls) : name_(std::move(name)), calls_(calls) {}
  void run_starting(RunInfo& info) override {
    note("run_starting");
    info.accelerator = "recorded accelerator";
  }
  void run_started() override { note("run_started"); }
  void training_begins(int64_t epoch) override { note("training_begins " + std::to_string(epoch)); }
  void training_ended(int64_t epoch) override { note("training_ended " + std::to_string(epoch)); }
  void before_step(const StepRecord& s) override { note("before " + text(s)); }
  void after_step(const StepRecord& s) override { note("after " + text(s)); }
  void epoch_ending(EpochStats& stats) override {
    note("epoch_ending " + std::to_string(stats.epoch));
    stats.flops_per_sample = 7.0;
  }
  void epoch_ended(const EpochStats& stats) override { note("epoch_ended " + std::to_string(stats.epoch)); }
  void run_ending(RunSummary&) override { note("run_ending"); }

 private:
  static std::string text(const StepRecord& s) {
    return std::to_string(s.epoch) + ":" + std::to_string(s.step) + ":" + std::to_string(s.run_step) + ":" +
           std::to_string(s.samples);
  }
  void note(const std::string& what) { calls_.push_back(name_ + " " + what); }
  std::string name_;
  std::vector<std::string>& calls_;
};

std::vector<std::string> calls_starting_with(const std::vector<std::string>& calls, const std::string& prefix) {
  std::vector<std::string> found;
  for (const std::string& c : calls) {
    if (c.rfind(prefix, 0) == 0) found.push_back(c);
  }
  return found;
}

}  // namespace

TEST_CASE("observers see the run's hooks in order, and their additions reach the run log", "[train][observer]") {
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());  // 2 epochs of 16 steps of 16 samples
  auto workload = test::make_tiny_workload();
  std::vector<std::string> calls;
  RecordingObserver a("a", calls);
  RecordingObserver b("b", calls);
  LocalCommunicator comm;
  const test::TrainRun run = test::train_run(config, *workload, comm,
                                             ReducerOptions{BucketOptions{512, 64}}, c10::Device(c10::kCPU),
                                             [&](Trainer& trainer, RunLogger&) {
                                               trainer.observe(a);
                                               trainer.observe(b);
                                             });
  REQUIRE(calls.size() == 2 * (2 + 2 * (2 + 2 * 16 + 2) + 1));
  const std::vector<std::string> head(calls.begin(), calls.begin() + 10);
  CHECK(head == std::vector<std::string>{"a run_starting", "b run_starting", "a run_started", "b run_started",
                                         "a training_begins 1", "b training_begins 1", "a before 1:1:1:16",
                                         "b before 1:1:1:16", "b after 1:1:1:16", "a after 1:1:1:16"});
  // Steps count from 1 in each epoch and across the run; epoch 2's first step is the run's 17th.
  const std::vector<std::string> befores = calls_starting_with(calls, "a before");
  REQUIRE(befores.size() == 32);
  CHECK(befores[16] == "a before 2:1:17:16");
  CHECK(befores.back() == "a before 2:16:32:16");
  const std::vector<std::string> tail(calls.end() - 8, calls.end());
  CHECK(tail == std::vector<std::string>{"a training_ended 2", "b training_ended 2", "a epoch_ending 2",
                                         "b epoch_ending 2", "a epoch_ended 2", "b epoch_ended 2", "a run_ending",
                                         "b run_ending"});
  CHECK(run.result.epochs[1].flops_per_sample == 7.0);
  std::filesystem::path run_dir = *std::filesystem::directory_iterator(config.log.dir);
  std::ifstream events(run_dir / "events.jsonl");
  std::string first;
  std::getline(events, first);
  CHECK_THAT(first, Contains("\"accelerator\":\"recorded accelerator\""));
  std::string second;
  std::getline(events, second);
  CHECK_THAT(second, Contains("\"flops_per_sample\":7.0"));
}

TEST_CASE("run telemetry counts the step's FLOPs and gives TFLOP/s and MFU against the given peak", "[train][observer]") {
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  config.train.peak_tflops = 1e-6;
  auto workload = test::make_tiny_workload();
  LocalCommunicator comm;
  std::unique_ptr<RunTelemetry> telemetry;
  const test::TrainRun run = test::train_run(config, *workload, comm, ReducerOptions{BucketOptions{512, 64}},
                                             c10::Device(c10::kCPU), [&](Trainer& trainer, RunLogger& logger) {
                                               telemetry = std::make_unique<RunTelemetry>(trainer.train_options(), comm,
                                                                                          logger, c10::Device(c10::kCPU));
                                               trainer.observe(*telemetry);
                                             });
  // Linear 8 -> 16 -> 4: forward 2 x (8 x 16 + 16 x 4) per sample; backward the weight gradients again and
  // the hidden layer's input gradient (the first layer's input needs none).
  const double flops = 2.0 * (8 * 16 + 16 * 4) + 2.0 * (8 * 16 + 16 * 4) + 2.0 * (16 * 4);
  for (const EpochStats& e : run.result.epochs) {
    CHECK(e.flops_per_sample == flops);
    CHECK(e.tflops_achieved == Approx(flops * e.samples_per_s / 1e12));
    REQUIRE(e.mfu.has_value());
    CHECK(*e.mfu == Approx(e.tflops_achieved / 1e-6));
    CHECK(e.busbw_gbps == 0.0);  // one rank moves nothing
  }
}
