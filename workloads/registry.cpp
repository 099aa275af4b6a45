#include "workloads/registry.h"

#include "runtime/util/error.h"
#include "runtime/util/strings.h"

// The folders of workloads/, each with its CMakeLists.txt and a register_<folder>_workloads(): adding a
// workload family is its folder and its name on this line.
#define DTRAIN_WORKLOAD_FOLDERS(X) X(mnist) X(vision) X(gcn) X(biggan)

namespace dtrain {

#define DTRAIN_DECLARE_REGISTER(folder) void register_##folder##_workloads(WorkloadRegistry& registry);
DTRAIN_WORKLOAD_FOLDERS(DTRAIN_DECLARE_REGISTER)
#undef DTRAIN_DECLARE_REGISTER

void WorkloadRegistry::add(const std::string& name, const std::string& description, WorkloadFactory factory,
                           std::vector<ConfigField> options) {
  for (ConfigField& field : options) field.workload = name;
  if (!entries_.emplace(name, Entry{description, std::move(factory), std::move(options)}).second) {
    throw Error("workload '" + name + "' is registered twice");
  }
}

std::vector<ConfigField> WorkloadRegistry::config_fields() const {
  std::vector<ConfigField> fields;
  for (const auto& [name, entry] : entries_) fields.insert(fields.end(), entry.options.begin(), entry.options.end());
  return fields;
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
    throw ConfigError("unknown workload '" + name + "'; available: " + join(names()));
  }
  std::unique_ptr<Workload> workload = it->second.factory();
  // The key, the workload's own name (in its run logs and checkpoints) and its options section are one
  // identity: a workload registered under another name would write checkpoints no run of that key reads.
  if (!workload || workload->name() != name) {
    throw Error("workload '" + name + "' is registered, but its factory makes " +
                (workload ? "one named '" + workload->name() + "'" : std::string("none")) +
                " (Workload::name() must be the registered name)");
  }
  return workload;
}

void register_builtin_workloads(WorkloadRegistry& registry) {
#define DTRAIN_CALL_REGISTER(folder) register_##folder##_workloads(registry);
  DTRAIN_WORKLOAD_FOLDERS(DTRAIN_CALL_REGISTER)
#undef DTRAIN_CALL_REGISTER
}

}  // namespace dtrain
