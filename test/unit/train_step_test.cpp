// The train-step seam with a workload of its own step and two modules: each module has its optimizer
// and reducer, metrics carry the workload's names to every output, and checkpoints hold both modules.
#include "test/support/catch.h"

#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "runtime/train/workload.h"
#include "test/support/temp_dir.h"
#include "test/support/tiny_workload.h"
#include "test/support/train_run.h"

using namespace dtrain;
using Catch::Matchers::Contains;

namespace {

// Two classifiers trained side by side on the same batches, one step each: a stand-in for a GAN's two
// modules, each updated by its own optimizer after its own backward.
class TwoHeads final : public Workload {
 public:
  explicit TwoHeads(std::string second = "right") : second_(std::move(second)) {}
  std::string name() const override { return "two-heads"; }
  std::string data_format() const override { return tiny_->data_format(); }
  std::vector<NamedModule> make_modules(const WorkloadData& data, const TrainConfig&) const override {
    return {{"left", tiny_->make_model(data)}, {second_, tiny_->make_model(data)}};
  }
  WorkloadData load_data(const TrainConfig& config) const override { return tiny_->load_data(config); }
  std::unique_ptr<TrainStep> make_step(const TrainConfig&) const override { return std::make_unique<Step>(second_); }

 private:
  class Step final : public TrainStep {
   public:
    explicit Step(std::string second) : second_(std::move(second)) {}
    std::vector<std::string> train_metrics() const override { return {"left_loss", second_ + "_loss"}; }
    std::vector<std::string> eval_metrics() const override { return {"left_accuracy", second_ + "_accuracy"}; }
    void train(const Batch& batch, TrainState& state, MetricSums& metrics) override {
      for (const std::string& name : {std::string("left"), second_}) {
        const at::Tensor loss = at::nll_loss(state.module_as<Model>(name).forward(batch.inputs), batch.targets);
        state.backward(loss, {name});
        state.step(name);
        metrics.add(name + "_loss", loss.detach().to(at::kDouble) * static_cast<double>(batch.size),
                    static_cast<double>(batch.size));
      }
    }
    void evaluate(const Batch& batch, TrainState& state, MetricSums& metrics) override {
      for (const std::string& name : {std::string("left"), second_}) {
        const at::Tensor outputs = state.module_as<Model>(name).forward(batch.inputs);
        metrics.add(name + "_accuracy", outputs.argmax(1).eq(batch.targets).sum(), static_cast<double>(batch.size));
      }
    }

   private:
    std::string second_;
  };

  std::unique_ptr<ClassifierWorkload> tiny_ = test::make_tiny_workload();
  std::string second_;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string events_of(const std::string& log_dir) {
  for (const auto& entry : std::filesystem::directory_iterator(log_dir)) return read_text(entry.path() / "events.jsonl");
  return "";
}

}  // namespace

TEST_CASE("a step of its own trains each of several modules with its optimizer", "[train][seam]") {
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  config.train.epochs = 3;
  config.log.interval = 4;
  TwoHeads workload;
  const test::TrainRun run = test::train_alone(config, workload);
  REQUIRE(run.result.epochs.size() == 3);
  for (const char* loss : {"left_loss", "right_loss"}) {
    CHECK(run.result.epochs[2].train.at(loss) < run.result.epochs[0].train.at(loss));
  }
  CHECK(run.result.epochs[2].test.at("left_accuracy") > 0.4);  // 4 classes: chance is 0.25
  CHECK(run.result.epochs[2].test.at("right_accuracy") > 0.4);
  // The two modules start from different initialisations and stay different.
  CHECK(run.result.epochs[2].train.at("left_loss") != run.result.epochs[2].train.at("right_loss"));

  CHECK_THAT(run.console, Contains("\tleft_loss=") && Contains("\tright_loss="));
  CHECK_THAT(run.console, Contains("INFO     {metricName: left_accuracy, metricValue: ") &&
                              Contains("};{metricName: right_accuracy, metricValue: "));
  CHECK_THAT(run.console, Contains("| train_left_loss ") && Contains("| test_right_accuracy "));
  const std::string events = events_of(config.log.dir);
  CHECK_THAT(events, Contains("\"train_left_loss\":") && Contains("\"test_right_accuracy\":") &&
                         Contains("\"final_test_left_accuracy\":"));
}

TEST_CASE("resuming restores every module and optimizer and reproduces the run", "[train][seam][checkpoint]") {
  test::TempDir whole_dir;
  test::TempDir split_dir;
  TwoHeads workload;
  TrainConfig config = test::tiny_config(whole_dir.path());
  config.train.epochs = 3;
  config.train.optimizer = OptimizerKind::kAdadelta;  // optimizer state that must come back
  config.train.lr = 1.0;
  const test::TrainRun whole = test::train_alone(config, workload);

  TrainConfig first = config;
  first.log.dir = split_dir.path() + "/logs";
  first.checkpoint.dir = split_dir.path() + "/checkpoints";
  first.train.epochs = 1;
  test::train_alone(first, workload);
  TrainConfig rest = first;
  rest.train.epochs = 3;
  rest.checkpoint.resume = true;
  const test::TrainRun resumed = test::train_alone(rest, workload);
  REQUIRE(resumed.result.epochs.front().epoch == 2);
  for (const char* name : {"left", "right"}) {
    INFO(name);
    CHECK(at::equal(resumed.module_params.at(name), whole.module_params.at(name)));
  }

  // A workload whose modules are named otherwise cannot take these checkpoints.
  TwoHeads renamed("other");
  CHECK_THAT(test::training_error<DataError>(rest, renamed),
             Contains("holds a module 'right', which this two-heads run does not train"));
}
