#!/usr/bin/env bash
# Replays every fuzz target over the seeds it writes and over the inputs kept for it under
# test/fuzz/inputs/<target>/ (what fuzzing runs found: each once crashed a parser or reached new code).
# Usage: replay_test.sh DTRAIN_FUZZ_REPLAY INPUTS_DIR
set -uo pipefail
replay=$1
inputs=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
for target in $("$replay" --list); do
  dirs=("$work/$target")
  "$replay" --write-seeds "$target" "$work/$target" || { echo "FAIL: $target: writing its seeds"; failures=$((failures + 1)); continue; }
  seeds=$(find "$work/$target" -type f | wc -l)
  [ "$seeds" -gt 0 ] || { echo "FAIL: $target wrote no seeds"; failures=$((failures + 1)); continue; }
  [ -d "$inputs/$target" ] && dirs+=("$inputs/$target")
  if "$replay" "$target" "${dirs[@]}" 2>"$work/$target.log"; then
    echo "PASS: $target ($seeds seeds$([ -d "$inputs/$target" ] && echo ", $(find "$inputs/$target" -type f | wc -l) kept inputs"))"
  else
    echo "FAIL: $target"; tail -20 "$work/$target.log"; failures=$((failures + 1))
  fi
done
echo "$failures failure(s)"
[ "$failures" -eq 0 ]
