#include "runtime/config/config_yaml.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

#include "runtime/config/config_fields.h"
#include "runtime/util/error.h"

namespace dtrain {
namespace {

std::string known_keys_under(const std::string& prefix) {
  std::string keys;
  for (const ConfigField& field : config_fields()) {
    if (field.key.rfind(prefix, 0) == 0) keys += (keys.empty() ? "" : ", ") + field.key;
  }
  return keys;
}

void apply_node(const YAML::Node& node, const std::string& prefix, const std::string& origin, TrainConfig& config,
                ConfigSources& sources) {
  for (const auto& entry : node) {
    const std::string key = prefix + entry.first.as<std::string>();
    const YAML::Node& value = entry.second;
    const ConfigField* field = find_config_field(key);
    if (field == nullptr) {
      if (value.IsMap() && !known_keys_under(key + ".").empty()) {
        apply_node(value, key + ".", origin, config, sources);
        continue;
      }
      const std::string section = prefix.empty() ? "" : prefix.substr(0, prefix.size() - 1);
      throw ConfigError(origin + ": unknown key '" + key + "'; known keys" +
                        (section.empty() ? "" : " in '" + section + "'") + ": " + known_keys_under(prefix));
    }
    if (!value.IsScalar()) {
      throw ConfigError(origin + ": " + key + " must be a single value (" + field->value_hint + "), got a " +
                        (value.IsMap() ? "mapping" : value.IsSequence() ? "list" : "null"));
    }
    field->parse(config, value.Scalar(), origin);
    sources[key] = origin;
  }
}

}  // namespace

void apply_yaml_text(const std::string& yaml_text, const std::string& origin, TrainConfig& config,
                     ConfigSources& sources) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(origin + ": not valid YAML: " + e.what());
  }
  if (root.IsNull()) return;  // an empty file changes nothing
  if (!root.IsMap()) throw ConfigError(origin + ": expected a mapping of keys at the top level");
  apply_node(root, "", origin, config, sources);
}

void apply_yaml_file(const std::string& path, TrainConfig& config, ConfigSources& sources) {
  std::ifstream in(path);
  if (!in) throw ConfigError("cannot read config file '" + path + "': no such file or not readable");
  std::ostringstream text;
  text << in.rdbuf();
  apply_yaml_text(text.str(), path, config, sources);
}

std::string to_yaml(const TrainConfig& config) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  std::string open_section;
  for (const ConfigField& field : config_fields()) {
    const auto dot = field.key.find('.');
    const std::string section = dot == std::string::npos ? "" : field.key.substr(0, dot);
    const std::string name = dot == std::string::npos ? field.key : field.key.substr(dot + 1);
    if (section != open_section) {
      if (!open_section.empty()) out << YAML::EndMap;
      if (!section.empty()) out << YAML::Key << section << YAML::Value << YAML::BeginMap;
      open_section = section;
    }
    out << YAML::Key << name << YAML::Value << field.format(config);
  }
  if (!open_section.empty()) out << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace dtrain
