// YAML configuration files: nested keys mirror the CLI flags (train.batch_size <-> --batch-size).
#pragma once

#include <string>
#include <vector>

#include "runtime/config/config.h"
#include "runtime/config/config_fields.h"

namespace dtrain {

// Applies every key of the YAML document to `config`, recording `origin` in `sources`.
// Throws ConfigError for unreadable files, syntax errors, unknown keys and bad values.
void apply_yaml_text(const std::string& yaml_text, const std::string& origin, const ConfigSchema& schema,
                     TrainConfig& config, ConfigSources& sources);
void apply_yaml_file(const std::string& path, const ConfigSchema& schema, TrainConfig& config,
                     ConfigSources& sources);

// The effective configuration as a YAML document that apply_yaml_text accepts unchanged: the generic
// keys and those of config.workload.
std::string to_yaml(const TrainConfig& config, const ConfigSchema& schema);

// to_yaml without the keys that may differ between nodes (ConfigField::per_node: log.dir,
// checkpoint.dir): what every rank of a job must agree on before training.
std::string compared_yaml(const TrainConfig& config, const ConfigSchema& schema);

// The keys of `config` whose values differ from schema.defaults(), in the order to_yaml lists them, each
// as "key: value" ("train.lr: 1", "train.lr_milestones: [30, 60]").
std::vector<std::string> config_changes(const TrainConfig& config, const ConfigSchema& schema);

}  // namespace dtrain
