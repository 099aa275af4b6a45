#!/usr/bin/python3
"""What a failure costs an elastic dtrain job under torchrun: seconds from killing a worker (or an agent)
to training again, split into its phases, and the optimizer steps trained twice.

Scenario `worker`: torchrun --standalone, 2 workers, --max_restarts 1; one worker is killed -9 once a
checkpoint inside the epoch exists. Scenario `agent`: 2 agents x 1 worker on c10d rendezvous
(--nnodes 1:2, last_call_timeout as given); the second agent is killed -9 and the job goes on at world
size 1. Phases, measured from outside (process table polled every 5 ms) and from the run log:

  detection  kill -> the surviving worker exits (its Gloo peer vanished)
  restart    -> a new worker process exists (torchrun: stop, rendezvous, spawn)
  start-up   -> the resumed run continues (store join, data, model), less the checkpoint load
  load       reading and loading the checkpoint (the resume record's restore_s)
  first      -> the first progress line after the resume (--log-interval steps trained)

With --every-steps 1 every step is checkpointed (written behind training, and kept in /dev/shm), so a
restarted worker resumes from memory having lost at most the step in flight.

Usage: bench/restart_cost_bench.py [--dtrain build/dtrain] [--scenario worker|agent|both] [--reps 3]
       [--every-steps 20] [--last-call 3] [--kill-after-s 0.5]
"""
import argparse
import glob
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

TORCHRUN = "/usr/bin/torchrun"
# Debian 12's torchrun crashes on Python 3.11 without these (docs/elastic.md).
TORCHRUN_LOG_FLAGS = ["--redirects", "1", "--tee", "1"]


