#!/usr/bin/python3
"""What a new user waits for: from a fresh clone on a fresh Debian 12 machine, the README's run command
(`bash scripts/run_mnist.sh`) until dtrain's first training line, and how many lines it prints.

Each git ref given runs in a fresh container of the Debian 12 base image (scripts/debian_base_image.sh:
debootstrap, buildah, chroot isolation) with that ref's files copied in, in the order given, one after
the other on this machine; so a change to the run command is measured against the commit before it, in
the same session. Reported per ref: seconds to the first "Train Epoch" line, seconds to the command's
end, its exit status and the number of lines it printed (stdout and stderr). The ratio row divides each
ref's seconds by the first ref's. Needs root, buildah and network access to the Debian mirror.

--packages-present: the containers start from an image that already has the packages of the last ref's
`scripts/install_deps.sh run` (made once, and kept as localhost/dtrain-first-run:<hash of that list>),
so the time is git clone to training on a machine that has the packages: configuring, compiling and
starting, with an empty ccache.

Usage: first_run_bench.py [--packages-present] [--out results.json] [--keep-logs DIR] REF [REF ...]
       e.g. first_run_bench.py 2d140b0 HEAD
"""
import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time

TRAIN_LINE = re.compile(r"^Train Epoch: ")


def sh(*args, **kwargs):
    return subprocess.run(args, check=True, text=True, stdout=subprocess.PIPE, **kwargs).stdout.strip()


def packages_image(repo, ref, base):
    """`base` with the packages of `ref`'s `scripts/install_deps.sh run` installed, built once."""
    script = sh("git", "-C", repo, "show", f"{ref}:scripts/install_deps.sh")
    image = f"localhost/dtrain-first-run:{hashlib.sha256(script.encode()).hexdigest()[:12]}"
    if subprocess.run(["buildah", "inspect", "--type", "image", image], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL).returncode == 0:
        return image
    print(f"first_run_bench: installing the run packages of {ref} into {image} ...", flush=True)
    container = sh("buildah", "from", base)
    try:
        with tempfile.NamedTemporaryFile("w", suffix=".sh") as f:
            f.write(script)
            f.flush()
            sh("buildah", "copy", container, f.name, "/tmp/install_deps.sh")
        subprocess.run(["buildah", "run", "--isolation", "chroot", container, "--", "bash", "/tmp/install_deps.sh",
                        "run"], check=True, stdout=subprocess.DEVNULL)
        sh("buildah", "commit", container, image)
    finally:
        subprocess.run(["buildah", "rm", container], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return image


def measure(repo, ref, base, keep_logs):
    commit = sh("git", "-C", repo, "rev-parse", "--short", ref)
    with tempfile.TemporaryDirectory() as tree:
        # The ref's files as a clone has them (git archive: tracked files only, no build outputs).
        archive = subprocess.Popen(["git", "-C", repo, "archive", commit], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", tree], stdin=archive.stdout, check=True)
        if archive.wait() != 0:
            raise SystemExit(f"first_run_bench: git archive {ref} failed")
        container = sh("buildah", "from", base)
        try:
            sh("buildah", "copy", container, tree, "/home/user/dtrain")
            started = time.monotonic()
            first_line_s = None
            lines = []
            process = subprocess.Popen(
                ["buildah", "run", "--isolation", "chroot", container, "--", "bash", "-c",
                 "cd /home/user/dtrain && bash scripts/run_mnist.sh"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                errors="replace", bufsize=1)
            for line in process.stdout:
                lines.append(line.rstrip("\n"))
                if first_line_s is None and TRAIN_LINE.match(line):
                    first_line_s = time.monotonic() - started
            status = process.wait()
            total_s = time.monotonic() - started
        finally:
            subprocess.run(["buildah", "rm", container], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if keep_logs:
        os.makedirs(keep_logs, exist_ok=True)
        with open(os.path.join(keep_logs, f"first-run-{commit}.log"), "w") as f:
            f.write("\n".join(lines) + "\n")
    return {"ref": ref, "commit": commit, "first_train_line_s": first_line_s, "total_s": total_s, "exit": status,
            "lines": len(lines), "train_lines": sum(1 for l in lines if TRAIN_LINE.match(l))}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("refs", nargs="+")
    parser.add_argument("--out")
    parser.add_argument("--keep-logs", help="write each ref's whole output to DIR/first-run-COMMIT.log")
    parser.add_argument("--packages-present", action="store_true",
                        help="start from an image that has the run packages of the last ref installed")
    args = parser.parse_args()
    repo = sh("git", "rev-parse", "--show-toplevel", cwd=os.path.dirname(os.path.abspath(__file__)))
    os.environ.setdefault("STORAGE_DRIVER", "vfs")  # buildah's, as the image scripts use it
    base = sh("bash", os.path.join(repo, "scripts", "debian_base_image.sh"))
    if args.packages_present:
        base = packages_image(repo, args.refs[-1], base)
    results = []
    for ref in args.refs:
        print(f"first_run_bench: {ref} in a fresh container of {base} ...", flush=True)
        results.append(measure(repo, ref, base, args.keep_logs))
        r = results[-1]
        print(f"first_run_bench: {r['commit']}: first Train Epoch line after {r['first_train_line_s']} s, "
              f"exit {r['exit']} after {r['total_s']:.0f} s, {r['lines']} lines", flush=True)
    first = results[0]
    print(f"\n{'ref':<12} {'commit':<10} {'to first line':>14} {'to the end':>11} {'exit':>5} {'lines':>6} "
          f"{'ratio (first line)':>19}")
    for r in results:
        ratio = (r["first_train_line_s"] / first["first_train_line_s"]
                 if r["first_train_line_s"] and first["first_train_line_s"] else float("nan"))
        to_first = f"{r['first_train_line_s']:.0f} s" if r["first_train_line_s"] else "never"
        print(f"{r['ref']:<12} {r['commit']:<10} {to_first:>14} {r['total_s']:>9.0f} s {r['exit']:>5} {r['lines']:>6} "
              f"{ratio:>19.2f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"bench": "first_run", "machine_cores": os.cpu_count(), "packages_present": args.packages_present,
                       "results": results}, f, indent=1)
    return 0 if all(r["exit"] == 0 for r in results) else 1


sys.exit(main())
