#!/usr/bin/env bash
# Builds dtrain with AddressSanitizer and UndefinedBehaviorSanitizer (-DDTRAIN_SANITIZE=ON, into
# ${BUILD_DIR:-build-asan}; with clang where installed, whose build also holds the libFuzzer targets that
# scripts/fuzz.sh runs, so that one build serves both) and runs under them, every report fatal:
#   1. the unit tests
#   2. the fuzz targets' seeds and kept inputs (test/fuzz)
#   3. every workload on 2 ranks for a few steps with a checkpoint, then resumed from it; and a run stopped
#      by a signal resumed from its checkpoint's copy in memory
#   4. every workload training on generated data in its published format (test/e2e/workloads_test.py)
#   5. the bad-input corpus (test/e2e/bad_inputs.py)
# Exit 0 only if every step passed with no sanitizer report. About 40 minutes on 2 cores (the build: 4).
#   bash scripts/sanitize.sh [STEP...]    (default: all five; e.g. `bash scripts/sanitize.sh 1 3`)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh sanitize
root=$(pwd)
build=${BUILD_DIR:-build-asan}
steps=("${@:-1 2 3 4 5}")
steps=" ${steps[*]} "
compiler=()
if command -v clang++ >/dev/null; then compiler=(-DCMAKE_CXX_COMPILER=clang++ -DDTRAIN_FUZZ=ON); fi
BUILD_DIR=$build BUILD_TYPE=RelWithDebInfo bash scripts/build.sh -DDTRAIN_SANITIZE=ON -DDTRAIN_BUILD_TESTS=ON \
  -DDTRAIN_BUILD_BENCH=OFF "${compiler[@]}"
. scripts/mpi_env.sh
# A report ends the process with this status, so that no test can take it for an ordinary failure.
report_status=86
# fast_unwind_on_malloc=0: the libraries dtrain does not build have no frame pointers, and a leak's stack
# must reach the library frames that lsan.supp names (with fast unwinding it stops at the first).
export ASAN_OPTIONS="exitcode=$report_status:detect_leaks=1:fast_unwind_on_malloc=0:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=$report_status:${UBSAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$root/test/sanitize/lsan.supp:exitcode=$report_status:${LSAN_OPTIONS:-}"
# Open MPI unloads its plugins at MPI_Finalize, after which LeakSanitizer cannot name the library of
# what they kept ("<unknown module>"); kept loaded, their allocations match test/sanitize/lsan.supp.
export OMPI_MCA_mca_base_component_disable_dlclose=1
# Every rank's reports in files, read at the end: mpirun and Python tests may swallow a rank's stderr.
reports=$(mktemp -d)
trap 'rm -rf "$reports"' EXIT
export ASAN_OPTIONS="$ASAN_OPTIONS:log_path=$reports/asan"
export UBSAN_OPTIONS="$UBSAN_OPTIONS:log_path=$reports/ubsan"
dtrain=$root/$build/dtrain
status=0
step() { echo; echo "=== sanitize: $*"; }
failed() { echo "sanitize: FAILED: $*"; status=1; }

if [[ $steps == *" 1 "* ]]; then
  step "1. unit tests"
  "$build/test/dtrain_unit_tests" || failed "unit tests"
fi
if [[ $steps == *" 2 "* ]]; then
  step "2. fuzz targets over their seeds and kept inputs"
  bash test/fuzz/replay_test.sh "$build/test/dtrain_fuzz_replay" test/fuzz/inputs || failed "fuzz replay"
fi
if [[ $steps == *" 3 "* ]]; then
  step "3. every workload: a checkpoint inside an epoch, then a resume from it (and one from the copy in memory)"
  work=$(mktemp -d)
  for workload in $("$dtrain" --list-workloads | awk -F: '/^[a-z0-9-]+:/ { print $1 }'); do
    common=(--workload "$workload" --synthetic --device cpu --backend mpi --max-steps 4 --batch-size 4
            --eval-samples 8 --progress off --log-dir "$work/$workload" --checkpoint-every-steps 2)
    if mpirun -np 2 "$dtrain" "${common[@]}" --epochs 1 >"$work/$workload.out" 2>&1 &&
       mpirun -np 2 "$dtrain" "${common[@]}" --epochs 2 --resume >>"$work/$workload.out" 2>&1 &&
       grep -q "resumed" "$work/$workload.out"; then
      echo "PASS: $workload"
    else
      tail -30 "$work/$workload.out"; failed "$workload"
    fi
  done
  # The copy in memory's load path: a run stopped by SIGTERM keeps its newest checkpoint there (a private
  # directory of this test's own), and the resume reads it from there.
  memory=$work/memory
  mkdir -m 1777 "$memory"
  common=(--workload mnist --synthetic --device cpu --backend mpi --batch-size 4 --eval-samples 8 --progress off
          --log-dir "$work/stopped" --run-name stopped --checkpoint-every-steps 2 --checkpoint-memory-dir "$memory")
  "$dtrain" "${common[@]}" --epochs 1 --max-steps 100000 >"$work/stopped.out" 2>&1 &
  job=$!
  for _ in $(seq 1 1200); do ls "$memory"/dtrain-*/*/checkpoint-epoch-*.safetensors >/dev/null 2>&1 && break; sleep 0.1; done
  kill -TERM "$job"
  stopped=0
  wait "$job" || stopped=$?
  if [ "$stopped" -eq 143 ] && "$dtrain" "${common[@]}" --epochs 1 --max-steps 4 --resume >>"$work/stopped.out" 2>&1 &&
     grep -q "^resumed .*, the copy in memory" "$work/stopped.out"; then
    echo "PASS: mnist stopped by SIGTERM, resumed from its copy in memory"
  else
    tail -30 "$work/stopped.out"; failed "mnist resumed from its copy in memory"
  fi
  rm -rf "$work"
fi
if [[ $steps == *" 4 "* ]]; then
  step "4. every workload on generated data in its published format"
  /usr/bin/python3 test/e2e/workloads_test.py "$dtrain" "$(command -v mpirun)" "${DTRAIN_MPIEXEC_PREFLAGS:-}" || failed "workloads"
fi
if [[ $steps == *" 5 "* ]]; then
  step "5. the bad-input corpus"
  /usr/bin/python3 test/e2e/bad_inputs.py "$dtrain" "$(command -v mpirun)" "${DTRAIN_MPIEXEC_PREFLAGS:-}" || failed "bad inputs"
fi

step "sanitizer reports"
# A process whose leaks were all suppressed still writes a file (its table of suppressions used).
found=$(grep -lE "ERROR: (Address|Leak|UndefinedBehavior)Sanitizer|runtime error:" "$reports"/* 2>/dev/null || true)
if [ -n "$found" ]; then
  for f in $found; do echo "--- $f"; head -60 "$f"; done
  echo "sanitize: $(wc -w <<<"$found") process(es) reported"
  status=1
else
  echo "sanitize: no reports ($(ls "$reports" | wc -l) processes left only their suppression tables)"
fi
exit "$status"
