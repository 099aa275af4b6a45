// A case that cannot run where it is run says so and returns (Catch2 v2 has no SKIP): DTRAIN_SKIP's
// message starts with "SKIP:", as the shell suites' skips do, so scripts/ctest_summary.py lists it at the
// end of a CI run; and a binary whose every selected case skipped exits 77, which ctest reports as
// skipped, not passed (the suites that need a GPU are run as ctest tests of their own, "[gpu]" alone).
#pragma once

#include <sstream>
#include <string>

#include "test/support/catch.h"

namespace dtrain::test {
// Counts the current case as skipped, for `reason` (test/support/catch_session.cpp): listed at the end of
// the run, since Catch2 prints a passing case's warnings only with -s.
void note_skip(const std::string& reason);
}  // namespace dtrain::test

#define DTRAIN_SKIP(reason)                              \
  do {                                                   \
    std::ostringstream dtrain_skip_reason;               \
    dtrain_skip_reason << reason;                        \
    ::dtrain::test::note_skip(dtrain_skip_reason.str()); \
    WARN("SKIP: " << dtrain_skip_reason.str());          \
    return;                                              \
  } while (false)
