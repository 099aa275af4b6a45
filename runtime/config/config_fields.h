// The table of configuration keys: one row per YAML key, with its CLI flag, help text, parser and
// formatter. YAML loading, CLI parsing, --help and --print-config are all driven by this table, so a new
// option is one row here plus one member in config.h.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "runtime/config/config.h"

namespace dtrain {

struct ConfigField {
  std::string key;          // YAML path, "train.batch_size"
  std::string flag;         // CLI flag without dashes, "batch-size"
  std::string help;
  std::string value_hint;   // "INT", "FLOAT", "BOOL", "PATH" or "a|b|c"
  bool is_bool = false;
  bool is_list = false;  // a comma-separated list on the command line, a YAML list in files
  // Parses `text` into the config; throws ConfigError naming `origin` (a file or flag) on bad input.
  std::function<void(TrainConfig&, const std::string& text, const std::string& origin)> parse;
  std::function<std::string(const TrainConfig&)> format;
  std::function<void(TrainConfig& to, const TrainConfig& from)> copy;  // this key's value, exactly
};

// All fields, in the order --print-config and the docs list them.
const std::vector<ConfigField>& config_fields();

// The field for a YAML key or nullptr.
const ConfigField* find_config_field(const std::string& key);

// `base` (the generic defaults with a workload's recipe applied) with every key of `sources` (the keys a
// file or flag set) taken from `user`, so that files and flags override the workload's defaults.
TrainConfig overlay_keys(TrainConfig base, const TrainConfig& user, const ConfigSources& sources);

}  // namespace dtrain
