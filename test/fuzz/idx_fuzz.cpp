// IDX files (MNIST, Fashion-MNIST): the first byte picks the dimension count the reader expects (1 to 4)
// and whether the file is gzip-compressed (.gz); the rest is the file.
#include <zlib.h>

#include <ATen/ATen.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <vector>

#include "runtime/data/idx_reader.h"
#include "runtime/util/error.h"
#include "test/fuzz/fuzz_target.h"

namespace dtrain::fuzz::idx_target {
namespace {

std::string idx(uint8_t dims, const std::vector<uint32_t>& extents) {
  std::string bytes{'\0', '\0', '\x08', static_cast<char>(dims)};
  uint64_t payload = 1;
  for (const uint32_t e : extents) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<char>((e >> shift) & 0xff));
    payload *= e;
  }
  for (uint64_t i = 0; i < payload; ++i) bytes.push_back(static_cast<char>(i * 37 % 256));
  return bytes;
}

void write_seeds(const std::string& dir) {
  // Selector bytes: (dims - 1) | 4 for gzip.
  write_bytes(dir + "/images", std::string(1, '\x02') + idx(3, {3, 4, 5}));
  write_bytes(dir + "/labels", std::string(1, '\x00') + idx(1, {7}));
  write_bytes(dir + "/zero-extent", std::string(1, '\x02') + idx(3, {0, 28, 28}));
  const std::string plain = idx(3, {2, 3, 3});
  const std::string gz_path = dir + "/images.gz.tmp";
  gzFile gz = gzopen(gz_path.c_str(), "wb");
  if (gz == nullptr) throw std::runtime_error("cannot write " + gz_path);
  gzwrite(gz, plain.data(), static_cast<unsigned>(plain.size()));
  gzclose(gz);
  std::ifstream in(gz_path, std::ios::binary);
  const std::string packed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(gz_path.c_str());
  write_bytes(dir + "/images-gz", std::string(1, '\x06') + packed);
}

int test_one_input(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int dims = 1 + (data[0] & 3);
  const std::string path = dtrain::fuzz::scratch_dir() + ((data[0] & 4) ? "/input.idx.gz" : "/input.idx");
  dtrain::fuzz::write_bytes(path, data + 1, size - 1);
  try {
    const at::Tensor t = dtrain::read_idx_file(path, dims);
    if (t.dim() != dims || t.scalar_type() != at::kByte) std::abort();  // the reader's promise
    if (t.numel() > 0) (void)t.sum().item<int64_t>();                   // every byte is read
  } catch (const dtrain::DataError& e) {
    dtrain::fuzz::refused(e);
  }
  return 0;
}

}  // namespace
}  // namespace dtrain::fuzz::idx_target

DTRAIN_FUZZ_TARGET(idx, dtrain::fuzz::idx_target::write_seeds, dtrain::fuzz::idx_target::test_one_input)
