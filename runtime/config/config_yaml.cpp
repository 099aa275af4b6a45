#include "runtime/config/config_yaml.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "runtime/config/config_fields.h"
#include "runtime/util/error.h"
#include "runtime/util/strings.h"

namespace dtrain {
namespace {

std::string known_keys_under(const ConfigSchema& schema, const std::string& prefix) {
  std::string keys;
  for (const ConfigField& field : schema.fields()) {
    if (field.key.rfind(prefix, 0) == 0) keys += (keys.empty() ? "" : ", ") + field.key;
  }
  return keys;
}

const char* kind_of(const YAML::Node& node) {
  return node.IsMap() ? "mapping" : node.IsSequence() ? "list" : node.IsNull() ? "null" : "value";
}

void apply_node(const YAML::Node& node, const std::string& prefix, const std::string& origin,
                const ConfigSchema& schema, TrainConfig& config, ConfigSources& sources, std::set<std::string>& seen) {
  const std::string section = prefix.empty() ? "" : prefix.substr(0, prefix.size() - 1);
  for (const auto& entry : node) {
    if (!entry.first.IsScalar()) {
      throw ConfigError(origin + ": a " + std::string(kind_of(entry.first)) + " is used as a key" +
                        (section.empty() ? "" : " in '" + section + "'") +
                        "; keys are plain names, as in 'train: {epochs: 3}'");
    }
    const std::string key = prefix + entry.first.Scalar();
    if (!seen.insert(key).second) throw ConfigError(origin + ": " + key + " is set twice; keep one");
    const YAML::Node& value = entry.second;
    const ConfigField* field = schema.find(key);
    if (field == nullptr) {
      if (value.IsMap() && !known_keys_under(schema, key + ".").empty()) {
        apply_node(value, key + ".", origin, schema, config, sources, seen);
        continue;
      }
      throw ConfigError(origin + ": unknown key '" + key + "'; known keys" +
                        (section.empty() ? "" : " in '" + section + "'") + ": " + known_keys_under(schema, prefix));
    }
    if (field->is_list && value.IsSequence()) {
      const std::string joined = join(value, ",", [&](const YAML::Node& item) {
        if (!item.IsScalar()) {
          throw ConfigError(origin + ": " + key + " must be a list of single values, got a " + kind_of(item) +
                            " in it");
        }
        return item.Scalar();
      });
      field->parse(config, joined, origin);
      sources[key] = origin;
      continue;
    }
    if (!value.IsScalar()) {
      throw ConfigError(origin + ": " + key + " must be a single value (" + field->value_hint + "), got a " +
                        kind_of(value));
    }
    field->parse(config, value.Scalar(), origin);
    sources[key] = origin;
  }
}

}  // namespace

void apply_yaml_text(const std::string& yaml_text, const std::string& origin, const ConfigSchema& schema,
                     TrainConfig& config, ConfigSources& sources) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(origin + ": not valid YAML: " + e.what());
  }
  if (root.IsNull()) return;  // an empty file changes nothing
  if (!root.IsMap()) {
    throw ConfigError(origin + ": expected a mapping of keys at the top level (such as 'train: {epochs: 3}'), got a " +
                      kind_of(root));
  }
  std::set<std::string> seen;
  apply_node(root, "", origin, schema, config, sources, seen);
}

void apply_yaml_file(const std::string& path, const ConfigSchema& schema, TrainConfig& config,
                     ConfigSources& sources) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw ConfigError("--config '" + path + "' is a directory; expected a YAML file");
  }
  errno = 0;
  std::ifstream in(path);
  if (!in) {
    throw ConfigError("cannot read config file '" + path + "': " + (errno != 0 ? std::strerror(errno) : "not readable"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ConfigError("cannot read config file '" + path + "': read error");
  apply_yaml_text(text.str(), path, schema, config, sources);
}

namespace {

// Writes `text` as a scalar that reads back as exactly `text`. yaml-cpp writes a value with a control
// character (a trailing CR from a Windows-edited file) or a space at either end as a plain scalar, which
// a reader trims; double quotes keep it (found by test/fuzz/config_fuzz.cpp).
void write_scalar(YAML::Emitter& out, const std::string& text) {
  bool quote = !text.empty() && (text.front() == ' ' || text.back() == ' ');
  for (const char c : text) quote = quote || static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  if (quote) out << YAML::DoubleQuoted;
  out << text;
}

std::string yaml_of(const TrainConfig& config, const ConfigSchema& schema, bool per_node_keys) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  std::string open_section;
  for (const ConfigField& field : schema.fields()) {
    if (!ConfigSchema::applies(field, config.workload) || (field.per_node && !per_node_keys)) continue;
    const auto dot = field.key.find('.');
    const std::string section = dot == std::string::npos ? "" : field.key.substr(0, dot);
    const std::string name = dot == std::string::npos ? field.key : field.key.substr(dot + 1);
    if (section != open_section) {
      if (!open_section.empty()) out << YAML::EndMap;
      if (!section.empty()) out << YAML::Key << section << YAML::Value << YAML::BeginMap;
      open_section = section;
    }
    out << YAML::Key << name << YAML::Value;
    if (field.is_list) {
      const std::string text = field.format(config);
      out << YAML::Flow << YAML::BeginSeq;
      for (size_t begin = 0; begin < text.size();) {
        const size_t end = std::min(text.find(',', begin), text.size());
        write_scalar(out, text.substr(begin, end - begin));
        begin = end + 1;
      }
      out << YAML::EndSeq;
    } else {
      write_scalar(out, field.format(config));
    }
  }
  if (!open_section.empty()) out << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace

std::string to_yaml(const TrainConfig& config, const ConfigSchema& schema) { return yaml_of(config, schema, true); }

std::string compared_yaml(const TrainConfig& config, const ConfigSchema& schema) {
  return yaml_of(config, schema, false);
}

std::vector<std::string> config_changes(const TrainConfig& config, const ConfigSchema& schema) {
  const TrainConfig& defaults = schema.defaults();
  std::vector<std::string> changes;
  for (const ConfigField& field : schema.fields()) {
    if (!ConfigSchema::applies(field, config.workload)) continue;
    const std::string value = field.format(config);
    if (value == field.format(defaults)) continue;
    changes.push_back(field.key + ": " + (field.is_list ? "[" + value + "]" : value));
  }
  return changes;
}

}  // namespace dtrain
