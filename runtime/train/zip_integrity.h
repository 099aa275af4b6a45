// Whether a checkpoint file is whole, before LibTorch reads it. A checkpoint is a zip archive (LibTorch's
// PyTorchStreamWriter: every record stored uncompressed, with its CRC-32 in the central directory), and
// LibTorch 1.13's reader checks neither the CRCs nor that a record lies inside the file: a bit flipped in
// a tensor loads silently, and a truncated file fails with messages about missing fields. This reads
// the zip structure itself (end of central directory, ZIP64 included; every entry's local header and
// data inside the file) and recomputes each stored record's CRC-32 with zlib, at memory speed.
//
// Written here rather than taken from a zip library: the format's integrity part is about a hundred
// lines, LibTorch's own zip reader (miniz) is not exported, and libzip would add a dependency to every
// image for this one check.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain {

// "" when `bytes` is a zip archive whose every entry lies inside it and whose stored entries match their
// CRC-32; else what is wrong, e.g. "it has no end of central directory (truncated, or not a zip archive)"
// or "record 'archive/data/12' fails its CRC-32 check (stored 8c1f0e2a, computed 0b9d77c1)".
std::string zip_damage(std::string_view bytes);

// A record of the archive: its name and stored size.
struct ZipRecord {
  std::string name;
  uint64_t size = 0;
};
// The records of an archive whose structure is whole, in the central directory's order; empty when
// it is not. CRCs are not checked (zip_damage does that): for an archive zip_damage has passed.
std::vector<ZipRecord> zip_records(std::string_view bytes);

}  // namespace dtrain
