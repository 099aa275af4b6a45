#include "test/support/catch.h"

#include <filesystem>
#include <fstream>
#include <vector>

#include "runtime/config/config_cli.h"
#include "runtime/config/config_fields.h"
#include "runtime/config/config_yaml.h"
#include "runtime/config/validate.h"
#include "runtime/util/error.h"
#include "test/support/error_message.h"
#include "test/support/temp_dir.h"

using namespace dtrain;
using Catch::Matchers::Contains;

namespace {

// The generic options only, with main's default workload; the workloads' own are tested with the registry
// (registry_test.cpp).
const ConfigSchema& schema() {
  static const ConfigSchema generic({}, "mnist");
  return generic;
}

CommandLine parse(std::vector<std::string> args) {
  args.insert(args.begin(), "dtrain");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return parse_command_line(static_cast<int>(argv.size()), argv.data(), schema());
}

TrainConfig from_yaml(const std::string& text) {
  TrainConfig config = schema().defaults();
  ConfigSources sources;
  apply_yaml_text(text, "run.yaml", schema(), config, sources);
  return config;
}

std::string error_of(const std::function<void()>& body) { return test::error_message<ConfigError>(body); }

// Two workloads' options structs; the third names the first one's section.
struct WarmupOptions {
  static constexpr const char* kSection = "warmup";
  int64_t images = 8;
};
struct CooldownOptions {
  static constexpr const char* kSection = "cooldown";
  int64_t images = 4;
};
struct ClashingOptions {
  static constexpr const char* kSection = "warmup";
  int64_t images = 2;
};

}  // namespace

TEST_CASE("a workload's options section is named by its struct alone, and two structs cannot share one",
          "[config]") {
  WorkloadOptions options;
  CHECK(options.get<WarmupOptions>().images == 8);  // never set: the struct's defaults
  options.edit<WarmupOptions>().images = 16;
  options.edit<CooldownOptions>().images = 1;
  CHECK(options.get<WarmupOptions>().images == 16);
  CHECK(options.get<CooldownOptions>().images == 1);
  CHECK_THROWS_WITH(options.get<ClashingOptions>(), Contains("two options structs name the section 'warmup'"));
  CHECK_THROWS_WITH(options.edit<ClashingOptions>(), Contains("two options structs name the section 'warmup'"));
}

TEST_CASE("the generic defaults train the schema's default workload with Katib lines, and nothing is set by the user",
          "[config]") {
  const CommandLine cmd = parse({});
  CHECK(cmd.config.workload == "mnist");
  CHECK(config_changes(cmd.config, schema()).empty());
  CHECK_THAT(help_text(schema()), Contains("(default: mnist)"));
  CHECK(cmd.config.train.batch_size == 64);
  CHECK(cmd.config.train.optimizer == OptimizerKind::kSgd);
  CHECK(cmd.config.train.lr_schedule == LrSchedule::kConstant);
  CHECK(cmd.config.log.format == LogFormat::kKatib);
  CHECK(cmd.sources.empty());
}

TEST_CASE("overlay_keys takes exactly the keys the file and flags set", "[config]") {
  CommandLine cmd = parse({"--lr", "0.123456789012345678", "--lr-milestones", "5,9"});
  TrainConfig base;
  base.train.lr = 7.0;
  base.train.epochs = 11;
  const TrainConfig merged = overlay_keys(base, cmd.config, cmd.sources, schema());
  CHECK(merged.train.lr == cmd.config.train.lr);  // exact, not through text
  CHECK(merged.train.lr_milestones == std::vector<int64_t>{5, 9});
  CHECK(merged.train.epochs == 11);
}

