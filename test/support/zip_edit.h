// Edits of a checkpoint's zip archive, as someone crafting a file would make them: the CRC-32 of every
// record recomputed (so that the zip check passes and the bytes reach LibTorch's reader), a record's
// recorded size made smaller (its tail left as a gap the archive no longer names), and the archive
// rebuilt from its records' contents with every record stored as it is (LibTorch reads it alike, and a
// change to a code record is then a change to its text). Archives without ZIP64 fields only (what
// LibTorch writes below 4 GiB). Test code: header-only.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <string>

#include "runtime/train/zip_integrity.h"

namespace dtrain::test {

namespace zip_detail {

inline uint32_t get32(const std::string& z, size_t at) {
  if (at + 4 > z.size()) return 0;
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(z[at + static_cast<size_t>(i)]);
  return v;
}
inline uint16_t get16(const std::string& z, size_t at) {
  if (at + 2 > z.size()) return 0;
  return static_cast<uint16_t>(static_cast<uint8_t>(z[at]) | (static_cast<uint8_t>(z[at + 1]) << 8));
}
inline void put32(std::string& z, size_t at, uint32_t v) {
  if (at + 4 > z.size()) return;
  for (int i = 0; i < 4; ++i) z[at + static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
}

// Calls f(central_entry_offset, local_header_offset, data_offset, size, name) for each entry whose
// headers lie inside `z`; stops at the first that does not.
template <typename F>
void for_each_entry(const std::string& z, F f) {
  if (z.size() < 22) return;
  size_t eocd = std::string::npos;
  for (size_t at = z.size() - 22;; --at) {
    if (get32(z, at) == 0x06054b50) { eocd = at; break; }
    if (at == 0 || z.size() - at > 22 + 65535) break;
  }
  if (eocd == std::string::npos) return;
  const uint16_t entries = get16(z, eocd + 10);
  size_t cd = get32(z, eocd + 16);
  for (uint16_t i = 0; i < entries; ++i) {
    if (cd + 46 > z.size() || get32(z, cd) != 0x02014b50) return;
    const uint32_t size = get32(z, cd + 20);
    const size_t name_len = get16(z, cd + 28);
    const size_t next = cd + 46 + name_len + get16(z, cd + 30) + get16(z, cd + 32);
    const size_t local = get32(z, cd + 42);
    if (local + 30 > z.size() || get32(z, local) != 0x04034b50 || next > z.size()) return;
    const size_t data = local + 30 + get16(z, local + 26) + get16(z, local + 28);
    f(cd, local, data, size, z.substr(cd + 46, name_len));
    cd = next;
  }
}

}  // namespace zip_detail

// Recomputes the CRC-32 of every record (or of those `which` names) in its local header and in the
// central directory, from its bytes.
// (A deflated record's CRC-32 is that of its inflated content; one that no longer inflates keeps its CRC.)
template <typename Which>
void recompute_zip_crcs(std::string& z, Which which) {
  zip_detail::for_each_entry(z, [&](size_t cd, size_t local, size_t data, uint32_t size, const std::string& name) {
    if (data + size > z.size() || size == 0xffffffffu || !which(name)) return;
    std::string content = z.substr(data, size);
    if (zip_detail::get16(z, cd + 10) == 8) {
      const uint32_t unpacked = zip_detail::get32(z, cd + 24);
      if (unpacked > (64u << 20)) return;
      std::string out(unpacked, '\0');
      z_stream stream{};
      if (inflateInit2(&stream, -MAX_WBITS) != Z_OK) return;
      stream.next_in = reinterpret_cast<Bytef*>(content.data());
      stream.avail_in = static_cast<uInt>(content.size());
      stream.next_out = reinterpret_cast<Bytef*>(out.data());
      stream.avail_out = static_cast<uInt>(out.size());
      const bool whole = inflate(&stream, Z_FINISH) == Z_STREAM_END && stream.total_out == unpacked;
      inflateEnd(&stream);
      if (!whole) return;
      content = std::move(out);
    }
    const auto crc = static_cast<uint32_t>(
        crc32(0L, reinterpret_cast<const Bytef*>(content.data()), static_cast<uInt>(content.size())));
    zip_detail::put32(z, cd + 16, crc);
    zip_detail::put32(z, local + 14, crc);
  });
}
inline void recompute_zip_crcs(std::string& z) {
  recompute_zip_crcs(z, [](const std::string&) { return true; });
}

// Makes the record whose name ends in `suffix` `shorter_by` bytes shorter in both headers, then
// recomputes the CRCs. Returns false when no record of that name is long enough.
inline bool shorten_zip_record(std::string& z, const std::string& suffix, uint32_t shorter_by) {
  bool done = false;
  zip_detail::for_each_entry(z, [&](size_t cd, size_t local, size_t, uint32_t size, const std::string& name) {
    if (done || size < shorter_by || name.size() < suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      return;
    }
    for (const size_t at : {cd + 20, cd + 24}) zip_detail::put32(z, at, size - shorter_by);
    for (const size_t at : {local + 18, local + 22}) zip_detail::put32(z, at, size - shorter_by);
    done = true;
  });
  if (done) recompute_zip_crcs(z);
  return done;
}

// An archive's records, by name, as their contents (deflated ones inflated).
using ZipContents = std::map<std::string, std::string>;

inline ZipContents zip_contents_of(const std::string& zip) {
  ZipContents records;
  for (const ZipRecord& r : zip_records(zip)) {
    if (const std::optional<std::string> content = zip_contents(zip, r, uint64_t{1} << 30)) records[r.name] = *content;
  }
  return records;
}

// A zip archive of `records`, every one stored as it is, with its CRC-32.
inline std::string stored_zip(const ZipContents& records) {
  const auto le = [](uint64_t value, int bytes) {
    std::string out;
    for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
    return out;
  };
  std::string zip;
  std::string directory;
  for (const auto& [name, data] : records) {
    const auto crc = static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
    const size_t offset = zip.size();
    zip += le(0x04034b50, 4) + le(20, 2) + le(0, 2) + le(0, 2) + le(0, 4) + le(crc, 4) + le(data.size(), 4) +
           le(data.size(), 4) + le(name.size(), 2) + le(0, 2) + name + data;
    directory += le(0x02014b50, 4) + le(20, 2) + le(20, 2) + le(0, 2) + le(0, 2) + le(0, 4) + le(crc, 4) +
                 le(data.size(), 4) + le(data.size(), 4) + le(name.size(), 2) + le(0, 2) + le(0, 2) + le(0, 2) +
                 le(0, 2) + le(0, 4) + le(offset, 4) + name;
  }
  const size_t at = zip.size();
  zip += directory + le(0x06054b50, 4) + le(0, 2) + le(0, 2) + le(records.size(), 2) + le(records.size(), 2) +
         le(directory.size(), 4) + le(at, 4) + le(0, 2);
  return zip;
}

}  // namespace dtrain::test
