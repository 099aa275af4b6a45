// Decoding of JPEG (libjpeg-turbo's TurboJPEG API) and PNG (libpng's simplified API) files into 8-bit
// RGB pixels. Grey images are expanded to RGB and alpha is dropped, as PIL's convert("RGB") does; JPEG
// decoding uses the accurate integer IDCT and fancy upsampling, PIL's defaults, so pixels match PIL's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtrain {

struct RgbImage {
  int64_t height = 0;
  int64_t width = 0;
  std::vector<uint8_t> pixels;  // height x width x 3, row-major
};

// Decodes the file at `path` (JPEG or PNG, told apart by its first bytes, not its name). Throws DataError
// naming the file and what is wrong with it. Thread-safe.
RgbImage decode_image_file(const std::string& path);

// The same for bytes already in memory; `name` is used in errors.
RgbImage decode_image(const std::vector<uint8_t>& bytes, const std::string& name);

}  // namespace dtrain
