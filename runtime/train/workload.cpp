#include "runtime/train/workload.h"

#include <algorithm>
#include <iterator>

#include "runtime/config/config_fields.h"

namespace dtrain {

TrainConfig configure_workload(const Workload& workload, const TrainConfig& user, ConfigSources& sources) {
  TrainConfig recipe;
  recipe.workload = user.workload;
  workload.apply_defaults(recipe);
  TrainConfig merged = overlay_keys(recipe, user, sources);
  workload.check_config(merged);
  const TrainConfig generic;
  for (const ConfigField& field : config_fields()) {
    if (field.format(recipe) != field.format(generic)) {
      sources.emplace(field.key, "the " + workload.name() + " workload's defaults");  // a file or flag keeps its own
    }
  }
  return merged;
}

std::vector<std::pair<std::string, std::string>> workload_recipe(const Workload& workload) {
  // Shown for every workload, so that workloads compare at a glance; other keys only where they differ.
  static const char* const kAlwaysShown[] = {"train.epochs", "train.batch_size", "train.optimizer", "train.lr",
                                             "train.lr_schedule"};
  const TrainConfig generic;
  TrainConfig recipe;
  workload.apply_defaults(recipe);
  std::vector<std::pair<std::string, std::string>> shown;
  for (const ConfigField& field : config_fields()) {
    if (field.key == "workload") continue;
    const std::string value = field.format(recipe);
    const bool always = std::find(std::begin(kAlwaysShown), std::end(kAlwaysShown), field.key) != std::end(kAlwaysShown);
    if (always || value != field.format(generic)) shown.emplace_back(field.key, value);
  }
  return shown;
}

}  // namespace dtrain
