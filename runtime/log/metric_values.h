// Named metric values as the logs report them: plain data, filled by the trainer from the reduced
// sums of runtime/train/metrics.h.
#pragma once

#include <string>
#include <vector>

namespace dtrain {

// One reduced metric. `sum` and `weight` are kept so that counts can be shown (e.g. "8810/10000").
struct MetricValue {
  std::string name;
  double value = 0.0;   // sum / weight, 0 when the weight is 0
  double sum = 0.0;
  double weight = 0.0;
};

// Metrics in the order their workload lists them (logs and the Katib line keep that order).
class MetricValues {
 public:
  MetricValues() = default;
  explicit MetricValues(std::vector<MetricValue> values) : values_(std::move(values)) {}

  const std::vector<MetricValue>& all() const { return values_; }
  bool empty() const { return values_.empty(); }
  const MetricValue* find(const std::string& name) const;
  // The value of metric `name`; throws Error when there is no such metric.
  double at(const std::string& name) const;
  bool all_finite() const;

 private:
  std::vector<MetricValue> values_;
};

}  // namespace dtrain
