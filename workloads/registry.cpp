#include "workloads/registry.h"

#include "runtime/util/error.h"
#include "workloads/mnist/mnist_workload.h"

namespace dtrain {

void WorkloadRegistry::add(const std::string& name, const std::string& description, WorkloadFactory factory) {
  if (!entries_.emplace(name, Entry{description, std::move(factory)}).second) {
    throw Error("workload '" + name + "' is registered twice");
  }
}

std::vector<std::string> WorkloadRegistry::names() const {
  std::vector<std::string> names;
  for (const auto& [name, entry] : entries_) names.push_back(name);
  return names;
}

const std::string& WorkloadRegistry::description(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw Error("no workload named '" + name + "'");
  return it->second.description;
}

std::unique_ptr<Workload> WorkloadRegistry::create(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    std::string available;
    for (const auto& [known, entry] : entries_) available += (available.empty() ? "" : ", ") + known;
    throw ConfigError("unknown workload '" + name + "'; available: " + available);
  }
  return it->second.factory();
}

void register_builtin_workloads(WorkloadRegistry& registry) {
  registry.add("mnist", "pytorch/examples MNIST CNN on MNIST-format data (Fashion-MNIST by default)",
               make_mnist_workload);
}

}  // namespace dtrain
