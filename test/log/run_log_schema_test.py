#!/usr/bin/python3
"""The run log's schema (runtime/log/run_log.schema.json) against its producer, its documentation and
itself, and the console patterns (runtime/log/console_lines.json) in Python's dialect:
- the RunLogger's every record kind (the unit test that writes them, run with DTRAIN_RUN_LOG_OUT) matches
  the schema, and the kinds it writes are exactly the schema's;
- every event name in runtime/log/run_logger.cpp and every kind in docs/usage.md's table is the schema's;
- controls: records that drifted (an undeclared field, a missing one, a wrong type, an unknown kind) fail;
- each console pattern compiles in Python and matches its example (the C++ tests do so in ECMAScript).
Usage: run_log_schema_test.py UNIT_TEST_BINARY"""

import copy
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "report"))
from dtrain_report import formats  # noqa: E402

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what)


def main():
    unit_tests = sys.argv[1]
    kinds = formats.event_kinds()
    validator = formats.validator()  # also checks the schema against the 2020-12 meta-schema

    with tempfile.TemporaryDirectory() as out:
        proc = subprocess.run([unit_tests, "the RunLogger writes every record kind of the run log"],
                              env={**os.environ, "DTRAIN_RUN_LOG_OUT": out}, capture_output=True, text=True)
        check(proc.returncode == 0, f"the unit test writing every record kind failed:\n{proc.stdout}{proc.stderr}")
        log = Path(out) / "events.jsonl"
        problems, seen = formats.schema_errors(log)
        for p in problems:
            check(False, f"the RunLogger's record does not match the schema: {p}")
        check(sorted(set(seen)) == sorted(kinds), f"the RunLogger wrote {sorted(set(seen))}; the schema has {sorted(kinds)}")
        records = [json.loads(line) for line in log.read_text().splitlines()]

    # Every event name the writer spells, and every kind the documentation lists, is the schema's.
    source = (ROOT / "runtime" / "log" / "run_logger.cpp").read_text()
    # Records start as event("name"), epoch_metrics("name", ...) or with record["event"] = "name".
    written = set(re.findall(r'\b(?:event|epoch_metrics)\("([a-z_]+)"', source)) | \
        set(re.findall(r'\["event"\] = "([a-z_]+)"', source))
    check(written == set(kinds), f"run_logger.cpp writes {sorted(written)}; the schema has {sorted(kinds)}")
    usage = (ROOT / "docs" / "usage.md").read_text()
    section = usage[usage.index("\n## The run log"):]
    section = section[: section.index("\n## ", 1)]
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.MULTILINE))
    check(documented == set(kinds), f"docs/usage.md's table lists {sorted(documented)}; the schema has {sorted(kinds)}")

    # Controls: the schema must reject records that drifted from it.
    by_kind = {r["event"]: r for r in records}
    drifted = []
    epoch = copy.deepcopy(by_kind["epoch_end"])
    epoch["bytes_on_the_wire"] = 12  # a new figure nobody declared
    drifted.append(("an undeclared numeric field", epoch))
    epoch = copy.deepcopy(by_kind["epoch_end"])
    del epoch["train_s"]
    drifted.append(("a missing field", epoch))
    start = copy.deepcopy(by_kind["run_start"])
    start["world_size"] = "2"
    drifted.append(("a count written as text", start))
    sample = copy.deepcopy(by_kind["sample"])
    sample["gpu_util_percent"] = 140.0
    drifted.append(("a percentage out of range", sample))
    drifted.append(("an unknown kind", {"event": "epoch_begin", "time": by_kind["run_start"]["time"]}))
    end = copy.deepcopy(by_kind["run_end"])
    end["time"] = "25 Nov 2026"
    drifted.append(("a time in another format", end))
    for what, record in drifted:
        check(not validator.is_valid(record), f"the schema accepts {what}: {record}")

    # The console patterns, in Python's dialect.
    for kind in formats.console_kinds():
        line = formats.console_line(kind)
        check(line.parse(line.example) is not None, f"console line '{kind}': its example does not match its pattern")
        check(line.regex.groups == len(line.groups), f"console line '{kind}': {line.regex.groups} groups, "
                                                      f"{len(line.groups)} names")
        for word in formats.never_contains():
            check(word not in line.example, f"console line '{kind}': its example holds '{word}'")

    print(f"run_log_schema_test: {len(kinds)} record kinds, {len(drifted)} drifted records, "
          f"{len(formats.console_kinds())} console lines; {len(failures)} failure(s)")
    return 1 if failures else 0


sys.exit(main())
