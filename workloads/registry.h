// The workload registry: names to factories, filled explicitly by register_builtin_workloads().
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/train/workload.h"

namespace dtrain {

using WorkloadFactory = std::function<std::unique_ptr<Workload>()>;

class WorkloadRegistry final {
 public:
  // Throws Error if `name` is already registered.
  void add(const std::string& name, const std::string& description, WorkloadFactory factory);

  // Throws ConfigError "unknown workload 'mnsit'; available: cifar10, mnist".
  std::unique_ptr<Workload> create(const std::string& name) const;

  bool contains(const std::string& name) const { return entries_.count(name) > 0; }
  std::vector<std::string> names() const;  // sorted
  const std::string& description(const std::string& name) const;

 private:
  struct Entry {
    std::string description;
    WorkloadFactory factory;
  };
  std::map<std::string, Entry> entries_;
};

// Adds every workload shipped with dtrain.
void register_builtin_workloads(WorkloadRegistry& registry);

}  // namespace dtrain
