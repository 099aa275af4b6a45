#!/usr/bin/env bash
# Replaces the configuration reference (docs/configuration.md) with the current `dtrain --help`, or with
# --check exits non-zero if they differ (run by the tests, so the reference never drifts from the code).
# Usage: update_help_reference.sh DTRAIN [--check]
set -euo pipefail
dtrain=$1
mode=${2:-update}
readme="$(dirname "$0")/../docs/configuration.md"
help=$("$dtrain" --help)
expected=$(awk -v help="$help" '
  /<!-- BEGIN dtrain --help -->/ { print; print "```"; print help; print "```"; skip = 1; next }
  /<!-- END dtrain --help -->/ { skip = 0 }
  !skip { print }' "$readme")
if [ "$mode" = "--check" ]; then
  if [ "$expected" != "$(cat "$readme")" ]; then
    echo "docs/configuration.md differs from 'dtrain --help'; run scripts/update_help_reference.sh build/dtrain"
    diff <(echo "$expected") "$readme" || true
    exit 1
  fi
  echo "docs/configuration.md matches 'dtrain --help'"
else
  printf '%s\n' "$expected" >"$readme"
fi
