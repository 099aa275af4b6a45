// What every fuzz target under test/fuzz defines, and what they share. A target feeds one input to one
// of dtrain's parsers through its public entry point (the path a run takes), and fails only where a run
// would fail wrongly: dtrain's own errors (DataError, ConfigError, ...: the documented exit statuses)
// are the expected outcome of bad input; any other exception escapes and aborts (LibTorch's or the
// standard library's text reaching a user is the defect), as does a memory error under the sanitizers.
//
// Built two ways (test/CMakeLists.txt): with clang's libFuzzer (-DDTRAIN_FUZZ=ON, scripts/fuzz.sh),
// one binary per target, for coverage-guided runs; and in every build as one replay driver holding all
// targets (replay_main.cpp), with which the tests run each target over its seeds and over the inputs
// kept under test/fuzz/inputs/<target>/ (what fuzzing runs found worth keeping).
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

namespace dtrain::fuzz {

using InputFn = int (*)(const uint8_t* data, size_t size);
using SeedsFn = void (*)(const std::string& dir);  // writes the target's seeds (valid files, made here)

struct Target {
  const char* name;
  SeedsFn write_seeds;
  InputFn test_one_input;
};
// Every target linked into this binary (the replay driver links them all).
std::vector<Target>& targets();
struct Registration {
  Registration(const char* name, SeedsFn seeds, InputFn input) { targets().push_back({name, seeds, input}); }
};

// An input refused with one of dtrain's errors, as bad input should be: said on stderr when
// DTRAIN_FUZZ_VERBOSE is set (to see what the seeds reach), silent otherwise.
void refused(const std::exception& error);

// A directory of this process's own for the files a target writes, removed at exit.
const std::string& scratch_dir();

// Writes `size` bytes to `path`, replacing it. Throws std::runtime_error when it cannot.
void write_bytes(const std::string& path, const void* data, size_t size);
inline void write_bytes(const std::string& path, const std::string& text) { write_bytes(path, text.data(), text.size()); }

}  // namespace dtrain::fuzz

// DTRAIN_FUZZ_TARGET(name, seeds, input) at the end of a target's source: libFuzzer's entry point in a
// libFuzzer build (one target per binary), a registration for the replay driver otherwise. A target's
// own functions live in namespace dtrain::fuzz::<name>_target: the replay driver compiles its sources as
// unity batches, where two targets' helpers of one name would clash.
#ifdef DTRAIN_LIBFUZZER
#define DTRAIN_FUZZ_TARGET(name, seeds, input)                                 \
  [[maybe_unused]] static constexpr dtrain::fuzz::SeedsFn fuzz_seeds_##name = seeds; \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return input(data, size); }
#else
#define DTRAIN_FUZZ_TARGET(name, seeds, input) \
  static const dtrain::fuzz::Registration fuzz_target_##name{#name, seeds, input};
#endif
