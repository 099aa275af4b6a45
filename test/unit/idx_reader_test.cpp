#include "test/support/catch.h"

#include <ATen/ATen.h>
#include <zlib.h>

#include <fstream>
#include <vector>

#include "runtime/data/idx_reader.h"
#include "runtime/util/error.h"
#include "test/support/temp_dir.h"

using namespace dtrain;
using Catch::Matchers::Contains;

namespace {

std::vector<unsigned char> idx_bytes(std::vector<uint32_t> dims, size_t payload, unsigned char type = 0x08) {
  std::vector<unsigned char> bytes{0, 0, type, static_cast<unsigned char>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<unsigned char>(d >> shift));
  }
  for (size_t i = 0; i < payload; ++i) bytes.push_back(static_cast<unsigned char>(i % 251));
  return bytes;
}

void write_plain(const std::string& path, const std::vector<unsigned char>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

void write_gz(const std::string& path, const std::vector<unsigned char>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

std::string error_of(const std::string& path, int dims) {
  try {
    read_idx_file(path, dims);
  } catch (const DataError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("IDX files load with their shape, plain and gzip", "[data]") {
  test::TempDir dir;
  const auto bytes = idx_bytes({3, 4, 5}, 60);
  write_plain(dir.file("images"), bytes);
  write_gz(dir.file("images.gz"), bytes);
  for (const std::string name : {"images", "images.gz"}) {
    const at::Tensor t = read_idx_file(dir.file(name), 3);
    CHECK(t.sizes() == at::IntArrayRef({3, 4, 5}));
    CHECK(t.scalar_type() == at::kByte);
    CHECK(t.flatten()[59].item<int>() == 59);
  }
}

TEST_CASE("broken IDX files are errors naming the file and the problem", "[data]") {
  test::TempDir dir;
  const std::string path = dir.file("bad-idx3-ubyte");

  CHECK_THAT(error_of(dir.file("missing"), 3), Contains("cannot open IDX file '" + dir.file("missing") + "'"));

  auto truncated = idx_bytes({10, 28, 28}, 10 * 28 * 28);
  truncated.resize(truncated.size() - 100);
  write_plain(path, truncated);
  CHECK_THAT(error_of(path, 3), Contains("'" + path + "' is truncated: header promises 7840 data bytes, file has 7740"));

  write_gz(path + ".gz", truncated);
  CHECK_THAT(error_of(path + ".gz", 3), Contains("truncated"));

  auto cut_gz_source = idx_bytes({10, 28, 28}, 10 * 28 * 28);
  write_gz(path + ".cut.gz", cut_gz_source);
  {
    std::ifstream in(path + ".cut.gz", std::ios::binary);
    std::vector<char> gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    gz.resize(gz.size() / 2);
    std::ofstream(path + ".cut.gz", std::ios::binary).write(gz.data(), static_cast<std::streamsize>(gz.size()));
  }
  CHECK_THAT(error_of(path + ".cut.gz", 3), Contains("truncated"));

  write_plain(path, {0x1f, 0x00, 0x08, 0x03, 0, 0, 0, 1});
  CHECK_THAT(error_of(path, 3), Contains("is not an IDX file: magic number 0x1f000803, expected 0x00000803"));

  write_plain(path, idx_bytes({10}, 10, 0x0d));
  CHECK_THAT(error_of(path, 1), Contains("has element type 0x0d, expected 0x08 (unsigned byte)"));

  write_plain(path, idx_bytes({0xffffffff, 0xffffffff, 0xffffffff}, 4));
  CHECK_THAT(error_of(path, 3), Contains("dimensions multiply beyond any file size"));

  write_plain(path, idx_bytes({10}, 10));
  CHECK_THAT(error_of(path, 3), Contains("has 1 dimensions, expected 3"));

  write_plain(path, {0, 0, 8});
  CHECK_THAT(error_of(path, 1), Contains("shorter than the 4-byte magic number"));

  write_plain(path, idx_bytes({2, 2}, 4, 0x08));
  auto header_only = idx_bytes({2, 2}, 0);
  header_only.resize(6);
  write_plain(path, header_only);
  CHECK_THAT(error_of(path, 2), Contains("header needs 12 bytes, file has 6"));

  write_plain(path, idx_bytes({2}, 5));
  CHECK_THAT(error_of(path, 1), Contains("longer than its header says"));
}
