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

// The size of the image at `path` from its header alone (the first 64 KiB; more only for a JPEG whose
// frame header lies behind larger metadata), with the checks decode_image_file makes before decoding:
// readable, not empty, a JPEG or PNG signature, a header that parses, 1 to 2^28 pixels; and, from its
// last 4 KiB, that it ends as a whole image does (a PNG's IEND chunk, a JPEG's end-of-image marker), so
// that a copy cut short is found at start-up. Throws DataError like decode_image_file. For a start-up
// check of a whole dataset: cheap (two small reads), and thread-safe.
struct ImageSize {
  int64_t height = 0;
  int64_t width = 0;
};
ImageSize read_image_size(const std::string& path);

}  // namespace dtrain
