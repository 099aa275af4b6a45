#include "runtime/data/image_decode.h"

#include <png.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string_view>

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

void check_size(const char* kind, const std::string& name, int64_t width, int64_t height) {
  // Each side at most kMaxPixels first: a PNG header's 32-bit sides multiply past int64.
  if (width <= 0 || height <= 0 || width > kMaxPixels || height > kMaxPixels || width * height > kMaxPixels) {
    throw DataError(std::string(kind) + " image '" + name + "' claims " + std::to_string(width) + "x" +
                    std::to_string(height) + " pixels; expected a positive size of at most 2^28 pixels");
  }
}

[[noreturn]] void not_an_image(const std::string& name, bool empty) {
  throw DataError("'" + name + "' is neither a JPEG nor a PNG image (" +
                  (empty ? std::string("the file is empty") : "its first bytes are not a JPEG or PNG signature") + ")");
}

struct DecoderDeleter {
  void operator()(void* h) const { tjDestroy(h); }
};
using JpegDecoder = std::unique_ptr<void, DecoderDeleter>;

JpegDecoder jpeg_decoder() {
  JpegDecoder handle(tjInitDecompress());
  if (!handle) throw Error("cannot start the JPEG decoder: " + std::string(tjGetErrorStr2(nullptr)));
  return handle;
}

struct JpegHeader {
  int width = 0;
  int height = 0;
  int colorspace = 0;
};

// The frame header's facts, or nullopt where the bytes hold none (tjGetErrorStr2 says why).
std::optional<JpegHeader> jpeg_header(void* handle, const std::vector<uint8_t>& bytes) {
  JpegHeader header;
  int subsampling = 0;
  if (tjDecompressHeader3(handle, bytes.data(), static_cast<unsigned long>(bytes.size()), &header.width, &header.height,
                          &subsampling, &header.colorspace) != 0) {
    return std::nullopt;
  }
  return header;
}

// Whether the JPEG carries an Adobe APP14 marker, which (for CMYK and YCCK) means its CMYK values are
// stored inverted, as Photoshop and PIL write them. Walks the marker segments up to the scan.
bool has_adobe_marker(const std::vector<uint8_t>& b) {
  size_t at = 2;
  while (at + 4 <= b.size() && b[at] == 0xFF) {
    const uint8_t marker = b[at + 1];
    if (marker == 0xDA || marker == 0xD9) break;  // start of scan, end of image
    const size_t length = static_cast<size_t>(b[at + 2]) << 8 | b[at + 3];
    if (marker == 0xEE && length >= 7 && at + 9 <= b.size() && std::memcmp(&b[at + 4], "Adobe", 5) == 0) return true;
    at += 2 + length;
  }
  return false;
}

// CMYK to RGB as PIL's convert("RGB") does it (what torchvision's ImageFolder loader gives), so both read
// a CMYK JPEG alike: R = (255 - K) - C (255 - K) / 255 rounded as PIL rounds, on uninverted values.
void cmyk_to_rgb(const std::vector<uint8_t>& cmyk, bool inverted, std::vector<uint8_t>& rgb) {
  const auto muldiv255 = [](int a, int b) {
    const int t = a * b + 128;
    return ((t >> 8) + t) >> 8;
  };
  for (size_t i = 0, o = 0; i + 3 < cmyk.size(); i += 4, o += 3) {
    const int k = inverted ? 255 - cmyk[i + 3] : cmyk[i + 3];
    const int nk = 255 - k;
    for (int c = 0; c < 3; ++c) {
      const int ink = inverted ? 255 - cmyk[i + static_cast<size_t>(c)] : cmyk[i + static_cast<size_t>(c)];
      rgb[o + static_cast<size_t>(c)] = static_cast<uint8_t>(std::clamp(nk - muldiv255(ink, nk), 0, 255));
    }
  }
}

