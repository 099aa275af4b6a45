// Named metrics, reduced over all ranks before anything is printed: per-epoch metrics are always those
// of the global dataset, never of rank 0's shard. Workloads name them (loss and accuracy for a
// classifier; d_loss and g_loss for a GAN); every metric is a weighted mean, a sum over samples divided
// by a weight (usually the sample count), so that one allreduce of sums and weights makes it global.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/log/metric_values.h"

namespace dtrain {

class MetricSums;

// Collective: reduces several sets of sums in one allreduce (train and test metrics at an epoch's end).
std::vector<MetricValues> reduce_all(Communicator& comm, const std::vector<const MetricSums*>& sets);

// Per-rank running sums of named metrics. The sums stay on the device (adding to them never waits for a
// GPU); the weights, known on the host, stay there.
class MetricSums {
 public:
  MetricSums() = default;
  // `options`: device (and anything else but the dtype, which is always double) of the sums.
  MetricSums(std::vector<std::string> names, const at::TensorOptions& options);

  const std::vector<std::string>& names() const { return names_; }

  // Adds a sum (a 0-dim tensor on the sums' device, any floating or integer dtype) and its weight to
  // metric `name`. Throws Error for a name that was not declared.
  void add(const std::string& name, const at::Tensor& sum, double weight);

  // Adds `other`'s sums and weights (same names) to these; zeroes clears them.
  void add(const MetricSums& other);
  void zero();

  // Local: the sums and weights on this rank (one host read).
  MetricValues local() const;
  // Collective: the sums and weights of every rank in one allreduce.
  MetricValues reduce(Communicator& comm) const;

 private:
  friend std::vector<MetricValues> reduce_all(Communicator& comm, const std::vector<const MetricSums*>& sets);
  size_t index_of(const std::string& name) const;
  static MetricValues values_of(const std::vector<std::string>& names, const std::vector<double>& sums_and_weights);

  std::vector<std::string> names_;
  at::Tensor sums_;              // [k] double on the device
  std::vector<double> weights_;  // [k]
};

// This rank's counts (samples), reduced beside the metric sums in the same allreduce: each is a sum whose
// weight is the count, so the reduced weight is the count over all ranks (reduced_count).
MetricSums count_sums(std::initializer_list<std::pair<const char*, int64_t>> counts);
int64_t reduced_count(const MetricValues& reduced, const std::string& name);

}  // namespace dtrain
