#!/usr/bin/env bash
# Coverage-guided fuzzing of dtrain's parsers with clang's libFuzzer under AddressSanitizer and
# UndefinedBehaviorSanitizer: builds the targets of test/fuzz (-DDTRAIN_FUZZ=ON, into
# ${BUILD_DIR:-build-asan}, the build scripts/sanitize.sh makes with clang), seeds each with the files its replay driver writes, and runs each for
# SECONDS (default 600), JOBS at a time (default: the number of cores). Then prints, per target, the runs,
# executions per second, coverage (libFuzzer's cov and ft), corpus size and crashes; a crash's input is
# kept in <build>/fuzz-crashes/<target>/ (add it to test/fuzz/inputs/<target>/ once fixed, so the tests
# replay it). Exit 1 if any target crashed.
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]     (Debian: apt install clang libclang-rt-dev)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh sanitize
seconds=${1:-600}
shift || true
build=${BUILD_DIR:-build-asan}
jobs=${JOBS:-$(nproc)}
targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=(idx cifar image citation config checkpoint)
BUILD_DIR=$build BUILD_TYPE=RelWithDebInfo BUILD_TARGETS="dtrain_fuzz_replay ${targets[*]/#/dtrain_fuzz_}" \
  bash scripts/build.sh -DCMAKE_CXX_COMPILER=clang++ -DDTRAIN_FUZZ=ON -DDTRAIN_SANITIZE=ON -DDTRAIN_BUILD_TESTS=ON \
  -DDTRAIN_BUILD_BENCH=OFF
root=$(pwd)
export ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$root/test/sanitize/lsan.supp:${LSAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
run_one() {
  local target=$1 corpus=$build/fuzz-corpus/$1 crashes=$build/fuzz-crashes/$1
  mkdir -p "$corpus" "$crashes"
  "$build/test/dtrain_fuzz_replay" --write-seeds "$target" "$corpus"
  [ -d "test/fuzz/inputs/$target" ] && cp -n "test/fuzz/inputs/$target"/* "$corpus"/ 2>/dev/null || true
  # -rss_limit_mb: LibTorch's start-up alone takes a few hundred MB; -timeout: one input, in seconds.
  "$build/test/dtrain_fuzz_$target" "$corpus" -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=10 \
    -max_len=65536 -artifact_prefix="$crashes/" -print_final_stats=1 >"$build/fuzz-$target.log" 2>&1 || true
}
running=0
for target in "${targets[@]}"; do
  run_one "$target" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
done
wait
status=0
printf '%-11s %10s %9s %6s %7s %8s %8s\n' target runs exec/s cov ft corpus crashes
for target in "${targets[@]}"; do
  log=$build/fuzz-$target.log
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' <<<"$last" | grep -o '[0-9]*' || echo 0)
  ft=$(grep -o 'ft: [0-9]*' <<<"$last" | grep -o '[0-9]*' || echo 0)
  corpus=$(find "$build/fuzz-corpus/$target" -type f | wc -l)
  crashes=$(find "$build/fuzz-crashes/$target" -type f | wc -l)
  printf '%-11s %10s %9s %6s %7s %8s %8s\n' "$target" "$runs" "$rate" "$cov" "$ft" "$corpus" "$crashes"
  if [ "$crashes" -gt 0 ]; then status=1; grep -E 'ERROR|SUMMARY|terminate|what\(\)' "$log" | head -5; fi
done
exit "$status"