RgbImage decode_jpeg(const std::vector<uint8_t>& bytes, const std::string& name) {
  const JpegDecoder handle = jpeg_decoder();
  const std::optional<JpegHeader> header = jpeg_header(handle.get(), bytes);
  if (!header) throw DataError("cannot decode JPEG image '" + name + "': " + tjGetErrorStr2(handle.get()));
  check_size("JPEG", name, header->width, header->height);
  const int width = header->width;
  const int height = header->height;
  const int colorspace = header->colorspace;
  RgbImage image;
  image.width = width;
  image.height = height;
  const size_t pixels = static_cast<size_t>(width) * static_cast<size_t>(height);
  image.pixels.resize(pixels * 3);
  // CMYK and YCCK (print files; some of ImageNet's) decode to CMYK, which libjpeg-turbo does not turn into
  // RGB itself.
  const bool cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  std::vector<uint8_t> cmyk_pixels(cmyk ? pixels * 4 : 0);
  if (tjDecompress2(handle.get(), bytes.data(), static_cast<unsigned long>(bytes.size()),
                    cmyk ? cmyk_pixels.data() : image.pixels.data(), width, 0, height, cmyk ? TJPF_CMYK : TJPF_RGB,
                    0) != 0) {
    const std::string problem = tjGetErrorStr2(handle.get());
    if (tjGetErrorCode(handle.get()) == TJERR_FATAL) throw DataError("cannot decode JPEG image '" + name + "': " + problem);
    // Other warnings (a few bytes of garbage after the image) decode fully, as PIL accepts them too; a
    // file that ends early decodes as grey below the cut, which no model should train on.
    if (problem.find("Premature end of JPEG file") != std::string::npos) {
      throw DataError("JPEG image '" + name + "' is truncated (" + problem + ", " + std::to_string(bytes.size()) +
                      " bytes); the rows past the cut would train as grey");
    }
  }
  if (cmyk) cmyk_to_rgb(cmyk_pixels, has_adobe_marker(bytes), image.pixels);
  return image;
}

RgbImage decode_png(const std::vector<uint8_t>& bytes, const std::string& name) {
  png_image png;
  std::memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  if (png_image_begin_read_from_memory(&png, bytes.data(), bytes.size()) == 0) {
    throw DataError("cannot decode PNG image '" + name + "': " + png.message);
  }
  try {
    check_size("PNG", name, png.width, png.height);
  } catch (const DataError&) {
    png_image_free(&png);
    throw;
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
  not_an_image(name, bytes.empty());
}

namespace {

// Whether the file ends as a whole image does: a PNG with its IEND chunk, a JPEG with its end-of-image
// marker (FF D9; entropy-coded data never holds it, as an FF there is followed by 00 or a restart marker),
// both within the last `tail` bytes (writers may pad after them). A copy cut short ends without: found
// here, at start-up, instead of when a step reads it hours in.
void check_image_end(std::ifstream& in, const std::string& path, bool png) {
  constexpr std::streamoff kTail = 4096;
  in.clear();
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff from = std::max<std::streamoff>(0, size - kTail);
  std::vector<char> tail(static_cast<size_t>(size - from));
  in.seekg(from);
  in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  if (!in) throw DataError("cannot read image '" + path + "': read error at its end");
  const std::string_view end(tail.data(), tail.size());
  if (png ? end.find("IEND") == std::string_view::npos : end.find("\xff\xd9") == std::string_view::npos) {
    throw DataError("image '" + path + "' is cut short: it ends without " +
                    (png ? std::string("its IEND chunk") : std::string("its end-of-image marker (FF D9)")) +
                    " (an interrupted copy?), " + std::to_string(size) + " bytes");
  }
}

}  // namespace

ImageSize read_image_size(const std::string& path) {
  constexpr size_t kHead = 64 << 10;
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError("cannot read image '" + path + "': " + (errno != 0 ? std::strerror(errno) : "not readable"));
  std::vector<uint8_t> bytes(kHead);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(kHead));
  if (in.bad()) throw DataError("cannot read image '" + path + "': read error");
  bytes.resize(static_cast<size_t>(in.gcount()));
  if (is_png(bytes)) {
    // The IHDR chunk comes first: its width and height, big-endian, at bytes 16 and 20.
    if (bytes.size() < 24 || std::memcmp(&bytes[12], "IHDR", 4) != 0) {
      throw DataError("cannot decode PNG image '" + path + "': its header (IHDR) is missing or cut short");
    }
    const auto be32 = [&bytes](size_t at) {
      return int64_t{bytes[at]} << 24 | int64_t{bytes[at + 1]} << 16 | int64_t{bytes[at + 2]} << 8 | bytes[at + 3];
    };
    check_size("PNG", path, be32(16), be32(20));
    check_image_end(in, path, true);
    return ImageSize{be32(20), be32(16)};
  }
  if (!is_jpeg(bytes)) not_an_image(path, bytes.empty());
  const JpegDecoder handle = jpeg_decoder();
  std::optional<JpegHeader> header = jpeg_header(handle.get(), bytes);
  if (!header && bytes.size() == kHead) {
    // The frame header behind more than 64 KiB of metadata (a large EXIF thumbnail): read it all.
    bytes.insert(bytes.end(), std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (in.bad()) throw DataError("cannot read image '" + path + "': read error");
    header = jpeg_header(handle.get(), bytes);
  }
  if (!header) {
    // A copy cut inside its header (before the scan) is said as such rather than as the decoder's symptom.
    const std::string problem = tjGetErrorStr2(handle.get());
    check_image_end(in, path, false);
    throw DataError("cannot decode JPEG image '" + path + "': " + problem);
  }
  check_size("JPEG", path, header->width, header->height);
  check_image_end(in, path, false);
  return ImageSize{header->height, header->width};
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
