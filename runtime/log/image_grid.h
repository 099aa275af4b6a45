// Pictures of what a generative model makes: a batch of images tiled into one grid and written as PNG
// (libpng's simplified API), e.g. a GAN's samples every few epochs, so a user can watch training.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

#include "runtime/util/directory.h"

namespace dtrain {

// Images [N, 3, H, W] with values in [-1, 1] (a tanh output) tiled row by row, `columns` per row, with
// `padding` black pixels around each: uint8 [rows x (H + padding) + padding, columns x (W + padding) +
// padding, 3] on the CPU, value round((x + 1) x 127.5) clamped to [0, 255]. Throws Error for another
// shape or columns < 1.
at::Tensor image_grid(const at::Tensor& images, int64_t columns, int64_t padding = 2);

// The PNG file of `rgb`, uint8 [H, W, 3] (8-bit RGB, no interlacing). Throws Error for another shape and
// IoError if libpng cannot encode it.
std::string encode_png(const at::Tensor& rgb);

// encode_png written as `name` in `dir` atomically (file_io.h); throws IoError naming the path on failure.
void write_png(const Directory& dir, const std::string& name, const at::Tensor& rgb);

}  // namespace dtrain
