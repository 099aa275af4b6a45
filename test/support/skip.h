// A case that cannot run where it is run says so and returns (Catch2 v2 has no SKIP): DTRAIN_SKIP's
// message starts with "SKIP:", as the shell suites' skips do, so scripts/ctest_summary.py lists it at the
// end of a CI run; and a binary whose every selected case skipped exits 77, which ctest reports as
// skipped, not passed (the suites that need a GPU are run as ctest tests of their own, "[gpu]" alone).
#pragma once

#include <sstream>
#include <string>

#include "test/support/catch.h"

namespace dtrain::test {
// Counts the current case as skipped (test/support/catch_session.cpp).
void note_skip();
}  // namespace dtrain::test

#define DTRAIN_SKIP(reason)              \
  do {                                   \
    ::dtrain::test::note_skip();         \
    WARN("SKIP: " << reason);            \
    return;                              \
  } while (false)
