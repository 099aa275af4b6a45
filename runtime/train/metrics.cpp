#include "runtime/train/metrics.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "runtime/util/check.h"
#include "runtime/util/error.h"
#include "runtime/util/strings.h"

namespace dtrain {

MetricSums::MetricSums(std::vector<std::string> names, const at::TensorOptions& options)
    : names_(std::move(names)),
      // Doubles: float sums of 60000 per-sample losses would lose digits the 4-decimal output shows.
      sums_(at::zeros({static_cast<int64_t>(names_.size())}, options.dtype(at::kDouble))),
      weights_(names_.size(), 0.0) {
  for (size_t i = 0; i < names_.size(); ++i) {
    const std::string& name = names_[i];
    // Names become Katib metric names, JSON keys and "name=value" pairs: a word, and never "real", which
    // the analysis tools take for bash `time` output.
    const bool word = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    });
    DTRAIN_CHECK(word, Error, "metric name '" << name << "' must be letters, digits and underscores");
    DTRAIN_CHECK(name.find("real") == std::string::npos, Error,
                 "metric name '" << name << "' contains \"real\", which analysis tools take for bash `time` output");
    for (size_t j = 0; j < i; ++j) DTRAIN_CHECK(names_[j] != name, Error, "metric '" << name << "' is declared twice");
  }
}

size_t MetricSums::index_of(const std::string& name) const {
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return i;
  }
  const std::string declared = join(names_);
  throw Error("metric '" + name + "' was not declared by the workload's step (declared: " +
              (declared.empty() ? "none" : declared) + ")");
}

void MetricSums::add(const std::string& name, const at::Tensor& sum, double weight) {
  const size_t i = index_of(name);
  DTRAIN_CHECK(sum.numel() == 1, Error,
               "metric '" << name << "' was given a sum of " << sum.numel() << " values, expected one");
  sums_.select(0, static_cast<int64_t>(i)).add_(sum.detach().reshape({}).to(sums_.device(), at::kDouble));
  weights_[i] += weight;
}

void MetricSums::add(const MetricSums& other) {
  DTRAIN_CHECK(other.names_ == names_, Error, "cannot add metric sums with different names");
  sums_.add_(other.sums_);
  for (size_t i = 0; i < weights_.size(); ++i) weights_[i] += other.weights_[i];
}

void MetricSums::zero() {
  sums_.zero_();
  std::fill(weights_.begin(), weights_.end(), 0.0);
}

MetricValues MetricSums::values_of(const std::vector<std::string>& names, const std::vector<double>& v) {
  std::vector<MetricValue> values;
  const size_t k = names.size();
  for (size_t i = 0; i < k; ++i) {
    MetricValue m{names[i], 0.0, v[i], v[k + i]};
    m.value = m.weight > 0 ? m.sum / m.weight : 0.0;
    values.push_back(std::move(m));
  }
  return MetricValues(std::move(values));
}

MetricValues MetricSums::local() const {
  const at::Tensor sums = sums_.to(at::kCPU).contiguous();
  std::vector<double> v(sums.data_ptr<double>(), sums.data_ptr<double>() + sums.numel());
  v.insert(v.end(), weights_.begin(), weights_.end());
  return values_of(names_, v);
}

MetricValues MetricSums::reduce(Communicator& comm) const { return reduce_all(comm, {this}).front(); }

std::vector<MetricValues> reduce_all(Communicator& comm, const std::vector<const MetricSums*>& sets) {
  // One host buffer [sums of set 0, weights of set 0, sums of set 1, ...]: a single small allreduce.
  std::vector<double> flat;
  for (const MetricSums* set : sets) {
    const MetricValues local = set->local();
    for (const MetricValue& m : local.all()) flat.push_back(m.sum);
    for (const MetricValue& m : local.all()) flat.push_back(m.weight);
  }
  at::Tensor buffer = at::tensor(flat, at::kDouble);
  comm.allreduce(buffer, ReduceOp::kSum);
  const double* v = buffer.data_ptr<double>();
  std::vector<MetricValues> reduced;
  for (const MetricSums* set : sets) {
    const size_t n = 2 * set->names().size();
    reduced.push_back(MetricSums::values_of(set->names(), std::vector<double>(v, v + n)));
    v += n;
  }
  return reduced;
}

MetricSums count_sums(std::initializer_list<std::pair<const char*, int64_t>> counts) {
  std::vector<std::string> names;
  for (const auto& c : counts) names.emplace_back(c.first);
  MetricSums sums(names, at::TensorOptions(at::kCPU));
  for (const auto& [name, count] : counts) {
    sums.add(name, at::tensor(static_cast<double>(count), at::kDouble), static_cast<double>(count));
  }
  return sums;
}

int64_t reduced_count(const MetricValues& reduced, const std::string& name) {
  return static_cast<int64_t>(reduced.find(name)->weight);
}

}  // namespace dtrain
