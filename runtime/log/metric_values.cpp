#include "runtime/log/metric_values.h"

#include <cmath>

#include "runtime/util/error.h"
#include "runtime/util/strings.h"

namespace dtrain {

const MetricValue* MetricValues::find(const std::string& name) const {
  for (const MetricValue& v : values_) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

double MetricValues::at(const std::string& name) const {
  const MetricValue* v = find(name);
  if (v == nullptr) {
    const std::string names = join(values_, ", ", [](const MetricValue& m) { return m.name; });
    throw Error("no metric '" + name + "' among: " + (names.empty() ? "(none)" : names));
  }
  return v->value;
}

bool MetricValues::all_finite() const {
  for (const MetricValue& v : values_) {
    if (!std::isfinite(v.sum)) return false;
  }
  return true;
}

}  // namespace dtrain