def workers(dtrain, marker):
    """Pids of dtrain processes (not torchrun's) whose command line carries `marker`."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].decode(errors="replace") == dtrain and any(marker.encode() in a for a in argv):
            found.append(int(pid))
    return sorted(found)


def wait_until(predicate, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.005)
    sys.exit(f"restart_cost_bench: timed out waiting for {what}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parent_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


def run_once(args, scenario, work):
    log_dir = tempfile.mkdtemp(dir=work, prefix=f"{scenario}-")
    ck_dir = os.path.join(log_dir, "ck")
    train = [args.dtrain, "--workload", "mnist", "--synthetic", "--epochs", "1", "--max-steps", str(args.steps),
             "--eval-samples", "500", "--log-interval", "5", "--progress", "off", "--sample-interval-s", "0",
             "--checkpoint-every-steps", str(args.every_steps), "--log-dir", log_dir, "--checkpoint-dir", ck_dir]
    agents = []
    if scenario == "worker":
        agents.append(subprocess.Popen([TORCHRUN, "--standalone", "--nproc_per_node", "2", "--max_restarts", "1",
                                        "--monitor_interval", "1", "--log_dir", os.path.join(log_dir, "tl")] +
                                       TORCHRUN_LOG_FLAGS + ["--no_python"] + train,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
    else:
        port = free_port()
        for i in range(2):
            agents.append(subprocess.Popen(
                [TORCHRUN, "--nnodes", "1:2", "--nproc_per_node", "1", "--max_restarts", "3", "--monitor_interval", "1",
                 "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{port}", "--rdzv_id", f"bench{port}",
                 "--rdzv_conf", f"last_call_timeout={args.last_call}", "--log_dir", os.path.join(log_dir, f"tl{i}")] +
                TORCHRUN_LOG_FLAGS + ["--no_python"] + train,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
            time.sleep(1.0)  # the first agent hosts the rendezvous store
    try:
        # Pruning keeps the newest few: with a checkpoint every step, the one at step 2 x every may be gone
        # by the time it is looked for, so any at or past it will do.
        wait_until(lambda: reached_step(ck_dir) >= 2 * args.every_steps, 300, "a checkpoint inside the epoch")
        time.sleep(args.kill_after_s)  # some steps past the checkpoint: they are lost and trained again
        before = workers(args.dtrain, log_dir)
        if len(before) != 2:
            sys.exit(f"restart_cost_bench: expected 2 workers, found {before}")
        if scenario == "worker":
            victim, survivor = before[1], before[0]
            t_kill = time.time()
            os.kill(victim, signal.SIGKILL)
        else:
            # The second agent (not the first, which hosts the rendezvous) and its worker.
            agent = agents[1].pid
            victims = [pid for pid in before if parent_of(pid) == agent]
            if len(victims) != 1:
                sys.exit(f"restart_cost_bench: the second agent ({agent}) has workers {victims} of {before}")
            survivor = next(pid for pid in before if pid != victims[0])
            t_kill = time.time()
            os.kill(agent, signal.SIGKILL)
        wait_until(lambda: not alive(survivor), 300, "the surviving worker to stop")
        t_detect = time.time()
        wait_until(lambda: [p for p in workers(args.dtrain, log_dir) if p not in before], 300, "a restarted worker")
        t_spawn = time.time()
        # Rank 0 rewrites the progress mark at every progress line: the first mark newer than the restart is
        # when training was under way again (polled every 5 ms: at worst one line late).
        t_first = wait_until(lambda: newer_mark(ck_dir, t_spawn), 300, "the first progress line after the restart")
        for agent in agents:
            if agent.poll() is None and (scenario == "worker" or agent is agents[0]):
                agent.wait(timeout=600)
    finally:
        for agent in agents:
            if agent.poll() is None:
                os.killpg(agent.pid, signal.SIGKILL)
    runs = sorted(glob.glob(log_dir + "/*/events.jsonl"))
    events = [json.loads(line) for line in open(runs[-1])]
    resume = next(e for e in events if e["event"] == "resume")
    t_resume = resume["unix_time_ms"] / 1000.0
    return {
        "detection": t_detect - t_kill,
        "restart": t_spawn - t_detect,
        "start-up": t_resume - t_spawn - resume["restore_s"],
        "load": resume["restore_s"],
        "first": t_first - t_resume,
        "total": t_first - t_kill,
        "steps_redone": resume.get("steps_redone", -1),
        "source": resume.get("source", "disk"),
        "world": f"{resume['from_world_size']}->{resume['world_size']}",
    }


def reached_step(ck_dir):
    """The highest step of the checkpoints inside epoch 1 in `ck_dir` (0: none yet)."""
    steps = [int(p.rsplit("-", 1)[1][:-3]) for p in glob.glob(os.path.join(ck_dir, "checkpoint-epoch-000001-step-*.safetensors"))]
    return max(steps, default=0)


def newer_mark(ck_dir, since):
    """The time of the progress mark in `ck_dir` if it was written after `since`, else None."""
    try:
        fields = open(os.path.join(ck_dir, "progress")).read().split()
    except OSError:
        return None
    if len(fields) == 5 and fields[0] == "dtrain-progress" and float(fields[4]) > since:
        return float(fields[4])
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtrain", default="build/dtrain")
    parser.add_argument("--scenario", choices=["worker", "agent", "both"], default="both")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--every-steps", type=int, default=20)
    parser.add_argument("--last-call", type=int, default=3)
    parser.add_argument("--kill-after-s", type=float, default=0.5,
                        help="seconds between the checkpoint at step 2 x --every-steps and the kill")
    args = parser.parse_args()
    args.dtrain = os.path.realpath(args.dtrain)
    if not os.path.exists(TORCHRUN):
        sys.exit(f"restart_cost_bench: needs {TORCHRUN} (Debian: python3-torch)")
    scenarios = ["worker", "agent"] if args.scenario == "both" else [args.scenario]
    print(f"machine: {platform.node()}, {os.cpu_count()} cores; mnist synthetic, checkpoint every "
          f"{args.every_steps} steps, kill {args.kill_after_s} s after the checkpoint at step {2 * args.every_steps}")
    phases = ["detection", "restart", "start-up", "load", "first", "total"]
    with tempfile.TemporaryDirectory(prefix="dtrain-restart-bench-") as work:
        for scenario in scenarios:
            results = [run_once(args, scenario, work) for _ in range(args.reps)]
            print(f"\nscenario {scenario} ({results[0]['world']} ranks), {args.reps} runs, seconds (median, min-max):")
            for phase in phases:
                values = [r[phase] for r in results]
                print(f"  {phase:10s} {statistics.median(values):7.2f}  ({min(values):.2f}-{max(values):.2f})")
            print(f"  steps redone (optimizer steps past the checkpoint, from rank 0's progress mark): "
                  f"{[r['steps_redone'] for r in results]}; resumed from {[r['source'] for r in results]}")


if __name__ == "__main__":
    main()
