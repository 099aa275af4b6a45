#!/usr/bin/python3
"""Reads a run log as Kubeflow Katib's File metrics collector reads a file of fileFormat JSON
(katib pkg/metricscollector/v1beta1/file-metricscollector): every non-empty line must parse as a JSON
object, or the whole collection fails; a metric is the key of its name, counted only when its value is a
string; "timestamp" is RFC 3339 text or seconds since 1970, else the observation has the zero time; and
a file without the objective metric (the first one named) reports it as unavailable.

Usage: katib_file_collector.py EVENTS_JSONL METRIC [METRIC ...]
Prints one observation per line (timestamp, name, value); exits 1 when a line is not a JSON object or
the objective metric is not found, like the collector, and when an observation has no usable timestamp,
which the collector accepts with a warning but a study cannot order.
"""
import json
import re
import sys

RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|[+-]\d\d:\d\d)$")


def timestamp_of(record):
    value = record.get("timestamp")
    if isinstance(value, str) and RFC3339.match(value):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:.6f}"
    return None


def main():
    path, metrics = sys.argv[1], sys.argv[2:]
    observations = []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            line = raw.decode("utf-8").rstrip("\n")
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                print(f"katib_file_collector: line {number} is not JSON ({e}); Katib fails the whole file")
                return 1
            if not isinstance(record, dict):
                print(f"katib_file_collector: line {number} is not a JSON object")
                return 1
            for name in metrics:
                if isinstance(record.get(name), str):
                    observations.append((timestamp_of(record), name, record[name]))
    if not any(name == metrics[0] for _, name, _ in observations):
        print(f"katib_file_collector: the objective metric {metrics[0]} is not in {path}; Katib reports it unavailable")
        return 1
    for when, name, value in observations:
        if when is None:
            print(f"katib_file_collector: an observation of {name} ({value}) has no RFC 3339 or numeric timestamp")
            return 1
        print(f"{when} {name} {value}")
    return 0


sys.exit(main())
