#include "runtime/log/image_grid.h"

#include <ATen/ATen.h>
#include <png.h>

#include <cstring>

#include "runtime/util/check.h"
#include "runtime/util/file_io.h"

namespace dtrain {

at::Tensor image_grid(const at::Tensor& images, int64_t columns, int64_t padding) {
  DTRAIN_CHECK(images.dim() == 4 && images.size(1) == 3 && images.size(0) > 0, Error,
               "an image grid needs images [N, 3, H, W] with N > 0, got " << images.sizes());
  DTRAIN_CHECK(columns >= 1 && padding >= 0, Error,
               "an image grid needs at least one column and no negative padding, got " << columns << " and " << padding);
  const int64_t n = images.size(0);
  const int64_t h = images.size(2);
  const int64_t w = images.size(3);
  const int64_t cols = std::min(columns, n);
  const int64_t rows = (n + cols - 1) / cols;
  const at::Tensor pixels =
      images.detach().to(at::kCPU, at::kFloat).add(1.0).mul(127.5).round().clamp(0, 255).to(at::kByte).permute({0, 2, 3, 1});
  at::Tensor grid = at::zeros({rows * (h + padding) + padding, cols * (w + padding) + padding, 3}, at::kByte);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t top = padding + (i / cols) * (h + padding);
    const int64_t left = padding + (i % cols) * (w + padding);
    grid.narrow(0, top, h).narrow(1, left, w).copy_(pixels[i]);
  }
  return grid;
}

std::string encode_png(const at::Tensor& rgb) {
  DTRAIN_CHECK(rgb.dim() == 3 && rgb.size(2) == 3 && rgb.scalar_type() == at::kByte && rgb.numel() > 0, Error,
               "a PNG needs uint8 pixels [H, W, 3], got " << rgb.scalar_type() << " " << rgb.sizes());
  const at::Tensor pixels = rgb.to(at::kCPU).contiguous();
  png_image png;
  std::memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(pixels.size(1));
  png.height = static_cast<png_uint_32>(pixels.size(0));
  png.format = PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  // The first call measures, the second writes.
  if (png_image_write_to_memory(&png, nullptr, &size, 0, pixels.data_ptr<uint8_t>(), 0, nullptr) == 0) {
    throw IoError(std::string("cannot encode a PNG image: ") + png.message);
  }
  std::string bytes(size, '\0');
  if (png_image_write_to_memory(&png, bytes.data(), &size, 0, pixels.data_ptr<uint8_t>(), 0, nullptr) == 0) {
    throw IoError(std::string("cannot encode a PNG image: ") + png.message);
  }
  bytes.resize(size);
  return bytes;
}

void write_png(const Directory& dir, const std::string& name, const at::Tensor& rgb) {
  write_file_atomically(dir, name, encode_png(rgb));
}

}  // namespace dtrain
