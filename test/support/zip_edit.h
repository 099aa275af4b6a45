// Edits of a checkpoint's zip archive in place, as someone crafting a damaged file would make them: the
// CRC-32 of every record recomputed (so that the zip check passes and the bytes reach LibTorch's reader),
// and a record's recorded size made smaller (its tail left as a gap the archive no longer names).
// Archives without ZIP64 fields only (what LibTorch writes below 4 GiB). Test code: header-only.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <string>

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
template <typename Which>
void recompute_zip_crcs(std::string& z, Which which) {
  zip_detail::for_each_entry(z, [&](size_t cd, size_t local, size_t data, uint32_t size, const std::string& name) {
    if (data + size > z.size() || size == 0xffffffffu || !which(name)) return;
    const auto crc = static_cast<uint32_t>(
        crc32(0L, reinterpret_cast<const Bytef*>(z.data() + data), static_cast<uInt>(size)));
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

}  // namespace dtrain::test