TEST_CASE("list keys take commas on the command line and YAML lists in files", "[config]") {
  CHECK(parse({"--lr-milestones", "30, 60,80"}).config.train.lr_milestones == std::vector<int64_t>{30, 60, 80});
  CHECK(from_yaml("train:\n  lr_milestones: [3, 6]\n").train.lr_milestones == std::vector<int64_t>{3, 6});
  CHECK(from_yaml("train:\n  lr_milestones: 4,8\n").train.lr_milestones == std::vector<int64_t>{4, 8});
  TrainConfig config = schema().defaults();
  config.train.lr_milestones = {10, 20};
  CHECK_THAT(to_yaml(config, schema()), Contains("lr_milestones: [10, 20]"));
  CHECK(from_yaml(to_yaml(config, schema())).train.lr_milestones == std::vector<int64_t>{10, 20});
  for (const char* bad : {"60,30", "30,", "a,b", "0", "5,5", ",5"}) {
    CHECK_THAT(error_of([&] { parse({"--lr-milestones", bad}); }),
               Contains(std::string("--lr-milestones (train.lr_milestones) must be a comma-separated list of "
                                    "increasing integers >= 1, such as 30,60,80, got '") + bad + "'"));
  }
  CHECK_THAT(error_of([] { from_yaml("train:\n  lr_milestones: [[1]]\n"); }),
             Contains("train.lr_milestones must be a list of single values, got a list in it"));
}

TEST_CASE("CLI flags mirror YAML keys and override the config file", "[config]") {
  test::TempDir dir;
  std::ofstream(dir.file("run.yaml")) << "workload: mnist\ntrain:\n  batch_size: 32\n  lr: 0.5\n"
                                         "comm:\n  bucket_mb: 4\nlog:\n  format: pytorch\n";
  const CommandLine cmd = parse({"--config", dir.file("run.yaml"), "--batch-size", "128", "--synthetic"});
  CHECK(cmd.config.train.batch_size == 128);
  CHECK(cmd.config.train.lr == 0.5);
  CHECK(cmd.config.comm.bucket_mb == 4.0);
  CHECK(cmd.config.log.format == LogFormat::kPytorch);
  CHECK(cmd.config.data.synthetic);
  CHECK(cmd.sources.at("train.batch_size") == "--batch-size");
  CHECK(cmd.sources.at("train.lr") == dir.file("run.yaml"));
}

TEST_CASE("every config key has a CLI flag and survives a YAML round trip", "[config]") {
  TrainConfig changed = schema().defaults();
  changed.train.epochs = 7;
  changed.train.optimizer = OptimizerKind::kAdamW;
  changed.train.lr_schedule = LrSchedule::kMultiStep;
  changed.train.lr_milestones = {2, 4};
  changed.train.nesterov = true;
  changed.data.dir = "/data/x";
  changed.comm.bucket_mb = 2.5;
  changed.checkpoint.resume = true;
  const TrainConfig back = from_yaml(to_yaml(changed, schema()));
  CHECK(to_yaml(back, schema()) == to_yaml(changed, schema()));
  for (const ConfigField& field : schema().fields()) {
    CHECK(field.format(back) == field.format(changed));
    const std::string flag = field.flag;
    CHECK(flag.find('_') == std::string::npos);  // kebab-case
  }
}

TEST_CASE("boolean flags work bare and with =false", "[config]") {
  CHECK(parse({"--synthetic"}).config.data.synthetic);
  CHECK_FALSE(parse({"--synthetic=false"}).config.data.synthetic);
  CHECK_FALSE(parse({"--checkpoint=false"}).config.checkpoint.enabled);
}

