// The image transforms of vision training, fused into one pass per image: a crop of the source resized
// to size x size (bilinear, antialiased like PIL's resize when shrinking), an optional horizontal flip,
// scaling to [0, 1] and per-channel normalisation, written as float CHW. Training uses torchvision's
// RandomResizedCrop(size, scale=(0.08, 1), ratio=(3/4, 4/3)) + RandomHorizontalFlip; evaluation uses
// Resize(size / 0.875) + CenterCrop(size).
#pragma once

#include <array>
#include <cstdint>

#include "runtime/data/image_decode.h"
#include "runtime/data/sample_random.h"

namespace dtrain {

struct CropBox {
  int64_t top = 0;
  int64_t left = 0;
  int64_t height = 0;
  int64_t width = 0;
};

// torchvision's RandomResizedCrop box: ten tries at an area in `scale` x the image and an aspect ratio
// log-uniform in [3/4, 4/3], then the largest centred box with the ratio clamped to that range.
CropBox random_resized_crop(int64_t height, int64_t width, SampleRandom& random, double min_scale = 0.08);

// Resize(round(size / crop_fraction)) of the shorter side, then CenterCrop(size): the box of the source
// that ends up in the output.
CropBox center_crop(int64_t height, int64_t width, int64_t size, double crop_fraction = 0.875);

struct Normalisation {
  std::array<float, 3> mean{0.485f, 0.456f, 0.406f};  // ImageNet's, as torchvision's references use
  std::array<float, 3> std{0.229f, 0.224f, 0.225f};
};

// Writes `box` of `image` resized to size x size into `out` (3 x size x size floats, CHW), mirrored when
// `flip`, as (pixel / 255 - mean) / std.
void crop_resize_normalise(const RgbImage& image, const CropBox& box, int64_t size, bool flip,
                           const Normalisation& norm, float* out);

}  // namespace dtrain
