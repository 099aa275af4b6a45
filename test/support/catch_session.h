// Runs the Catch2 session of a test binary. Catch2's single header declares its Session only where its
// implementation is compiled, which is test/support/catch_session.cpp, once for every test binary.
#pragma once

#include <string>

namespace dtrain::test {

struct CatchRunOptions {
  std::string report_path;  // where the report goes instead of stdout (then without colour); empty: stdout
};

// The exit status of a binary whose every selected case skipped (ctest's SKIP_RETURN_CODE).
constexpr int kAllSkipped = 77;

// Parses Catch's command line and runs the selected cases: the number of failed cases, Catch's non-zero
// status for a bad command line, or kAllSkipped when cases ran, none failed and every one skipped
// (DTRAIN_SKIP).
int run_catch_session(int argc, char** argv, const CatchRunOptions& options = {});

}  // namespace dtrain::test