TEST_CASE("config errors name the key, the bad value and what was expected", "[config]") {
  CHECK_THAT(error_of([] { from_yaml("train:\n  batch_size: -4\n"); }),
             Contains("run.yaml: train.batch_size must be an integer in [1, 1073741824], got '-4'"));
  CHECK_THAT(error_of([] { parse({"--batch-size", "0"}); }),
             Contains("--batch-size (train.batch_size) must be an integer in [1, 1073741824], got '0'"));
  CHECK_THAT(error_of([] { parse({"--epochs", "two"}); }), Contains("--epochs (train.epochs) must be an integer in [1, 1073741824], got 'two'"));
  CHECK_THAT(error_of([] { parse({"--epochs", "3.5"}); }), Contains("got '3.5'"));
  CHECK_THAT(error_of([] { parse({"--lr", "0"}); }), Contains("--lr (train.lr) must be a number > 0, got '0'"));
  CHECK_THAT(error_of([] { parse({"--lr", "nan"}); }), Contains("got 'nan'"));
  CHECK_THAT(error_of([] { parse({"--lr-gamma", "1.5"}); }), Contains("<= 1"));
  CHECK_THAT(error_of([] { parse({"--accumulate", "5000"}); }), Contains("an integer in [1, 1024]"));
  CHECK_THAT(error_of([] { parse({"--optimizer", "adamx"}); }),
             Contains("--optimizer (train.optimizer) must be one of adadelta|sgd|adam|adamw, got 'adamx'"));
  CHECK_THAT(error_of([] { parse({"--log-format", "json"}); }), Contains("one of katib|pytorch"));
  CHECK_THAT(error_of([] { parse({"--backend", "ucc"}); }), Contains("one of auto|mpi|nccl|gloo, got 'ucc'"));
  CHECK_THAT(error_of([] { parse({"--synthetic=maybe"}); }), Contains("must be true or false, got 'maybe'"));
  CHECK_THAT(error_of([] { parse({"--workload="}); }), Contains("--workload (workload) must be a non-empty string, got ''"));
}

TEST_CASE("unknown keys, flags and stray arguments are rejected", "[config]") {
  CHECK_THAT(error_of([] { from_yaml("train:\n  bach_size: 3\n"); }),
             Contains("run.yaml: unknown key 'train.bach_size'; known keys in 'train': train.epochs"));
  CHECK_THAT(error_of([] { from_yaml("trian:\n  epochs: 3\n"); }), Contains("unknown key 'trian'"));
  CHECK_THAT(error_of([] { from_yaml("train: 3\n"); }), Contains("unknown key 'train'"));
  CHECK_THAT(error_of([] { from_yaml("train:\n  epochs: [1, 2]\n"); }),
             Contains("train.epochs must be a single value (INT), got a list"));
  CHECK_THAT(error_of([] { from_yaml("train:\n  epochs:\n"); }), Contains("got a null"));
  CHECK_THAT(error_of([] { from_yaml("- a\n- b\n"); }), Contains("expected a mapping"));
  CHECK_THAT(error_of([] { from_yaml("train: {epochs: 3\n"); }), Contains("run.yaml: not valid YAML"));
  CHECK_THAT(error_of([] { parse({"--bogus", "1"}); }), Contains("bogus"));
  CHECK_THAT(error_of([] { parse({"extra"}); }), Contains("unexpected argument 'extra'"));
  CHECK_THAT(error_of([] { parse({"--config", "/nonexistent/run.yaml"}); }),
             Contains("cannot read config file '/nonexistent/run.yaml'"));
  CHECK(from_yaml("").train.epochs == TrainConfig{}.train.epochs);
}

TEST_CASE("counts are bounded so that products with the world size cannot overflow", "[config]") {
  CHECK_THAT(error_of([] { parse({"--batch-size", "9223372036854775807"}); }),
             Contains("--batch-size (train.batch_size) must be an integer in [1, 1073741824], got '9223372036854775807'"));
  CHECK_THAT(error_of([] { parse({"--batch-size", "99999999999999999999"}); }), Contains("got '99999999999999999999'"));
  CHECK_THAT(error_of([] { parse({"--epochs", "1073741825"}); }), Contains("an integer in [1, 1073741824]"));
  CHECK_THAT(error_of([] { parse({"--comm-timeout-s", "1e300"}); }), Contains("<= 1000000"));
  CHECK(parse({"--batch-size", "1073741824"}).config.train.batch_size == 1073741824);
}

TEST_CASE("the non-finite policy is stop by default, skip-step on request", "[config]") {
  CHECK(parse({}).config.train.on_nonfinite == NonFinitePolicy::kStop);
  CHECK(parse({"--on-nonfinite", "skip-step"}).config.train.on_nonfinite == NonFinitePolicy::kSkipStep);
  CHECK(from_yaml("train:\n  on_nonfinite: skip-step\n").train.on_nonfinite == NonFinitePolicy::kSkipStep);
  CHECK_THAT(error_of([] { parse({"--on-nonfinite", "ignore"}); }), Contains("one of stop|skip-step, got 'ignore'"));
}

