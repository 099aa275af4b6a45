// Helpers for comparing model parameters in tests.
#pragma once

#include <ATen/ATen.h>

#include <limits>
#include <vector>

#include "runtime/train/workload.h"

namespace dtrain::test {

// The bound on the gap between two float64 trainings that compute the same math in another summation
// order (W ranks against one, micro-batches against one batch, a world that shrank against one that did
// not): float64's unit roundoff (1.1e-16) times a growth factor of 1e10 over a test's few steps. Growth
// measured on the tests' networks: at most 3e8 (ResNet-50 with synced BatchNorm at initialisation), 3 to
// 200 without BatchNorm. In float32 such comparisons are luck: a near tie (two values of a max-pool window,
// a ReLU input at zero) that one run rounds the other way moves a gradient by a sample's share, and which
// near ties a run meets depends on the BLAS kernels its CPU gets (test/mpi/equivalence_mpi_test.cpp).
constexpr double kReorderBound = 1e10 * std::numeric_limits<double>::epsilon() / 2;  // 1.1e-6
// What a control with wrong distributed math (gradients summed, per-rank statistics, another global
// batch) must exceed: 100 times the bound, so that the bound separates the two by orders both ways.
constexpr double kWrongMath = 100 * kReorderBound;

// All parameters flattened into one float64 vector (a copy).
inline at::Tensor flat_params(torch::nn::Module& model) {
  std::vector<at::Tensor> parts;
  for (const at::Tensor& p : model.parameters()) parts.push_back(p.detach().reshape(-1).to(at::kDouble));
  return at::cat(parts);
}

// All floating-point buffers (BatchNorm running statistics) flattened into one float64 vector (a copy);
// empty when there are none.
inline at::Tensor flat_buffers(torch::nn::Module& model) {
  std::vector<at::Tensor> parts;
  for (const at::Tensor& b : model.buffers()) {
    if (b.is_floating_point()) parts.push_back(b.detach().reshape(-1).to(at::kDouble));
  }
  return parts.empty() ? at::zeros({0}, at::kDouble) : at::cat(parts);
}

// max |a - b| / max(|b|, 1e-3): relative difference that does not explode on near-zero entries.
inline double max_relative_difference(const at::Tensor& a, const at::Tensor& b) {
  return ((a - b).abs() / b.abs().clamp_min(1e-3)).max().item<double>();
}

}  // namespace dtrain::test
