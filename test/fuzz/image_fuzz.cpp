// Image files (JPEG or PNG, told apart by their first bytes): the decoder a training step uses and the
// header check the start-up scan uses, on the same bytes. Where both accept the file they must agree on
// its size, and a decoded image holds exactly height x width x 3 bytes.
#include <png.h>
#include <turbojpeg.h>

#include <cstdlib>
#include <stdexcept>
#include <vector>

#include "runtime/data/image_decode.h"
#include "runtime/util/error.h"
#include "test/fuzz/fuzz_target.h"

namespace dtrain::fuzz::image_target {
namespace {

std::vector<uint8_t> pattern(int width, int height, int channels) {
  std::vector<uint8_t> pixels(static_cast<size_t>(width * height * channels));
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 13 % 251);
  return pixels;
}

std::string jpeg(int width, int height, int format, int channels, int subsampling, int flags) {
  tjhandle handle = tjInitCompress();
  unsigned char* out = nullptr;
  unsigned long size = 0;
  const std::vector<uint8_t> pixels = pattern(width, height, channels);
  const int status = tjCompress2(handle, pixels.data(), width, 0, height, format, &out, &size, subsampling, 90, flags);
  std::string bytes = status == 0 ? std::string(reinterpret_cast<char*>(out), size) : "";
  tjFree(out);
  tjDestroy(handle);
  if (bytes.empty()) throw std::runtime_error("tjCompress2 failed");
  return bytes;
}

std::string png(int width, int height, png_uint_32 format, int channels) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width);
  image.height = static_cast<png_uint_32>(height);
  image.format = format;
  const std::vector<uint8_t> pixels = pattern(width, height, channels);
  png_alloc_size_t size = 0;
  png_image_write_to_memory(&image, nullptr, &size, 0, pixels.data(), 0, nullptr);
  std::string bytes(size, '\0');
  if (!png_image_write_to_memory(&image, bytes.data(), &size, 0, pixels.data(), 0, nullptr)) {
    throw std::runtime_error("png_image_write_to_memory failed");
  }
  bytes.resize(size);
  return bytes;
}

void write_seeds(const std::string& dir) {
  write_bytes(dir + "/rgb-420.jpg", jpeg(17, 11, TJPF_RGB, 3, TJSAMP_420, 0));
  write_bytes(dir + "/rgb-444-progressive.jpg", jpeg(9, 13, TJPF_RGB, 3, TJSAMP_444, TJFLAG_PROGRESSIVE));
  write_bytes(dir + "/gray.jpg", jpeg(8, 8, TJPF_GRAY, 1, TJSAMP_GRAY, 0));
  write_bytes(dir + "/cmyk.jpg", jpeg(10, 6, TJPF_CMYK, 4, TJSAMP_444, 0));
  write_bytes(dir + "/rgb.png", png(7, 5, PNG_FORMAT_RGB, 3));
  write_bytes(dir + "/rgba.png", png(4, 9, PNG_FORMAT_RGBA, 4));
  write_bytes(dir + "/gray.png", png(6, 6, PNG_FORMAT_GRAY, 1));
}

int test_one_input(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> bytes(data, data + size);
  bool decoded = false;
  dtrain::RgbImage image;
  try {
    image = dtrain::decode_image(bytes, "input");
    decoded = true;
    if (image.height <= 0 || image.width <= 0 ||
        image.pixels.size() != static_cast<size_t>(image.height * image.width * 3)) {
      std::abort();
    }
  } catch (const dtrain::DataError& e) {
    dtrain::fuzz::refused(e);
  }
  const std::string path = dtrain::fuzz::scratch_dir() + "/input";
  dtrain::fuzz::write_bytes(path, data, size);
  try {
    const dtrain::ImageSize header = dtrain::read_image_size(path);
    if (decoded && (header.height != image.height || header.width != image.width)) std::abort();
  } catch (const dtrain::DataError& e) {
    dtrain::fuzz::refused(e);
  }
  return 0;
}

}  // namespace
}  // namespace dtrain::fuzz::image_target

DTRAIN_FUZZ_TARGET(image, dtrain::fuzz::image_target::write_seeds, dtrain::fuzz::image_target::test_one_input)