TEST_CASE("malformed YAML structure is a plain sentence, not a parser type error", "[config]") {
  CHECK_THAT(error_of([] { from_yaml("? [a, b]\n: 1\n"); }),
             Contains("run.yaml: a list is used as a key; keys are plain names"));
  CHECK_THAT(error_of([] { from_yaml("train:\n  ? {x: 1}\n  : 2\n"); }), Contains("a mapping is used as a key in 'train'"));
  CHECK_THAT(error_of([] { from_yaml("train:\n  epochs: 2\n  epochs: 3\n"); }),
             Contains("run.yaml: train.epochs is set twice"));
  CHECK_THAT(error_of([] { from_yaml("42\n"); }), Contains("expected a mapping of keys at the top level"));
  test::TempDir dir;
  CHECK_THAT(error_of([&] { parse({"--config", dir.path()}); }),
             Contains("--config '" + dir.path() + "' is a directory; expected a YAML file"));
}

TEST_CASE("output directories are checked at start-up without creating them", "[config]") {
  test::TempDir dir;
  auto validate = [](std::vector<std::string> args) {
    const CommandLine cmd = parse(std::move(args));
    validate_output_dirs(cmd.config, cmd.sources);
  };
  std::ofstream(dir.file("plain-file")) << "x";
  CHECK_THAT(error_of([&] { validate({"--checkpoint-dir", dir.file("plain-file"), "--log-dir", dir.file("logs")}); }),
             Contains("checkpoint.dir (from --checkpoint-dir) '" + dir.file("plain-file") + "' exists but is not a directory"));
  CHECK_THAT(error_of([&] { validate({"--log-dir", dir.file("plain-file") + "/sub"}); }),
             Contains("cannot create log.dir (from --log-dir) '" + dir.file("plain-file") + "/sub'"));
  // Checkpoints off: their directory does not matter.
  CHECK(error_of([&] { validate({"--checkpoint-dir", dir.file("plain-file"), "--checkpoint=false", "--log-dir",
                                 dir.file("a/b")}); }) == "no error");
  CHECK_FALSE(std::filesystem::exists(dir.file("a")));
}

TEST_CASE("cross-field rules name both keys and their sources", "[config]") {
  auto validate = [](std::vector<std::string> args) {
    const CommandLine cmd = parse(std::move(args));
    validate_config(cmd.config, cmd.sources);
  };
  CHECK_THAT(error_of([&] { validate({"--synthetic", "--data-dir", "/d"}); }),
             Contains("data.synthetic (from --synthetic) and data.dir (from --data-dir) are both set"));
  CHECK_THAT(error_of([&] { validate({"--bucket-mb", "1", "--first-bucket-mb", "2"}); }),
             Contains("comm.first_bucket_mb (from --first-bucket-mb) must not exceed comm.bucket_mb"));
  CHECK_THAT(error_of([&] { validate({"--resume", "--checkpoint=false"}); }), Contains("checkpoint.resume"));
  CHECK_THAT(error_of([&] { validate({"--lr-schedule", "multistep"}); }),
             Contains("train.lr_schedule (from --lr-schedule) 'multistep' needs the epochs to decay at in "
                      "train.lr_milestones"));
  CHECK_THAT(error_of([&] { validate({"--lr-schedule", "cosine", "--lr", "0.1", "--lr-min", "0.2"}); }),
             Contains("train.lr_min (from --lr-min) must not exceed train.lr (from --lr)"));
  CHECK_THAT(error_of([&] { validate({"--nesterov", "--momentum", "0"}); }),
             Contains("train.nesterov (from --nesterov) needs a momentum, but train.momentum (from --momentum) is 0"));
  CHECK_THAT(error_of([&] { validate({"--checkpoint-every-steps", "50", "--checkpoint=false"}); }),
             Contains("checkpoint.every_steps (from --checkpoint-every-steps) asks for checkpoints inside epochs, but "
                      "checkpoint.enabled (from --checkpoint) is false"));
  CHECK_THAT(error_of([&] { validate({"--checkpoint-every-s", "600", "--checkpoint=false"}); }),
             Contains("checkpoint.every_s (from --checkpoint-every-s) asks for checkpoints inside epochs"));
  CHECK_THAT(error_of([&] { validate({"--global-batch-size", "256", "--elastic-batch", "per-rank"}); }),
             Contains("train.global_batch_size (from --global-batch-size) holds the global batch, but "
                      "train.elastic_batch (from --elastic-batch) is 'per-rank'"));
  CHECK(error_of([&] { validate({"--global-batch-size", "256", "--elastic-batch", "global"}); }) == "no error");
  CHECK(error_of([&] { validate({"--synthetic"}); }) == "no error");
}

