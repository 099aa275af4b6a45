// The command line: flags mirror the YAML keys; a --config file is applied first and flags win.
#pragma once

#include <string>

#include "runtime/config/config.h"

namespace dtrain {

struct CommandLine {
  TrainConfig config;
  ConfigSources sources;
  std::string config_path;  // --config, empty if none
  bool show_help = false;
  bool show_version = false;
  bool print_config = false;
  bool list_workloads = false;
};

// Parses argv (YAML file, then flags). Throws ConfigError for unknown flags, stray arguments and bad
// values. Does not validate cross-field rules: see validate_config.
CommandLine parse_command_line(int argc, const char* const* argv);

// The --help text; defaults are read from TrainConfig{}.
std::string help_text();

}  // namespace dtrain
