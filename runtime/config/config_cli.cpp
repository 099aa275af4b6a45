#include "runtime/config/config_cli.h"

#include <cxxopts.hpp>

#include <vector>

#include "runtime/config/config_fields.h"
#include "runtime/config/config_yaml.h"
#include "runtime/util/error.h"

namespace dtrain {
namespace {

cxxopts::Options make_options(const ConfigSchema& schema) {
  cxxopts::Options options("dtrain",
                           "Data-parallel training across MPI ranks: mpirun -np N dtrain --workload NAME\n\n"
                           "The defaults shown are the generic ones; each workload's recipe replaces some of them\n"
                           "(see --list-workloads, or --print-config for a run's values), and a --config file and\n"
                           "flags override both.");
  options.custom_help("[options]");
  options.add_options("general")
      ("config", "YAML file with any of the keys below; flags given here override it",
       cxxopts::value<std::string>(), "PATH")
      ("print-config", "print the effective configuration as YAML and exit")
      ("list-workloads", "list the registered workloads and exit")
      ("remove-memory-copies", "remove this user's checkpoint copies in checkpoint.memory_dir on this node that "
                               "no running dtrain holds and whose state is on disk too, and exit (the end of a batch "
                               "job; docs/failures.md)")
      ("version", "print the dtrain version and exit")
      ("h,help", "show this help");
  const TrainConfig& defaults = schema.defaults();
  for (const ConfigField& field : schema.fields()) {
    std::string help = field.help + " [" + field.key + "]";
    const std::string default_text = field.format(defaults);
    help += " (default: " + (default_text.empty() ? std::string("none") : default_text) + ")";
    auto value = cxxopts::value<std::string>();
    if (field.is_bool) value->implicit_value("true");
    const auto dot = field.key.find('.');
    const std::string group = dot == std::string::npos ? "general" : field.key.substr(0, dot);
    options.add_options(group)(field.flag, help, value, field.value_hint);
  }
  return options;
}

}  // namespace

CommandLine parse_command_line(int argc, const char* const* argv, const ConfigSchema& schema) {
  cxxopts::Options options = make_options(schema);
  CommandLine cmd;
  cmd.config = schema.defaults();
  cxxopts::ParseResult parsed;
  try {
    parsed = options.parse(argc, argv);
  } catch (const std::exception& e) {
    throw ConfigError(std::string(e.what()) + "; see dtrain --help");
  }
  if (!parsed.unmatched().empty()) {
    throw ConfigError("unexpected argument '" + parsed.unmatched().front() +
                      "'; dtrain takes only --flags (see dtrain --help)");
  }
  cmd.show_help = parsed.count("help") > 0;
  cmd.show_version = parsed.count("version") > 0;
  cmd.print_config = parsed.count("print-config") > 0;
  cmd.list_workloads = parsed.count("list-workloads") > 0;
  cmd.remove_memory_copies = parsed.count("remove-memory-copies") > 0;
  if (parsed.count("config")) {
    cmd.config_path = parsed["config"].as<std::string>();
    apply_yaml_file(cmd.config_path, schema, cmd.config, cmd.sources);
  }
  for (const ConfigField& field : schema.fields()) {
    if (parsed.count(field.flag) == 0) continue;
    const std::string origin = "--" + field.flag;
    field.parse(cmd.config, parsed[field.flag].as<std::string>(), origin);
    cmd.sources[field.key] = origin;
  }
  return cmd;
}

std::string help_text(const ConfigSchema& schema) {
  std::vector<std::string> groups{"general"};
  for (const ConfigField& field : schema.fields()) {
    const auto dot = field.key.find('.');
    if (dot == std::string::npos) continue;
    const std::string group = field.key.substr(0, dot);
    if (groups.back() != group) groups.push_back(group);
  }
  return make_options(schema).help(groups);
}

}  // namespace dtrain
