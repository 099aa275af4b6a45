#include "runtime/train/zip_integrity.h"

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <vector>

namespace dtrain {
namespace {

constexpr uint32_t kEndOfDirectory = 0x06054b50;
constexpr uint32_t kZip64End = 0x06064b50;
constexpr uint32_t kZip64Locator = 0x07064b50;
constexpr uint32_t kDirectoryEntry = 0x02014b50;
constexpr uint32_t kLocalHeader = 0x04034b50;
constexpr size_t kEndSize = 22;
constexpr size_t kMaxComment = 0xffff;

// Little-endian reads that fail (nullopt) past the end instead of reading it.
struct Reader {
  std::string_view bytes;
  std::optional<uint64_t> read(uint64_t at, int width) const {
    if (at > bytes.size() || bytes.size() - at < static_cast<uint64_t>(width)) return std::nullopt;
    uint64_t value = 0;
    for (int i = width - 1; i >= 0; --i) value = value << 8 | static_cast<unsigned char>(bytes[at + static_cast<uint64_t>(i)]);
    return value;
  }
};

std::string hex(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof text, "%08x", value);
  return text;
}

uint32_t crc_of(std::string_view data) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib takes lengths as uInt: feed records of more than 4 GiB in pieces.
  constexpr size_t kPiece = size_t{1} << 30;
  for (size_t at = 0; at < data.size(); at += kPiece) {
    const size_t n = std::min(kPiece, data.size() - at);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data.data() + at), static_cast<uInt>(n));
  }
  return static_cast<uint32_t>(crc);
}

// Deflated records are inflated for their CRC-32 up to this size: LibTorch deflates only small code
// records (a few KiB); a larger one is left to the archive check, which refuses it.
constexpr uint64_t kMaxInflatedForCrc = uint64_t{64} << 20;

std::optional<std::string> inflate_record(std::string_view packed, uint64_t unpacked_size) {
  std::string out(unpacked_size, '\0');
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) return std::nullopt;  // raw deflate, as zip stores it
  // zlib counts in uInt: a record larger than 4 GiB is never inflated (kMaxInflatedForCrc and the
  // callers' limits are far below).
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(packed.data()));
  z.avail_in = static_cast<uInt>(std::min<uint64_t>(packed.size(), UINT32_MAX));
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(unpacked_size);
  const int status = inflate(&z, Z_FINISH);
  const bool whole = status == Z_STREAM_END && z.total_out == unpacked_size;
  inflateEnd(&z);
  if (!whole) return std::nullopt;
  return out;
}

// Where the end of central directory record of `bytes` begins, if it has one: in its last 22 bytes, or
// further back by the length of a comment that ends the file.
std::optional<uint64_t> end_record(std::string_view bytes) {
  const Reader in{bytes};
  if (bytes.size() < kEndSize) return std::nullopt;
  const uint64_t last = bytes.size() - kEndSize;
  const uint64_t first = last > kMaxComment ? last - kMaxComment : 0;
  for (uint64_t at = last + 1; at-- > first;) {
    if (in.read(at, 4) == kEndOfDirectory && *in.read(at + 20, 2) == bytes.size() - at - kEndSize) return at;
  }
  return std::nullopt;
}

