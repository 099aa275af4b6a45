#!/usr/bin/env python3
"""The end of a test run: every test's time, slowest first, and what did not run.

Reads the JUnit files `ctest --output-junit` wrote (one per build that ran tests) and prints
  - each test with its build, status and wall time, slowest first, and each build's total, so that
    a test that grows is seen from one CI log to the next;
  - the tests ctest skipped (exit 77) with the "SKIP:" lines that say why;
  - the cases skipped inside tests that passed (a "SKIP:" line in their output: a Catch2 case through
    test/support/skip.h, a part of a shell suite).
Usage: ctest_summary.py LABEL=JUNIT.xml...   (a missing file is a build whose tests did not run)
"""
import re
import sys
import xml.etree.ElementTree as ET

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def skip_lines(output):
    """The "SKIP:" lines of a test's output. Catch2 indents its messages and wraps them at 80 columns: the
    lines after an indented SKIP line with its indentation continue it."""
    found = []
    current, indent = None, ""
    for raw in ANSI.sub("", output or "").splitlines():
        stripped = raw.strip()
        lead = raw[: len(raw) - len(raw.lstrip())]
        if current is not None and indent and stripped and lead == indent and not stripped.startswith("SKIP:"):
            current += " " + stripped
            continue
        if current is not None and current not in found:
            found.append(current)
        current = None
        if stripped.startswith("SKIP:"):
            current, indent = stripped, lead
    if current is not None and current not in found:
        found.append(current)
    # A Catch2 binary says each skip twice: as the case's warning and, at its end, with the case's name.
    return [line for line in found
            if not any(other != line and other.endswith(": " + line[len("SKIP: "):]) for other in found)]


def read(label, path):
    try:
        suite = ET.parse(path).getroot()
    except FileNotFoundError:
        print(f"{label}: no results ({path}): its tests did not run")
        return []
    except ET.ParseError as error:
        print(f"{label}: unreadable results {path}: {error}")
        return []
    tests = []
    for case in suite.iter("testcase"):
        if case.find("skipped") is not None:
            status = "skipped"
        elif case.find("failure") is not None or case.find("error") is not None:
            status = "FAILED"
        elif case.get("status") == "run":
            status = "passed"
        else:
            status = case.get("status", "?")
        out = case.findtext("system-out") or ""
        tests.append({"build": label, "name": case.get("name"), "status": status,
                      "time": float(case.get("time") or 0.0), "skips": skip_lines(out)})
    return tests


def main(args):
    if not args:
        sys.exit(__doc__)
    tests = []
    for arg in args:
        label, sep, path = arg.partition("=")
        if not sep:
            sys.exit(f"ctest_summary: expected LABEL=JUNIT.xml, got '{arg}'")
        tests += read(label, path)
    if not tests:
        return
    width = max(len(t["name"]) for t in tests)
    bwidth = max(len(t["build"]) for t in tests)
    print("\nper-test wall time, slowest first:")
    for t in sorted(tests, key=lambda t: -t["time"]):
        print(f"  {t['time']:8.1f} s  {t['name']:<{width}}  {t['build']:<{bwidth}}  {t['status']}")
    for build in dict.fromkeys(t["build"] for t in tests):
        mine = [t for t in tests if t["build"] == build]
        print(f"  {sum(t['time'] for t in mine):8.1f} s  summed over {build}'s {len(mine)} tests")
    skipped = [t for t in tests if t["status"] == "skipped"]
    print(f"\nskipped tests: {len(skipped)}")
    for t in skipped:
        print(f"  {t['name']} ({t['build']}): " + ("; ".join(t["skips"]) or "no SKIP: line said why"))
    partly = [t for t in tests if t["status"] != "skipped" and t["skips"]]
    print(f"\ntests that ran with parts skipped: {len(partly)}")
    for t in partly:
        for line in t["skips"]:
            print(f"  {t['name']} ({t['build']}): {line}")


if __name__ == "__main__":
    main(sys.argv[1:])
