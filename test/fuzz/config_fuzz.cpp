// YAML configuration files, with every built-in workload's keys: applied to the defaults and checked as a
// run checks them. What dtrain accepts must come back unchanged through --print-config's YAML (the file
// a run directory keeps, and that --config reads).
#include <cstdio>
#include <cstdlib>

#include "runtime/config/config_yaml.h"
#include "runtime/config/validate.h"
#include "runtime/util/error.h"
#include "test/fuzz/fuzz_target.h"
#include "workloads/registry.h"

namespace dtrain::fuzz::config_target {
namespace {

const dtrain::ConfigSchema& schema() {
  static const dtrain::ConfigSchema s = [] {
    dtrain::WorkloadRegistry registry;
    dtrain::register_builtin_workloads(registry);
    return dtrain::ConfigSchema(registry.config_fields(), "mnist");
  }();
  return s;
}

void write_seeds(const std::string& dir) {
  write_bytes(dir + "/defaults.yaml", to_yaml(schema().defaults(), schema()));
  write_bytes(dir + "/small.yaml",
              "workload: resnet18\ntrain:\n  epochs: 3\n  lr: 0.1\n  lr_milestones: [1, 2]\n  batch_size: 32\n"
              "checkpoint:\n  every_steps: 10\n  stop_timeout_s: 20\ncomm:\n  backend: mpi\n");
  write_bytes(dir + "/anchors.yaml", "base: &b {epochs: 2}\ntrain: *b\n");
  write_bytes(dir + "/flow.yaml", "{train: {epochs: 1, optimizer: adam}, data: {synthetic: true}}\n");
}

int test_one_input(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  dtrain::TrainConfig config = schema().defaults();
  dtrain::ConfigSources sources;
  try {
    dtrain::apply_yaml_text(text, "input.yaml", schema(), config, sources);
    dtrain::validate_config(config, sources);
  } catch (const dtrain::Error& e) {
    dtrain::fuzz::refused(e);
    return 0;
  }
  const std::string yaml = dtrain::to_yaml(config, schema());
  dtrain::TrainConfig again = schema().defaults();
  dtrain::ConfigSources again_sources;
  try {
    dtrain::apply_yaml_text(yaml, "printed.yaml", schema(), again, again_sources);
  } catch (const dtrain::Error& e) {
    std::fprintf(stderr, "the printed configuration is refused: %s\n%s", e.what(), yaml.c_str());
    std::abort();
  }
  if (dtrain::to_yaml(again, schema()) != yaml) {
    std::fprintf(stderr, "the printed configuration reads back differently:\n%s\n---\n%s", yaml.c_str(),
                 dtrain::to_yaml(again, schema()).c_str());
    std::abort();
  }
  return 0;
}

}  // namespace
}  // namespace dtrain::fuzz::config_target

DTRAIN_FUZZ_TARGET(config, dtrain::fuzz::config_target::write_seeds, dtrain::fuzz::config_target::test_one_input)