TEST_CASE("help text lists every flag with its default and YAML key", "[config]") {
  const std::string help = help_text(schema());
  for (const ConfigField& field : schema().fields()) {
    CHECK_THAT(help, Contains("--" + field.flag));
    CHECK_THAT(help, Contains("[" + field.key + "]"));
  }
  CHECK_THAT(help, Contains("EACH rank"));
  CHECK_THAT(help, Contains("(default: 64)"));
}

TEST_CASE("the ranks compare every key but the node-local paths only rank 0 uses", "[config]") {
  TrainConfig config = schema().defaults();
  config.log.dir = "/scratch/node7/logs";
  config.checkpoint.dir = "/scratch/node7/ck";
  config.train.lr = 0.25;
  const std::string full = to_yaml(config, schema());
  const std::string compared = compared_yaml(config, schema());
  CHECK_THAT(full, Contains("/scratch/node7/logs") && Contains("/scratch/node7/ck"));
  CHECK_THAT(compared, !Contains("/scratch/node7") && Contains("lr: 0.25") && Contains("run_name:"));
  std::vector<std::string> per_node;
  for (const ConfigField& field : schema().fields()) {
    if (field.per_node) per_node.push_back(field.key);
  }
  CHECK(per_node == std::vector<std::string>{"log.dir", "checkpoint.dir", "checkpoint.memory_dir"});
}

TEST_CASE("train.deterministic refuses what it cannot make exact, naming the key", "[config][deterministic]") {
  auto validate = [](std::vector<std::string> args, DeviceKind device = DeviceKind::kCpu) {
    args.insert(args.begin(), "--deterministic");
    const CommandLine cmd = parse(std::move(args));
    validate_config(cmd.config, cmd.sources);
    validate_for_device(cmd.config, device, cmd.sources);
  };
  CHECK(error_of([&] { validate({"--shards", "16", "--global-batch-size", "64"}); }) == "no error");
  CHECK_THAT(error_of([&] { validate({"--shards", "6"}); }),
             Contains("train.shards (from --shards) must be a power of two (1, 2, 4, 8, ...) for train.deterministic "
                      "(from --deterministic): the shards' gradients are summed in a binary tree, got 6"));
  CHECK_THAT(error_of([&] { validate({"--elastic-batch", "per-rank"}); }),
             Contains("holds the global batch at every world size, but train.elastic_batch (from --elastic-batch) is "
                      "'per-rank'"));
  CHECK_THAT(error_of([&] { validate({"--sync-batchnorm"}); }), Contains("train.sync_batchnorm (from --sync-batchnorm)"));
  CHECK_THAT(error_of([&] { validate({"--precision", "bf16"}); }), Contains("train.precision (from --precision) is 'bf16'"));
  CHECK_THAT(error_of([&] { validate({"--threads", "4"}); }),
             Contains("runs one intra-op thread per rank (a kernel's sums must not depend on the cores), but "
                      "train.threads (from --threads) is 4"));
  CHECK(error_of([&] { validate({"--threads", "1"}); }) == "no error");
  CHECK_THAT(error_of([&] { validate({"--compress", "bf16"}); }), Contains("comm.compress (from --compress) is 'bf16'"));
  CHECK_THAT(error_of([&] { validate({"--skip-bad-images"}); }), Contains("data.skip_bad_images (from --skip-bad-images)"));
  CHECK_THAT(error_of([&] { validate({}, DeviceKind::kCuda); }),
             Contains("train.deterministic (from --deterministic) runs on the CPU"));
}
