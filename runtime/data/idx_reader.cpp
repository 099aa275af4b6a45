#include "runtime/data/idx_reader.h"

#include <ATen/ATen.h>
#include <zlib.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <vector>

#include "runtime/util/error.h"

namespace dtrain {
namespace {

// Whole-file read through zlib, which reads plain files unchanged and inflates gzip ones.
std::vector<unsigned char> read_all(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) throw DataError("cannot open IDX file '" + path + "': " + std::strerror(errno));
  std::vector<unsigned char> bytes;
  std::array<unsigned char, 1 << 16> chunk{};
  for (;;) {
    const int n = gzread(file, chunk.data(), static_cast<unsigned>(chunk.size()));
    if (n < 0) {
      int code = 0;
      const std::string message = gzerror(file, &code);
      gzclose(file);
      throw DataError("cannot read IDX file '" + path + "': " + message + " (corrupt or truncated gzip data)");
    }
    if (n == 0) break;
    bytes.insert(bytes.end(), chunk.begin(), chunk.begin() + n);
  }
  // gzread stops quietly at a truncated gzip member; gzclose_r reports it.
  const int close_rc = gzclose(file);
  if (close_rc != Z_OK && close_rc != Z_BUF_ERROR) {
    throw DataError("cannot read IDX file '" + path + "': gzip stream is corrupt");
  }
  if (close_rc == Z_BUF_ERROR) throw DataError("IDX file '" + path + "' is truncated (gzip stream ends early)");
  return bytes;
}

uint32_t big_endian_u32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

at::Tensor read_idx_file(const std::string& path, int expected_dims) {
  const std::vector<unsigned char> bytes = read_all(path);
  if (bytes.size() < 4) {
    throw DataError("IDX file '" + path + "' is truncated: " + std::to_string(bytes.size()) +
                    " bytes, shorter than the 4-byte magic number");
  }
  // Magic: two zero bytes, a type code (0x08 = unsigned byte), the number of dimensions.
  if (bytes[0] != 0 || bytes[1] != 0) {
    char magic[16];
    std::snprintf(magic, sizeof magic, "0x%02x%02x%02x%02x", bytes[0], bytes[1], bytes[2], bytes[3]);
    throw DataError("'" + path + "' is not an IDX file: magic number " + magic + ", expected 0x0000080" +
                    std::to_string(expected_dims));
  }
  if (bytes[2] != 0x08) {
    char type[8];
    std::snprintf(type, sizeof type, "0x%02x", bytes[2]);
    throw DataError("IDX file '" + path + "' has element type " + type + ", expected 0x08 (unsigned byte)");
  }
  const int dims = bytes[3];
  if (dims != expected_dims) {
    throw DataError("IDX file '" + path + "' has " + std::to_string(dims) + " dimensions, expected " +
                    std::to_string(expected_dims));
  }
  const size_t header = 4 + 4 * static_cast<size_t>(dims);
  if (bytes.size() < header) {
    throw DataError("IDX file '" + path + "' is truncated: header needs " + std::to_string(header) + " bytes, file has " +
                    std::to_string(bytes.size()));
  }
  std::vector<int64_t> shape;
  size_t payload = 1;
  for (int d = 0; d < dims; ++d) {
    const uint32_t extent = big_endian_u32(bytes.data() + 4 + 4 * d);
    shape.push_back(extent);
    if (__builtin_mul_overflow(payload, size_t{extent}, &payload)) {
      throw DataError("IDX file '" + path + "' has a header whose dimensions multiply beyond any file size");
    }
  }
  const size_t actual = bytes.size() - header;
  if (actual != payload) {
    throw DataError("IDX file '" + path + "' is " + (actual < payload ? "truncated" : "longer than its header says") +
                    ": header promises " + std::to_string(payload) + " data bytes, file has " + std::to_string(actual));
  }
  at::Tensor tensor = at::empty(shape, at::kByte);
  // A zero extent leaves no data and an empty tensor, whose data pointer (null) memcpy must not be given.
  if (payload > 0) std::memcpy(tensor.data_ptr(), bytes.data() + header, payload);
  return tensor;
}

}  // namespace dtrain
