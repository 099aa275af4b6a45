#include "test/support/catch.h"

#include <algorithm>

#include "runtime/config/config_cli.h"
#include "runtime/util/error.h"
#include "workloads/registry.h"

using namespace dtrain;

TEST_CASE("the builtin registry creates mnist and lists it", "[registry]") {
  WorkloadRegistry registry;
  register_builtin_workloads(registry);
  CHECK(registry.contains("mnist"));
  CHECK(registry.create("mnist")->name() == "mnist");
  CHECK(registry.names() == std::vector<std::string>{"alexnet", "biggan", "cifar10", "gcn", "image-classifier", "mnist", "resnet18", "resnet50"});
}

TEST_CASE("an unknown workload lists the available ones", "[registry]") {
  WorkloadRegistry registry;
  register_builtin_workloads(registry);
  CHECK_THROWS_WITH(registry.create("mnsit"),
                    "unknown workload 'mnsit'; available: alexnet, biggan, cifar10, gcn, image-classifier, mnist, resnet18, resnet50");
  CHECK_THROWS_AS(registry.create("mnsit"), ConfigError);
}

TEST_CASE("registering a name twice is an error", "[registry]") {
  WorkloadRegistry registry;
  register_builtin_workloads(registry);
  CHECK_THROWS_WITH(registry.add("mnist", "again", [] { return std::unique_ptr<Workload>(); }),
                    "workload 'mnist' is registered twice");
}

TEST_CASE("a workload's recipe sits between the generic defaults and the user's keys", "[registry][config]") {
  WorkloadRegistry registry;
  register_builtin_workloads(registry);
  const std::unique_ptr<Workload> mnist = registry.create("mnist");
  const char* argv[] = {"dtrain", "--lr", "0.5", "--epochs", "3"};
  CommandLine cmd = parse_command_line(5, argv);
  const TrainConfig config = configure_workload(*mnist, cmd.config, cmd.sources);
  // The pytorch/examples MNIST recipe, except what the flags set.
  CHECK(config.train.optimizer == OptimizerKind::kAdadelta);
  CHECK(config.train.lr_schedule == LrSchedule::kStep);
  CHECK(config.train.lr_gamma == 0.7);
  CHECK(config.train.lr_step_epochs == 1);
  CHECK(config.train.batch_size == 64);
  CHECK(config.train.lr == 0.5);
  CHECK(config.train.epochs == 3);
  CHECK(cmd.sources.at("train.lr") == "--lr");
  CHECK(cmd.sources.at("train.optimizer") == "the mnist workload's defaults");
  const auto recipe = workload_recipe(*mnist);
  CHECK(std::find(recipe.begin(), recipe.end(), std::make_pair(std::string("train.optimizer"), std::string("adadelta"))) !=
        recipe.end());
}
