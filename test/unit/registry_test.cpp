#include "test/support/catch.h"

#include <algorithm>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "runtime/config/config_cli.h"
#include "runtime/config/config_yaml.h"
#include "runtime/util/error.h"
#include "runtime/util/strings.h"
#include "workloads/biggan/biggan_workload.h"
#include "workloads/gcn/gcn_workload.h"
#include "test/support/tiny_workload.h"
#include "workloads/registry.h"

using namespace dtrain;

namespace {

// The workloads docs/workloads.md's table lists: the backquoted names of its first column.
std::vector<std::string> documented_workloads() {
  std::ifstream in(std::string(DTRAIN_DOCS_DIR) + "/workloads.md");
  REQUIRE(in);
  std::vector<std::string> names;
  const std::regex row(R"(^\| (`[^|]+`) \|)");
  const std::regex name("`([^`]+)`");
  for (std::string line; std::getline(in, line);) {
    std::smatch cells;
    if (!std::regex_search(line, cells, row)) continue;
    const std::string first = cells[1];
    for (auto it = std::sregex_iterator(first.begin(), first.end(), name); it != std::sregex_iterator(); ++it) {
      names.push_back((*it)[1]);
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("every builtin workload is documented and is created under the name it is registered as", "[registry]") {
  WorkloadRegistry registry;
  register_builtin_workloads(registry);
  const std::vector<std::string> documented = documented_workloads();
  CHECK(documented.size() >= 8);
  CHECK(registry.names() == documented);  // a new workload is registered and documented, nothing else
  for (const std::string& name : registry.names()) {
    INFO(name);
    CHECK(registry.create(name)->name() == name);
  }
}

TEST_CASE("a workload whose name is not its registry key is refused when it is created", "[registry]") {
  WorkloadRegistry registry;
  registry.add("other", "", [] { return test::make_tiny_workload(); });
  CHECK_THROWS_WITH(registry.create("other"),
                    "workload 'other' is registered, but its factory makes one named 'tiny' (Workload::name() must be "
                    "the registered name)");
}

TEST_CASE("an unknown workload lists the available ones", "[registry]") {
  WorkloadRegistry registry;
  register_builtin_workloads(registry);
  CHECK_THROWS_WITH(registry.create("mnsit"), "unknown workload 'mnsit'; available: " + join(registry.names()));
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
  const ConfigSchema schema(registry.config_fields(), "mnist");
  const char* argv[] = {"dtrain", "--lr", "0.5", "--epochs", "3"};
  CommandLine cmd = parse_command_line(5, argv, schema);
  const TrainConfig config = configure_workload(*mnist, cmd.config, cmd.sources, schema);
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
  const auto recipe = workload_recipe(*mnist, schema);
  CHECK(std::find(recipe.begin(), recipe.end(), std::make_pair(std::string("train.optimizer"), std::string("adadelta"))) !=
        recipe.end());
}

namespace {

struct Parsed {
  TrainConfig config;
  ConfigSources sources;
};

// argv as main() reads it: the flags, then the workload's recipe beneath them.
Parsed configure(const WorkloadRegistry& registry, const ConfigSchema& schema, std::vector<std::string> args) {
  args.insert(args.begin(), "dtrain");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  CommandLine cmd = parse_command_line(static_cast<int>(argv.size()), argv.data(), schema);
  const std::unique_ptr<Workload> workload = registry.create(cmd.config.workload);
  Parsed parsed{configure_workload(*workload, cmd.config, cmd.sources, schema), cmd.sources};
  return parsed;
}

}  // namespace

TEST_CASE("a workload's own options: flags, YAML, recipe, help and print-config under its name", "[registry][config]") {
  WorkloadRegistry registry;
  register_builtin_workloads(registry);
  const ConfigSchema schema(registry.config_fields(), "mnist");
  REQUIRE(schema.find("biggan.d_steps") != nullptr);
  CHECK(schema.find("biggan.d_steps")->workload == "biggan");
  CHECK(schema.find("gcn.test_nodes")->workload == "gcn");
  CHECK(schema.find("train.lr")->workload.empty());

  // The recipe's values, then the flag's.
  Parsed gan = configure(registry, schema, {"--workload", "biggan", "--ema-start", "7"});
  const auto& options = gan.config.workload_options.get<BigGanTrainOptions>();
  CHECK(options.d_steps == 4);
  CHECK(options.ema_decay == 0.9999);
  CHECK(options.ema_start == 7);
  CHECK(gan.sources.at("biggan.d_steps") == "the biggan workload's defaults");
  CHECK(gan.sources.at("biggan.ema_start") == "--ema-start");

  // YAML under the workload's key, read back from what --print-config writes.
  const std::string yaml = to_yaml(gan.config, schema);
  CHECK_THAT(yaml, Catch::Matchers::Contains("biggan:\n  d_steps: 4\n  ema_decay: 0.9999\n  ema_start: 7"));
  CHECK_THAT(yaml, !Catch::Matchers::Contains("gcn:"));
  TrainConfig back;
  ConfigSources sources;
  apply_yaml_text("workload: biggan\nbiggan: {d_steps: 2, sample_every: 5}", "run.yaml", schema, back, sources);
  CHECK(back.workload_options.get<BigGanTrainOptions>().d_steps == 2);
  CHECK(back.workload_options.get<BigGanTrainOptions>().sample_every == 5);
  CHECK(sources.at("biggan.sample_every") == "run.yaml");
  CHECK_THROWS_WITH(apply_yaml_text("biggan: {d_steps: 0}", "run.yaml", schema, back, sources),
                    "run.yaml: biggan.d_steps must be an integer in [1, 1024], got '0'");

  // --help groups them under the workload's name.
  const std::string help = help_text(schema);
  CHECK_THAT(help, Catch::Matchers::Contains(" biggan options:"));
  CHECK_THAT(help, Catch::Matchers::Contains("--d-steps INT"));
  CHECK_THAT(help, Catch::Matchers::Contains("[biggan.d_steps] (default: 1)"));
  CHECK_THAT(help, Catch::Matchers::Contains(" gcn options:") && Catch::Matchers::Contains("--train-per-class INT"));

  // A mnist run has none of them: its configuration does not show them, and setting one is an error.
  const Parsed mnist = configure(registry, schema, {"--epochs", "2"});
  CHECK_THAT(to_yaml(mnist.config, schema), !Catch::Matchers::Contains("biggan"));
  CHECK_THROWS_WITH(configure(registry, schema, {"--sample-every", "1"}),
                    "--sample-every (biggan.sample_every) is an option of the biggan workload; this run trains mnist");
  CHECK_THROWS_AS(configure(registry, schema, {"--val-nodes", "1"}), ConfigError);
}

TEST_CASE("workload options must sit under their workload's name and not reuse a key or flag", "[registry][config]") {
  WorkloadRegistry registry;
  auto field = [](const std::string& key, const std::string& flag) {
    return int_field(key, flag, "test", [](TrainConfig& c) -> int64_t& { return c.train.epochs; }, 0);
  };
  registry.add("one", "", [] { return std::unique_ptr<Workload>(); }, {field("two.steps", "steps")});
  CHECK_THROWS_WITH(ConfigSchema(registry.config_fields()),
                    "configuration key 'two.steps' must be under its workload's name ('one.')");
  WorkloadRegistry clash;
  clash.add("one", "", [] { return std::unique_ptr<Workload>(); }, {field("one.steps", "epochs")});
  CHECK_THROWS_WITH(ConfigSchema(clash.config_fields()),
                    "configuration keys 'train.epochs' and 'one.steps' share the flag --epochs");
}
