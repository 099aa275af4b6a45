// An environment holding only the given variables, for code that reads the environment through a lookup
// (runtime/bootstrap/launcher_env.h's EnvLookup, runtime/util/cpu_budget.h's choose_threads).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

namespace dtrain::test {

inline std::function<std::optional<std::string>(const std::string&)> env_of(std::map<std::string, std::string> values) {
  return [values = std::move(values)](const std::string& name) -> std::optional<std::string> {
    const auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace dtrain::test
