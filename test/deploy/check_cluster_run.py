#!/usr/bin/python3
"""Checks one dtrain run on the emulated cluster (deploy/local/cluster.sh) from its run log: it ran on the
expected number of hosts, its traffic between them went over TCP on the cluster's interface, and the
bytes that interface carried per step are what a ring allreduce of the gradients moves (2(N-1)/N x the
bytes allreduced), so the gradients crossed the links rather than shared memory.
Usage: check_cluster_run.py LOG_DIR HOSTS INTERFACE
Exit 1 naming what does not hold."""

import json
import sys
from pathlib import Path


def main():
    log_dir, hosts, interface = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    logs = sorted(log_dir.glob("*/events.jsonl"))
    if not logs:
        print(f"check_cluster_run: FAIL: no run log under {log_dir}")
        return 1
    records = [json.loads(line) for line in logs[-1].read_text().splitlines() if line.strip()]
    start = next(r for r in records if r["event"] == "run_start")
    epochs = [r for r in records if r["event"] == "epoch_end"]
    problems = []
    if len(start["hosts"]) != hosts:
        problems.append(f"hosts {start['hosts']}, expected {hosts}")
    network = start["network"]
    if network["transport"] != "tcp" or network["interface"] != interface:
        problems.append(f"network {network}, expected tcp over {interface}")
    if not epochs:
        problems.append("no epoch_end record")
    for e in epochs:
        ring = 2 * (hosts - 1) / hosts * e["bytes_allreduced_per_step"]
        # TCP/IP headers add about 3% at MTU 1500 (VXLAN about 4% more); acknowledgements and the
        # heartbeat add a little. Below the ring's payload: the gradients did not all cross the link.
        if not ring * 0.98 <= e["net_tx_bytes_per_step"] <= ring * 1.25:
            problems.append(f"epoch {e['epoch']}: {e['net_tx_bytes_per_step']:.0f} bytes sent per step on "
                            f"{interface}, expected {ring:.0f} (ring allreduce of "
                            f"{e['bytes_allreduced_per_step']} bytes over {hosts} hosts) to 25% more")
    for p in problems:
        print(f"check_cluster_run: FAIL: {logs[-1]}: {p}")
    if not problems:
        e = epochs[-1]
        print(f"check_cluster_run: {len(start['hosts'])} hosts, {network['transport']} over {network['interface']} "
              f"(MTU {network['mtu']}), {e['net_tx_bytes_per_step'] / e['bytes_allreduced_per_step']:.3f} x the "
              f"gradient bytes sent per step (ring: {2 * (hosts - 1) / hosts:.3f})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
