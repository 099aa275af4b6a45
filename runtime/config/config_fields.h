// The table of configuration keys: one row per YAML key, with its CLI flag, help text, parser and
// formatter. YAML loading, CLI parsing, --help and --print-config are all driven by a ConfigSchema: the
// generic rows below and the rows workloads contribute for their own options, so a new option is one
// row plus one member (in config.h, or in the workload's options struct).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
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
  std::string workload;  // the workload whose option this is ("biggan"); empty: an option of every run
  // A path that may differ from node to node (/scratch/$HOSTNAME/logs): only rank 0 uses it, it does not
  // change what is trained, and the ranks' start-up comparison (compared_yaml) leaves it out.
  bool per_node = false;
  // Parses `text` into the config; throws ConfigError naming `origin` (a file or flag) on bad input.
  std::function<void(TrainConfig&, const std::string& text, const std::string& origin)> parse;
  std::function<std::string(const TrainConfig&)> format;
  std::function<void(TrainConfig& to, const TrainConfig& from)> copy;  // this key's value, exactly
};

// Where a field's value lives in a TrainConfig: `edit` for parsing and copying, `read` for formatting.
template <class T>
struct FieldRef {
  // A member of TrainConfig, as a function returning it: [](TrainConfig& c) -> int64_t& { return c.train.epochs; }.
  template <class F, class = std::enable_if_t<std::is_invocable_r_v<T&, F, TrainConfig&>>>
  FieldRef(F ref)  // NOLINT(google-explicit-constructor): the table's rows read best with plain lambdas
      : edit(ref), read([ref](const TrainConfig& c) -> const T& { return ref(const_cast<TrainConfig&>(c)); }) {}
  FieldRef(std::function<T&(TrainConfig&)> edit_ref, std::function<const T&(const TrainConfig&)> read_ref)
      : edit(std::move(edit_ref)), read(std::move(read_ref)) {}

  std::function<T&(TrainConfig&)> edit;
  std::function<const T&(const TrainConfig&)> read;
};

// A member of a workload's options struct, kept in its section of TrainConfig::workload_options:
// option_ref(&BigGanTrainOptions::d_steps).
template <class Section, class T>
FieldRef<T> option_ref(T Section::*member) {
  return FieldRef<T>([member](TrainConfig& c) -> T& { return c.workload_options.edit<Section>().*member; },
                     [member](const TrainConfig& c) -> const T& { return c.workload_options.get<Section>().*member; });
}

// Upper bound of counts (epochs, batch sizes, steps): 2^30 is far beyond any real run, and a product of
// such a count with a world size or another count (up to 2^30 as well) still fits int64.
constexpr int64_t kMaxConfigCount = int64_t{1} << 30;

// Rows for the common kinds of value, each checked on parsing with an error naming the key, its origin,
// what was expected and what was given.
ConfigField int_field(std::string key, std::string flag, std::string help, FieldRef<int64_t> ref, int64_t min_value,
                      int64_t max_value = std::numeric_limits<int64_t>::max());
// A finite float in (min_value, max_value], or [min_value, max_value] when min_inclusive.
ConfigField float_field(std::string key, std::string flag, std::string help, FieldRef<double> ref, double min_value,
                        bool min_inclusive, double max_value = std::numeric_limits<double>::infinity());
ConfigField bool_field(std::string key, std::string flag, std::string help, FieldRef<bool> ref);
ConfigField string_field(std::string key, std::string flag, std::string help, FieldRef<std::string> ref,
                         bool allow_empty, std::string value_hint = "PATH");

// The fields of a run: the generic ones, then the workloads' own.
class ConfigSchema {
 public:
  // Throws Error when a workload field's key is not under its workload's name or when two fields share a
  // key or a flag.
  // `default_workload`: what a run trains when no file or flag names a workload (launch/main.cpp picks it).
  explicit ConfigSchema(std::vector<ConfigField> workload_fields = {}, std::string default_workload = "");

  // TrainConfig{} with the default workload: the values --help shows, where parsing starts, and what
  // config_changes() compares with.
  const TrainConfig& defaults() const { return defaults_; }

  // All fields, in the order --print-config and the docs list them.
  const std::vector<ConfigField>& fields() const { return fields_; }
  // The field for a YAML key or nullptr.
  const ConfigField* find(const std::string& key) const;
  // Whether a run of `workload` has this field: generic fields and the workload's own.
  static bool applies(const ConfigField& field, const std::string& workload) {
    return field.workload.empty() || field.workload == workload;
  }

 private:
  std::vector<ConfigField> fields_;
  TrainConfig defaults_;
};

// `base` (the generic defaults with a workload's recipe applied) with every key of `sources` (the keys a
// file or flag set) taken from `user`, so that files and flags override the workload's defaults.
TrainConfig overlay_keys(TrainConfig base, const TrainConfig& user, const ConfigSources& sources,
                         const ConfigSchema& schema);

}  // namespace dtrain
