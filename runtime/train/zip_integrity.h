// Whether a checkpoint file is whole, before LibTorch reads it. A checkpoint is a zip archive (LibTorch's
// PyTorchStreamWriter: tensors stored as they are, a few small code records deflated, every record's
// CRC-32 in the central directory), and
// LibTorch 1.13's reader checks neither the CRCs nor that a record lies inside the file: a bit flipped in
// a tensor loads silently, and a truncated file fails with messages about missing fields. This reads
// the zip structure itself (end of central directory, ZIP64 included; every entry's local header and
// data inside the file) and recomputes each record's CRC-32 with zlib, at memory speed (the few small
// records LibTorch deflates are inflated for it).
//
// Written here rather than taken from a zip library: the format's integrity part is about a hundred
// lines, LibTorch's own zip reader (miniz) is not exported, and libzip would add a dependency to every
// image for this one check.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain {

// "" when `bytes` is a zip archive whose every entry lies inside it and whose stored entries match their
// CRC-32; else what is wrong, e.g. "it has no end of central directory (truncated, or not a zip archive)"
// or "record 'archive/data/12' fails its CRC-32 check (stored 8c1f0e2a, computed 0b9d77c1)".
std::string zip_damage(std::string_view bytes);

// The most bytes at the end of an archive that zip_end_problem() needs: the end of central directory
// record with the longest comment, and the ZIP64 locator before it.
constexpr uint64_t kZipTailBytes = 22 + 0xffff + 20;

// "" when `tail`, the last min(file_size, kZipTailBytes) bytes of a file of `file_size` bytes, holds an
// end of central directory record whose directory lies inside the file; else what is wrong, as
// zip_damage() says it. For refusing a file that cannot be an archive (a sparse file of zeros, another
// format) before reading it whole.
std::string zip_end_problem(std::string_view tail, uint64_t file_size);

// A record of the archive, as its central directory describes it.
struct ZipRecord {
  std::string name;
  uint64_t size = 0;           // bytes it takes in the file
  uint64_t offset = 0;         // where they begin
  uint64_t unpacked_size = 0;  // bytes of its content (size, unless deflated)
  uint32_t crc = 0;            // CRC-32 of its content
  bool deflated = false;       // stored with deflate (LibTorch compresses some small records); else as is
};
// The records of an archive whose structure is whole, in the central directory's order; empty when
// it is not. CRCs are not checked (zip_damage does that): for an archive zip_damage has passed.
std::vector<ZipRecord> zip_records(std::string_view bytes);

// The content of `record` of `bytes` (an archive zip_records listed it from): its bytes as stored, or
// inflated. nullopt when its content is larger than `max_bytes`, or does not inflate to exactly
// record.unpacked_size bytes.
std::optional<std::string> zip_contents(std::string_view bytes, const ZipRecord& record, uint64_t max_bytes);

}  // namespace dtrain
