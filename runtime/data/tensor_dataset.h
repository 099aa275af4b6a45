// An in-memory dataset: inputs and targets as tensors with one row per sample. Batches are gathered with
// index_select, so there is no per-sample work on the hot path. Image data stays in its compact stored
// form (uint8) and is augmented and normalised per batch as it is gathered, on the training device.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "runtime/data/dataset.h"

namespace dtrain {

struct TensorDataset final : Dataset {
  at::Tensor inputs;   // [R, ...]: model-ready floats, or raw values normalised by `mean` and `std`
  at::Tensor targets;  // [N], int64 class indices
  // Optional. Sample i's inputs are row rows[i] of `inputs` (generated data keeps a pool of distinct
  // images smaller than the nominal dataset); unset: row i.
  at::Tensor rows;
  // Optional. When set, a batch is (inputs / value_scale - mean) / std as float; mean and std broadcast
  // against one sample (e.g. [1, 1, 1], or [3, 1, 1] for per-channel image statistics).
  at::Tensor mean;
  at::Tensor std;
  double value_scale = 1.0;  // 255 for uint8 pixels
  // Training transforms of [C, H, W] images, applied before normalisation: a random H x W crop of the
  // image zero-padded by crop_padding on each side, and a horizontal flip with probability 1/2.
  int64_t crop_padding = 0;
  bool random_flip = false;

  int64_t size() const override { return targets.defined() ? targets.size(0) : 0; }
  void to(c10::Device device) override;
  std::unique_ptr<BatchStream> stream(std::vector<int64_t> indices, int64_t batch_size,
                                      std::optional<uint64_t> augment_seed) const override;

  // Model-ready inputs of the samples at `index` (int64, on the inputs' device), with the training
  // transforms when `augment_seed` is set; `host_index`, if given, is `index` on the host (saves a copy
  // back from the device).
  at::Tensor gather_inputs(const at::Tensor& index, std::optional<uint64_t> augment_seed = std::nullopt,
                           const int64_t* host_index = nullptr) const;
};

}  // namespace dtrain
