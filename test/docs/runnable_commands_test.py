#!/usr/bin/python3
"""Runs the shell blocks of README.md and docs/*.md marked runnable, as a user would paste them.

A block is marked by the line `<!-- runnable -->` right before its ``` fence. Each file's blocks run in
order with bash (errexit, pipefail) in one scratch directory that holds links to the checkout's files and
to the build, so relative paths work as in a checkout, and the runs' outputs stay out of it. Training is
shortened: every command line that runs dtrain (directly, under a launcher, or through run_mnist.sh or
a study runner, whose extra arguments go to dtrain) gets --max-steps and --eval-samples appended. Nothing
else is changed, and the blocks run without the Open MPI variables a test harness may have set (such as
OMPI_ALLOW_RUN_AS_ROOT): a command that needs root's consent or more cores than the machine has fails
here as it would in a user's fresh shell.

Usage: runnable_commands_test.py SOURCE_DIR BUILD_DIR [FILE ...]   (files relative to SOURCE_DIR)
"""
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

MARK = "<!-- runnable -->"
SHORT = "--max-steps 4 --eval-samples 500"
# A command line that starts dtrain: the binary by path, or the scripts that pass arguments on to it.
RUNS_DTRAIN = re.compile(r"(^|[\s/])(dtrain|run_mnist\.sh|run_study\.sh)(\s|$)")
TIMEOUT_S = 900


def runnable_blocks(path):
    """(line number, text) of each block marked runnable in the Markdown file."""
    lines = path.read_text().splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == MARK:
            fence = i + 1
            if fence >= len(lines) or not lines[fence].startswith("```"):
                raise SystemExit(f"{path}:{i + 1}: {MARK} must come right before a ``` block")
            end = fence + 1
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            blocks.append((fence + 1, "\n".join(lines[fence + 1:end])))
            i = end
        i += 1
    return blocks


def shortened(block):
    """The block with SHORT appended to each command line that runs dtrain (continuations joined)."""
    out = []
    pending = ""
    for line in block.splitlines():
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        command = pending + line
        pending = ""
        code, hash_, comment = command.partition(" #")
        if RUNS_DTRAIN.search(code) and not code.lstrip().startswith("#"):
            code = code.rstrip() + " " + SHORT
        out.append(code + (hash_ + comment if hash_ else ""))
    return "\n".join(out)


def scratch_dir(source, build):
    scratch = Path(tempfile.mkdtemp(prefix="dtrain-docs-"))
    for entry in source.iterdir():
        if entry.name.startswith("build") or entry.name == ".git":
            continue
        (scratch / entry.name).symlink_to(entry)
    (scratch / "build").symlink_to(build)
    return scratch


def main():
    source, build = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    files = sys.argv[3:] or ["README.md"] + sorted(str(p.relative_to(source)) for p in (source / "docs").glob("*.md"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "OPAL_"))}
    failures = 0
    total = 0
    for name in files:
        blocks = runnable_blocks(source / name)
        if not blocks:
            continue
        scratch = scratch_dir(source, build)
        for line, block in blocks:
            total += 1
            script = shortened(block)
            print(f"--- {name}:{line}\n{script}", flush=True)
            try:
                result = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=scratch, env=env, text=True,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT_S,
                                        stdin=subprocess.DEVNULL)
                output, status = result.stdout, result.returncode
            except subprocess.TimeoutExpired as e:
                # The output captured so far comes as bytes, whatever text= asked for.
                output, status = (e.stdout or b"").decode(errors="replace"), "timeout"
            if status == 0:
                print(f"PASS: {name}:{line} ({len(output.splitlines())} lines of output)")
            else:
                failures += 1
                print(f"FAIL: {name}:{line} (exit {status}); its output:")
                print("\n".join("  | " + l for l in output.splitlines()[-60:]))
        subprocess.run(["rm", "-rf", str(scratch)])
    if total == 0:
        print("runnable_commands_test: no block is marked runnable")
        return 1
    print(f"runnable_commands_test: {total - failures} of {total} blocks passed")
    return 1 if failures else 0


sys.exit(main())
