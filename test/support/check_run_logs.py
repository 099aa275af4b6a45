#!/usr/bin/python3
"""Validates every run log (events.jsonl) under the given directories against dtrain's run-log schema
(runtime/log/run_log.schema.json, read through dtrain-report's formats module), so that every test that
runs the real binary also checks what it wrote. Prints the record kinds seen.
Usage: check_run_logs.py [--expect KIND,KIND...] [--min-logs N] DIR...
Exit 1 when a record does not match, when fewer than N run logs were found, or when an expected kind
was not among the records."""

import argparse
import collections
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "report"))
from dtrain_report import formats  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dirs", nargs="+")
    parser.add_argument("--expect", default="", help="record kinds that must appear, comma-separated")
    parser.add_argument("--min-logs", type=int, default=1)
    args = parser.parse_args()

    logs = []
    for d in args.dirs:
        for root, _, files in os.walk(d):
            if "events.jsonl" in files:
                logs.append(Path(root) / "events.jsonl")
    kinds = collections.Counter()
    problems = []
    for log in sorted(logs):
        errors, seen = formats.schema_errors(log)
        kinds.update(seen)
        problems += [f"{log}: {e}" for e in errors]
    for p in problems[:40]:
        print("check_run_logs: FAIL:", p)
    missing = [k for k in args.expect.split(",") if k and k not in kinds]
    if missing:
        print(f"check_run_logs: FAIL: no {', '.join(missing)} record in {len(logs)} run log(s)")
    if len(logs) < args.min_logs:
        print(f"check_run_logs: FAIL: {len(logs)} run log(s) under {', '.join(args.dirs)}, expected {args.min_logs} or more")
    summary = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
    print(f"check_run_logs: {len(logs)} run log(s), {sum(kinds.values())} records ({summary}), "
          f"{len(problems)} not matching the schema")
    return 1 if problems or missing or len(logs) < args.min_logs else 0


if __name__ == "__main__":
    sys.exit(main())
