# shellcheck shell=bash
# The shell test suites' verdict lines, sourced by each: `pass WHAT` and `fail WHAT` print one line
# with the seconds since the previous verdict (so that a CI log shows which check took the time), and
# fail counts into $failures, which the suite turns into its exit status at the end.
failures=0
checks_lap=$SECONDS
pass() { echo "PASS ($((SECONDS - checks_lap)) s): $*"; checks_lap=$SECONDS; }
fail() { echo "FAIL ($((SECONDS - checks_lap)) s): $*"; checks_lap=$SECONDS; failures=$((failures + 1)); }
