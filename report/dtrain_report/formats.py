"""dtrain's output formats, from the files that describe them (runtime/log/ in the source tree,
share/dtrain/formats/ installed): the console lines (console_lines.json) and the run log's JSON Schema
(run_log.schema.json). The C++ tests check dtrain's writers against the same files, so a format that
changes on one side fails the other's tests instead of drifting."""

import json
import re
from functools import lru_cache
from pathlib import Path

_HERE = Path(__file__).resolve().parent
# report/dtrain_report -> the source tree's runtime/log; share/dtrain/report/dtrain_report -> share/dtrain/formats
_CANDIDATES = [_HERE.parent.parent / "runtime" / "log", _HERE.parent.parent / "formats"]


@lru_cache(maxsize=None)
def formats_dir():
    for candidate in _CANDIDATES:
        if (candidate / "console_lines.json").is_file() and (candidate / "run_log.schema.json").is_file():
            return candidate
    raise FileNotFoundError("dtrain's format files (console_lines.json, run_log.schema.json) are in none of "
                            + ", ".join(str(c) for c in _CANDIDATES))


@lru_cache(maxsize=None)
def _console():
    return json.loads((formats_dir() / "console_lines.json").read_text())


class ConsoleLine:
    """One kind of console line: its pattern and the names of its groups."""

    def __init__(self, kind, spec):
        self.kind = kind
        self.regex = re.compile(spec["pattern"])
        self.groups = spec["groups"]
        self.example = spec["example"]

    def parse(self, line):
        """The named groups of the first match in `line`, or None."""
        m = self.regex.search(line)
        return dict(zip(self.groups, m.groups())) if m else None

    def parse_all(self, line):
        """The named groups of every match in `line` (for patterns found within a line)."""
        return [dict(zip(self.groups, m.groups())) for m in self.regex.finditer(line)]


@lru_cache(maxsize=None)
def console_line(kind):
    lines = _console()["lines"]
    if kind not in lines:
        raise KeyError(f"console_lines.json has no line '{kind}'; it has {', '.join(sorted(lines))}")
    return ConsoleLine(kind, lines[kind])


def console_kinds():
    return sorted(_console()["lines"])


def never_contains():
    """Substrings no dtrain console line holds, with the reason."""
    return dict(_console()["never_contains"])


@lru_cache(maxsize=None)
def run_log_schema():
    return json.loads((formats_dir() / "run_log.schema.json").read_text())


def event_kinds():
    return list(run_log_schema()["properties"]["event"]["enum"])


def declares(kind, field):
    """Whether the schema names `field` for records of `kind`: among its properties, or matching one of
    its field patterns (train_<metric>, final_test_<metric>, ...)."""
    defs = run_log_schema()["$defs"]
    parts = [defs[kind]] + [defs[p["$ref"].rsplit("/", 1)[-1]] for p in defs[kind].get("allOf", [])]
    return any(field in part.get("properties", {}) or
               any(re.search(pattern, field) for pattern in part.get("patternProperties", {}))
               for part in parts)


def validator():
    """A JSON Schema validator of run-log records. Needs the jsonschema package (Debian:
    python3-jsonschema); only the tests use it, the report reads records without it."""
    import jsonschema  # noqa: PLC0415 - optional for the report itself

    schema = run_log_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def schema_errors(path):
    """Every record of the run log at `path` that does not match the schema, as 'line N (event): message'
    strings, and the event kinds seen."""
    check = validator()
    problems, kinds = [], []
    for number, line in enumerate(Path(path).read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            problems.append(f"line {number}: not JSON ({e})")
            continue
        kinds.append(record.get("event") if isinstance(record, dict) else None)
        for error in sorted(check.iter_errors(record), key=lambda e: list(e.absolute_path)):
            where = "/".join(str(p) for p in error.absolute_path) or "record"
            problems.append(f"line {number} ({kinds[-1]}): {where}: {error.message}")
    return problems, kinds
