// The command line: flags mirror the YAML keys; a --config file is applied first and flags win.
#pragma once

#include <string>

#include "runtime/config/config.h"
#include "runtime/config/config_fields.h"

namespace dtrain {

struct CommandLine {
  TrainConfig config;
  ConfigSources sources;
  std::string config_path;  // --config, empty if none
  bool show_help = false;
  bool show_version = false;
  bool print_config = false;
  bool list_workloads = false;
  bool remove_memory_copies = false;
};

// Parses argv (YAML file, then flags) for the fields of `schema`. Throws ConfigError for unknown flags,
// stray arguments and bad values. Does not validate cross-field rules: see validate_config.
CommandLine parse_command_line(int argc, const char* const* argv, const ConfigSchema& schema);

// The --help text, a group per section (a workload's options under its name); defaults are the schema's.
std::string help_text(const ConfigSchema& schema);

}  // namespace dtrain
