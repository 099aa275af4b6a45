#include "runtime/train/workload.h"

#include <algorithm>
#include <iterator>

#include "runtime/config/config_fields.h"
#include "runtime/util/error.h"

namespace dtrain {

TrainConfig configure_workload(const Workload& workload, const TrainConfig& user, ConfigSources& sources,
                               const ConfigSchema& schema) {
  for (const auto& [key, origin] : sources) {
    const ConfigField* field = schema.find(key);
    if (field != nullptr && !ConfigSchema::applies(*field, workload.name())) {
      const std::string subject = origin.rfind("--", 0) == 0 ? origin + " (" + key + ")" : origin + ": " + key;
      throw ConfigError(subject + " is an option of the " + field->workload + " workload; this run trains " +
                        workload.name());
    }
  }
  TrainConfig generic = schema.defaults();
  generic.workload = user.workload;
  TrainConfig recipe = generic;
  workload.apply_defaults(recipe);
  TrainConfig merged = overlay_keys(recipe, user, sources, schema);
  workload.check_config(merged);
  for (const ConfigField& field : schema.fields()) {
    if (field.format(recipe) != field.format(generic)) {
      sources.emplace(field.key, "the " + workload.name() + " workload's defaults");  // a file or flag keeps its own
    }
  }
  return merged;
}

std::vector<std::pair<std::string, std::string>> workload_recipe(const Workload& workload, const ConfigSchema& schema) {
  // Shown for every workload, so that workloads compare at a glance; other keys only where they differ.
  static const char* const kAlwaysShown[] = {"train.epochs", "train.batch_size", "train.optimizer", "train.lr",
                                             "train.lr_schedule"};
  const TrainConfig& generic = schema.defaults();
  TrainConfig recipe = generic;
  workload.apply_defaults(recipe);
  std::vector<std::pair<std::string, std::string>> shown;
  for (const ConfigField& field : schema.fields()) {
    if (field.key == "workload" || !ConfigSchema::applies(field, workload.name())) continue;
    const std::string value = field.format(recipe);
    const bool always = std::find(std::begin(kAlwaysShown), std::end(kAlwaysShown), field.key) != std::end(kAlwaysShown);
    if (always || value != field.format(generic)) shown.emplace_back(field.key, value);
  }
  return shown;
}

}  // namespace dtrain
