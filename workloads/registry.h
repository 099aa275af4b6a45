// The workload registry: names to factories and the options each workload declares, filled explicitly by
// register_builtin_workloads().
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/config/config_fields.h"
#include "runtime/train/workload.h"

namespace dtrain {

using WorkloadFactory = std::function<std::unique_ptr<Workload>()>;

class WorkloadRegistry final {
 public:
  // `options`: the configuration fields of the workload's own options, keys under "<name>."; they become
  // its (ConfigField::workload). Throws Error if `name` is already registered.
  void add(const std::string& name, const std::string& description, WorkloadFactory factory,
           std::vector<ConfigField> options = {});

  // Throws ConfigError "unknown workload 'mnsit'; available: cifar10, mnist", and Error when the factory
  // makes a workload whose name() is not `name`.
  std::unique_ptr<Workload> create(const std::string& name) const;

  bool contains(const std::string& name) const { return entries_.count(name) > 0; }
  std::vector<std::string> names() const;  // sorted
  const std::string& description(const std::string& name) const;
  // Every workload's option fields, for ConfigSchema.
  std::vector<ConfigField> config_fields() const;

 private:
  struct Entry {
    std::string description;
    WorkloadFactory factory;
    std::vector<ConfigField> options;
  };
  std::map<std::string, Entry> entries_;
};

// Adds every workload shipped with dtrain: each folder of workloads/ defines
// register_<folder>_workloads(WorkloadRegistry&).
void register_builtin_workloads(WorkloadRegistry& registry);

}  // namespace dtrain
