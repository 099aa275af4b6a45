#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "test/fuzz/fuzz_target.h"

namespace dtrain::fuzz {

std::vector<Target>& targets() {
  static std::vector<Target> all;
  return all;
}

const std::string& scratch_dir() {
  static const std::string dir = [] {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/dtrain-fuzz-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("cannot make a scratch directory " + pattern);
    static const std::string removed = pattern;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(removed, ec);
    });
    return pattern;
  }();
  return dir;
}

void refused(const std::exception& error) {
  static const bool verbose = std::getenv("DTRAIN_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "  refused: %s\n", error.what());
}

void write_bytes(const std::string& path, const void* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error("cannot write " + path);
  const bool whole = size == 0 || std::fwrite(data, 1, size, f) == size;
  if (std::fclose(f) != 0 || !whole) throw std::runtime_error("cannot write " + path);
}

}  // namespace dtrain::fuzz
