"""dtrain-report STUDY_DIR... --out OUT: see docs/studies.md."""

import argparse
import sys
from pathlib import Path

from . import outdir, plots
from .html import write_index
from .model import find_floors, find_solos, find_sweeps
from .runs import discover, shown
from .tables import build_tables


def shown_strings(df):
    """`df` with every text as the report shows file names (runs.shown): valid UTF-8 whatever the names."""
    for column in df.columns:
        if df[column].dtype == object:
            df[column] = df[column].map(lambda v: shown(v) if isinstance(v, str) else v)
    return df


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="dtrain-report",
        description="Tables (CSV), plots (PNG) and an index.html of the runs of one or more study directories "
                    "(one per platform, say). A study directory is what deploy/*/run_study.sh writes, a "
                    "directory of dtrain log directories, or launcher outputs with Katib lines and bash time.")
    parser.add_argument("studies", nargs="+", metavar="STUDY_DIR")
    parser.add_argument("--out", required=True, metavar="OUT", help="directory for the report (created)")
    parser.add_argument("--allow-shared-dirs", action="store_true",
                        help="use an --out that other users can write, trusting them (refused without it)")
    args = parser.parse_args(argv)

    for s in args.studies:
        if not Path(s).is_dir():
            parser.error(f"study directory '{s}' does not exist or is not a directory")
    out = Path(args.out)
    try:
        outdir.prepare(out, args.allow_shared_dirs)
    except outdir.OutDirError as e:
        print(f"dtrain-report: error: {e}", file=sys.stderr)
        return 2

    runs = []
    study_warnings = []  # what was left out, and why
    for s in args.studies:
        found = discover(s, study_warnings)
        if not found:
            print(f"dtrain-report: warning: no runs in '{s}' (no labels.yaml, events.jsonl or launcher output "
                  f"with Katib or `real` lines)", file=sys.stderr)
        runs += found
    if not runs:
        print("dtrain-report: error: no runs found in " + ", ".join(args.studies), file=sys.stderr)
        return 3
    tables = build_tables(runs, find_sweeps(args.studies), find_floors(args.studies), find_solos(args.studies))
    try:
        for name, df in tables.items():
            outdir.write(out / f"{name}.csv", lambda f, df=df: shown_strings(df).to_csv(f, index=False))

        figures, skipped = [], []
        for title, draw, table in plots.PLOTS:
            try:
                figures.append((title, draw(tables[table], out)))
            except plots.Skip as why:
                skipped.append((title, str(why)))
        warnings = [shown(w) for w in study_warnings + [w for r in runs for w in r.warnings]]
        write_index(out, [shown(Path(s).resolve().name) for s in args.studies], tables, figures, skipped, warnings)
    except outdir.OutDirError as e:
        print(f"dtrain-report: error: {e}", file=sys.stderr)
        return 2
    for w in warnings:
        print(f"dtrain-report: warning: {w}", file=sys.stderr)
    n_png = sum(len(paths) for _, paths in figures)
    print(f"dtrain-report: {len(runs)} run(s) from {len(args.studies)} stud{'y' if len(args.studies) == 1 else 'ies'}"
          f": runs.csv, scaling.csv, model.csv, peer.csv, ranks.csv, floor.csv, epochs.csv, samples.csv, ops.csv, {n_png} plot(s), index.html in {out}")
    for title, why in skipped:
        print(f"dtrain-report: no plot '{title}': {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
