// The replay driver: runs a fuzz target as libFuzzer runs one input, over every file named and every
// file of the directories named (sorted, so that a failure names the same input each time).
//   dtrain_fuzz_replay TARGET FILE_OR_DIR...     dtrain_fuzz_replay --write-seeds TARGET DIR
//   dtrain_fuzz_replay --list
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "test/fuzz/fuzz_target.h"

namespace {

const dtrain::fuzz::Target* find(const char* name) {
  for (const dtrain::fuzz::Target& t : dtrain::fuzz::targets()) {
    if (std::strcmp(t.name, name) == 0) return &t;
  }
  std::fprintf(stderr, "no fuzz target '%s'; there are:", name);
  for (const dtrain::fuzz::Target& t : dtrain::fuzz::targets()) std::fprintf(stderr, " %s", t.name);
  std::fprintf(stderr, "\n");
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc == 2 && std::strcmp(argv[1], "--list") == 0) {
    for (const dtrain::fuzz::Target& t : dtrain::fuzz::targets()) std::printf("%s\n", t.name);
    return 0;
  }
  if (argc == 4 && std::strcmp(argv[1], "--write-seeds") == 0) {
    const dtrain::fuzz::Target* target = find(argv[2]);
    if (target == nullptr) return 2;
    fs::create_directories(argv[3]);
    target->write_seeds(argv[3]);
    return 0;
  }
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s TARGET FILE_OR_DIR... | --write-seeds TARGET DIR | --list\n", argv[0]);
    return 2;
  }
  const dtrain::fuzz::Target* target = find(argv[1]);
  if (target == nullptr) return 2;
  std::vector<fs::path> inputs;
  for (int i = 2; i < argc; ++i) {
    if (fs::is_directory(argv[i])) {
      for (const auto& entry : fs::directory_iterator(argv[i])) {
        if (entry.is_regular_file()) inputs.push_back(entry.path());
      }
    } else if (fs::is_regular_file(argv[i])) {
      inputs.emplace_back(argv[i]);
    } else {
      std::fprintf(stderr, "%s: no such file or directory\n", argv[i]);
      return 2;
    }
  }
  std::sort(inputs.begin(), inputs.end());
  for (const fs::path& path : inputs) {
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replay %s: %s (%zu bytes)\n", target->name, path.c_str(), bytes.size());
    target->test_one_input(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("%s: replayed %zu input(s), none failed\n", target->name, inputs.size());
  return 0;
}
