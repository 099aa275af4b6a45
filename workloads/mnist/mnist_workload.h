// The mnist workload: the pytorch/examples MNIST CNN on MNIST-format IDX data (Fashion-MNIST from
// Debian's dataset-fashion-mnist by default) or on generated data of the same shape.
#pragma once

#include <memory>

#include "runtime/train/workload.h"
#include "workloads/registry.h"

namespace dtrain {

std::unique_ptr<Workload> make_mnist_workload();

// Adds "mnist".
void register_mnist_workloads(WorkloadRegistry& registry);

}  // namespace dtrain