std::string check_zip(std::string_view bytes, bool check_crcs, std::vector<ZipRecord>* records) {
  if (bytes.empty()) return "it is empty";
  const Reader in{bytes};
  const std::optional<uint64_t> end = end_record(bytes);
  if (!end) return "it has no end of central directory (truncated, or not a zip archive)";
  uint64_t entries = *in.read(*end + 10, 2);
  uint64_t directory_size = *in.read(*end + 12, 4);
  uint64_t directory = *in.read(*end + 16, 4);
  if (entries == 0xffff || directory_size == 0xffffffff || directory == 0xffffffff) {
    // ZIP64: the locator just before the end record points at the 64-bit end record.
    const std::optional<uint64_t> locator = *end >= 20 ? in.read(*end - 20, 4) : std::nullopt;
    if (locator != kZip64Locator) return "its ZIP64 end of central directory locator is missing";
    const std::optional<uint64_t> zip64 = in.read(*end - 20 + 8, 8);
    if (!zip64 || in.read(*zip64, 4) != kZip64End) return "its ZIP64 end of central directory is missing";
    const auto e = in.read(*zip64 + 32, 8), s = in.read(*zip64 + 40, 8), o = in.read(*zip64 + 48, 8);
    if (!e || !s || !o) return "its ZIP64 end of central directory is cut short";
    entries = *e;
    directory_size = *s;
    directory = *o;
  }
  if (directory > bytes.size() || directory_size > bytes.size() - directory) {
    return "its central directory (" + std::to_string(directory_size) + " bytes at " + std::to_string(directory) +
           ") lies outside its " + std::to_string(bytes.size()) + " bytes (truncated?)";
  }
  uint64_t at = directory;
  for (uint64_t i = 0; i < entries; ++i) {
    if (in.read(at, 4) != kDirectoryEntry) return "central directory entry " + std::to_string(i + 1) + " is damaged";
    const auto method = in.read(at + 10, 2), crc = in.read(at + 16, 4), packed32 = in.read(at + 20, 4),
               name_length = in.read(at + 28, 2), extra_length = in.read(at + 30, 2), comment_length = in.read(at + 32, 2),
               local32 = in.read(at + 42, 4);
    if (!method || !crc || !packed32 || !name_length || !extra_length || !comment_length || !local32 ||
        at + 46 + *name_length + *extra_length > directory + directory_size) {
      return "central directory entry " + std::to_string(i + 1) + " is cut short";
    }
    const std::string name(bytes.substr(at + 46, *name_length));
    uint64_t packed = *packed32;
    uint64_t local = *local32;
    // The ZIP64 extra field holds the 64-bit values of the fields that are 0xffffffff, in this order:
    // uncompressed size, compressed size, local header offset.
    const uint64_t unpacked32 = *in.read(at + 24, 4);
    for (uint64_t x = at + 46 + *name_length; x + 4 <= at + 46 + *name_length + *extra_length;) {
      const uint64_t id = *in.read(x, 2);
      const uint64_t size = *in.read(x + 2, 2);
      if (id == 0x0001) {
        uint64_t field = x + 4;
        if (unpacked32 == 0xffffffff) field += 8;
        if (packed32 == 0xffffffff) packed = in.read(field, 8).value_or(~uint64_t{0}), field += 8;
        if (local32 == 0xffffffff) local = in.read(field, 8).value_or(~uint64_t{0});
      }
      x += 4 + size;
    }
    if (in.read(local, 4) != kLocalHeader) return "record '" + name + "' has no local header where the directory says";
    const auto local_name = in.read(local + 26, 2), local_extra = in.read(local + 28, 2);
    if (!local_name || !local_extra) return "record '" + name + "' is cut short";
    const uint64_t data = local + 30 + *local_name + *local_extra;
    if (data > bytes.size() || packed > bytes.size() - data) {
      return "record '" + name + "' (" + std::to_string(packed) + " bytes) runs past the end of the file (truncated?)";
    }
    uint64_t unpacked = unpacked32;
    if (*method == 0) {
      unpacked = packed;
    } else if (*method != 8) {
      return "record '" + name + "' is stored with compression method " + std::to_string(*method) +
             ", which LibTorch does not read (only stored and deflated records)";
    } else if (unpacked32 == 0xffffffff) {
      return "record '" + name + "' is deflated to more than 4 GiB, which LibTorch never writes";
    }
    if (records) records->push_back({name, packed, data, unpacked, static_cast<uint32_t>(*crc), *method == 8});
    if (check_crcs && (*method == 0 || unpacked <= kMaxInflatedForCrc)) {
      std::optional<std::string> inflated;
      if (*method == 8) {
        inflated = inflate_record(bytes.substr(data, packed), unpacked);
        if (!inflated) return "record '" + name + "' does not inflate to its " + std::to_string(unpacked) + " bytes";
      }
      const uint32_t computed = crc_of(inflated ? std::string_view(*inflated) : bytes.substr(data, packed));
      if (computed != *crc) {
        return "record '" + name + "' fails its CRC-32 check (stored " + hex(static_cast<uint32_t>(*crc)) + ", computed " +
               hex(computed) + ")";
      }
    }
    at += 46 + *name_length + *extra_length + *comment_length;
  }
  return "";
}

}  // namespace

std::string zip_end_problem(std::string_view tail, uint64_t file_size) {
  if (file_size == 0) return "it is empty";
  if (tail.size() > file_size) return "it is shorter than its own end";
  const std::optional<uint64_t> end = end_record(tail);
  if (!end) return "it has no end of central directory (truncated, or not a zip archive)";
  const Reader in{tail};
  const uint64_t tail_start = file_size - tail.size();  // where `tail` begins in the file
  const uint64_t end_at = tail_start + *end;
  const uint64_t directory_size = *in.read(*end + 12, 4);
  const uint64_t directory = *in.read(*end + 16, 4);
  if (directory_size == 0xffffffff || directory == 0xffffffff || *in.read(*end + 10, 2) == 0xffff) {
    // ZIP64: its locator must sit just before the end record, pointing inside the file.
    const std::optional<uint64_t> locator = *end >= 20 ? in.read(*end - 20, 4) : std::nullopt;
    if (locator != kZip64Locator) return "its ZIP64 end of central directory locator is missing";
    const std::optional<uint64_t> zip64 = in.read(*end - 20 + 8, 8);
    if (!zip64 || *zip64 >= end_at) return "its ZIP64 end of central directory lies outside it";
    return "";
  }
  if (directory > end_at || directory_size > end_at - directory) {
    return "its central directory (" + std::to_string(directory_size) + " bytes at " + std::to_string(directory) +
           ") lies outside its " + std::to_string(file_size) + " bytes (truncated?)";
  }
  return "";
}

std::string zip_damage(std::string_view bytes) { return check_zip(bytes, true, nullptr); }

std::vector<ZipRecord> zip_records(std::string_view bytes) {
  std::vector<ZipRecord> records;
  if (!check_zip(bytes, false, &records).empty()) records.clear();
  return records;
}

std::optional<std::string> zip_contents(std::string_view bytes, const ZipRecord& record, uint64_t max_bytes) {
  if (record.unpacked_size > max_bytes || record.offset > bytes.size() || record.size > bytes.size() - record.offset) {
    return std::nullopt;
  }
  const std::string_view packed = bytes.substr(record.offset, record.size);
  if (!record.deflated) return std::string(packed);
  return inflate_record(packed, record.unpacked_size);
}

}  // namespace dtrain
