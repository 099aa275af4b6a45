// Helpers for comparing model parameters in tests.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "runtime/train/workload.h"

namespace dtrain::test {

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
