#include "runtime/data/image_decode.h"

#include <png.h>
#include <turbojpeg.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>

#include "runtime/util/error.h"

namespace dtrain {
namespace {

bool is_jpeg(const std::vector<uint8_t>& b) { return b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF; }

bool is_png(const std::vector<uint8_t>& b) {
  static const uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  return b.size() >= 8 && std::memcmp(b.data(), kSignature, 8) == 0;
}

// Larger images are refused rather than risking an allocation of many GiB from a corrupt header.
constexpr int64_t kMaxPixels = int64_t{1} << 28;

RgbImage decode_jpeg(const std::vector<uint8_t>& bytes, const std::string& name) {
  struct HandleDeleter {
    void operator()(void* h) const { tjDestroy(h); }
  };
  std::unique_ptr<void, HandleDeleter> handle(tjInitDecompress());
  if (!handle) throw Error("cannot start the JPEG decoder: " + std::string(tjGetErrorStr2(nullptr)));
  int width = 0;
  int height = 0;
  int subsampling = 0;
  int colorspace = 0;
  if (tjDecompressHeader3(handle.get(), bytes.data(), static_cast<unsigned long>(bytes.size()), &width, &height,
                          &subsampling, &colorspace) != 0) {
    throw DataError("cannot decode JPEG image '" + name + "': " + tjGetErrorStr2(handle.get()));
  }
  if (width <= 0 || height <= 0 || int64_t{width} * height > kMaxPixels) {
    throw DataError("JPEG image '" + name + "' claims " + std::to_string(width) + "x" + std::to_string(height) +
                    " pixels; expected a positive size of at most 2^28 pixels");
  }
  RgbImage image;
  image.width = width;
  image.height = height;
  image.pixels.resize(static_cast<size_t>(width) * static_cast<size_t>(height) * 3);
  if (tjDecompress2(handle.get(), bytes.data(), static_cast<unsigned long>(bytes.size()), image.pixels.data(), width,
                    0, height, TJPF_RGB, 0) != 0 &&
      tjGetErrorCode(handle.get()) == TJERR_FATAL) {
    // TJERR_WARNING (e.g. a few bytes of garbage after the image) decodes fully, as PIL accepts it too.
    throw DataError("cannot decode JPEG image '" + name + "': " + tjGetErrorStr2(handle.get()));
  }
  return image;
}

RgbImage decode_png(const std::vector<uint8_t>& bytes, const std::string& name) {
  png_image png;
  std::memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  if (png_image_begin_read_from_memory(&png, bytes.data(), bytes.size()) == 0) {
    throw DataError("cannot decode PNG image '" + name + "': " + png.message);
  }
  if (int64_t{png.width} * png.height > kMaxPixels) {
    png_image_free(&png);
    throw DataError("PNG image '" + name + "' claims " + std::to_string(png.width) + "x" + std::to_string(png.height) +
                    " pixels; expected at most 2^28 pixels");
  }
  // Alpha is dropped, not composed onto a background: what PIL's convert("RGB") does.
  png.format = PNG_FORMAT_RGB;
  RgbImage image;
  image.width = png.width;
  image.height = png.height;
  image.pixels.resize(PNG_IMAGE_SIZE(png));
  if (png_image_finish_read(&png, nullptr, image.pixels.data(), 0, nullptr) == 0) {
    const std::string message = png.message;
    png_image_free(&png);
    throw DataError("cannot decode PNG image '" + name + "': " + message);
  }
  return image;
}

}  // namespace

RgbImage decode_image(const std::vector<uint8_t>& bytes, const std::string& name) {
  if (is_jpeg(bytes)) return decode_jpeg(bytes, name);
  if (is_png(bytes)) return decode_png(bytes, name);
  throw DataError("'" + name + "' is neither a JPEG nor a PNG image (" +
                  (bytes.empty() ? std::string("the file is empty") : "its first bytes are not a JPEG or PNG signature") +
                  ")");
}

RgbImage decode_image_file(const std::string& path) {
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError("cannot read image '" + path + "': " + (errno != 0 ? std::strerror(errno) : "not readable"));
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw DataError("cannot read image '" + path + "': read error");
  return decode_image(bytes, path);
}

}  // namespace dtrain
