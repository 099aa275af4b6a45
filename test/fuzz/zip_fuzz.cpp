// The zip check of checkpoints, on raw bytes: it must never read outside them, and what it passes must
// list its records, each no larger than the file.
#include <cstdlib>

#include "runtime/train/zip_integrity.h"
#include "test/fuzz/fuzz_target.h"

namespace dtrain::fuzz::zip_target {
namespace {

// The checkpoint target's seeds are checkpoints (zip archives written by LibTorch); a small archive of
// two records written here, by hand, covers the format's own fields.
void write_seeds(const std::string& dir) {
  // "a" holding "hi" and "b" holding "" (CRC-32 of "hi": 0xd8932aac), stored, with a central directory.
  auto le = [](uint64_t v, int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    return s;
  };
  std::string zip, directory;
  const struct { const char* name; std::string data; uint32_t crc; } records[] = {{"a", "hi", 0xd8932aacu}, {"b", "", 0u}};
  for (const auto& r : records) {
    const size_t offset = zip.size();
    zip += le(0x04034b50, 4) + le(20, 2) + le(0, 2) + le(0, 2) + le(0, 4) + le(r.crc, 4) + le(r.data.size(), 4) +
           le(r.data.size(), 4) + le(1, 2) + le(0, 2) + r.name + r.data;
    directory += le(0x02014b50, 4) + le(20, 2) + le(20, 2) + le(0, 2) + le(0, 2) + le(0, 4) + le(r.crc, 4) +
                 le(r.data.size(), 4) + le(r.data.size(), 4) + le(1, 2) + le(0, 2) + le(0, 2) + le(0, 2) + le(0, 2) +
                 le(0, 4) + le(offset, 4) + r.name;
  }
  const size_t at = zip.size();
  zip += directory + le(0x06054b50, 4) + le(0, 2) + le(0, 2) + le(2, 2) + le(2, 2) + le(directory.size(), 4) + le(at, 4) + le(0, 2);
  write_bytes(dir + "/two-records.zip", zip);
}

int test_one_input(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // Neither may read outside `bytes` (AddressSanitizer watches), and every record listed lies inside.
  (void)dtrain::zip_damage(bytes);
  const std::vector<dtrain::ZipRecord> records = dtrain::zip_records(bytes);
  for (const dtrain::ZipRecord& r : records) {
    if (r.size > size) std::abort();
  }
  return 0;
}

}  // namespace
}  // namespace dtrain::fuzz::zip_target

DTRAIN_FUZZ_TARGET(zip, dtrain::fuzz::zip_target::write_seeds, dtrain::fuzz::zip_target::test_one_input)
