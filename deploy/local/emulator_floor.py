#!/usr/bin/python3
"""The emulated cluster's own cost: what moving a byte between two nodes of deploy/local/cluster.sh costs
their CPU shares, against what the same stream costs inside one node, where only the kernel's TCP stack
works (as on a host whose NIC does the rest). The difference is the emulator's floor: the veth pair, the
bridge and the token buckets, which a real platform does not charge to a node. It also counts the softirq
time the host spent meanwhile, which no node's quota pays.

Run on a cluster of two or more nodes that is up (with the study's --rate and --cpu):

  deploy/local/emulator_floor.py [--seconds 2] [--reps 3] [--json FILE] [--platform NAME]

Prints one line per measurement and the floor, in CPU seconds per GB moved (sent by one node and received
by the other), and with --json writes them for dtrain-report (calibration/floor.json in a study).
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PORT = 29561

# The two ends, run inside the nodes: a receiver that discards what comes, and a sender that writes 1 MiB
# at a time for the given seconds (so any link rate gets a stream of the same length). Python's socket calls pass the buffers straight to the kernel, so the processes' own
# cost is the system calls; the receiver prints the bytes it got once the sender closes.
RECEIVER = r"""
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(1)
print("listening", flush=True)
c, _ = s.accept(); buf = bytearray(1 << 20); got = 0
while True:
    n = c.recv_into(buf)
    if n == 0: break
    got += n
print(got, flush=True)
"""
SENDER = r"""
import socket, sys, time
seconds = float(sys.argv[3]); chunk = bytes(1 << 20)
for attempt in range(100):
    try:
        c = socket.create_connection((sys.argv[1], int(sys.argv[2]))); break
    except OSError:
        time.sleep(0.05)
end = time.monotonic() + seconds
while time.monotonic() < end:
    c.sendall(chunk)
c.shutdown(socket.SHUT_WR); c.recv(1); c.close()
"""


def usage(cluster):
    """{node: cpu seconds (user + system)} of every node since `up`."""
    out = subprocess.run(["bash", cluster, "usage"], check=True, capture_output=True, text=True).stdout
    figures = {}
    for line in out.splitlines()[1:]:
        node, user, system, _throttled = line.split()
        figures[node] = float(user) + float(system)
    return figures


def softirq_s():
    """Seconds of softirq and irq time the whole host has spent (/proc/stat, USER_HZ ticks)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return (int(fields[6]) + int(fields[7])) / os.sysconf("SC_CLK_TCK")


def stream(cluster, sender_node, receiver_node, receiver_addr, seconds):
    """One stream of `seconds`: bytes moved, wall seconds, the nodes' CPU seconds, the host's softirq seconds."""
    receiver = subprocess.Popen(["bash", cluster, "exec", receiver_node, sys.executable, "-c", RECEIVER, str(PORT)],
                                stdout=subprocess.PIPE, text=True)
    if receiver.stdout.readline().strip() != "listening":
        sys.exit("emulator_floor: the receiver did not start")
    before, irq_before = usage(cluster), softirq_s()
    start = time.perf_counter()
    try:
        subprocess.run(["bash", cluster, "exec", sender_node, sys.executable, "-c", SENDER, receiver_addr, str(PORT),
                        str(seconds)], check=True, timeout=seconds + 60)
        reply = receiver.communicate(timeout=60)[0].strip()
    except subprocess.TimeoutExpired as e:
        receiver.kill()
        sys.exit(f"emulator_floor: a {seconds:g} s stream from {sender_node} to {receiver_node} did not end within "
                 f"{e.timeout:g} s (a link down or a node without CPU?)")
    if not reply.isdigit():
        sys.exit(f"emulator_floor: the receiver on {receiver_node} printed {reply!r}, expected the bytes it got")
    got = int(reply)
    wall = time.perf_counter() - start
    after, irq_after = usage(cluster), softirq_s()
    if got <= 0:
        sys.exit("emulator_floor: nothing arrived")
    cpu = {node: after[node] - before[node] for node in after}
    return got, wall, cpu, irq_after - irq_before


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cluster-script", default=os.path.join(HERE, "cluster.sh"))
    parser.add_argument("--seconds", type=float, default=2.0, help="length of each stream (default 2)")
    parser.add_argument("--reps", type=int, default=3, help="streams of each kind; the median is kept")
    parser.add_argument("--json", default="", help="write the figures to this file")
    parser.add_argument("--platform", default="", help="the study's platform label, kept in the JSON")
    args = parser.parse_args()
    def median(values):
        values = sorted(values)
        return values[len(values) // 2]

    # Per stream: Gbit/s, the nodes' CPU seconds per GB, the host's softirq seconds per GB.
    def figures_of(got, wall, cpu, irq):
        return got * 8 / wall / 1e9, cpu / (got / 1e9), irq / (got / 1e9)

    link, local = [], []
    for _ in range(args.reps):  # interleaved, so that drifting load hits both alike
        got, wall, cpu, irq = stream(args.cluster_script, "node1", "node2", "node2", args.seconds)
        link.append(figures_of(got, wall, cpu.get("node1", 0.0) + cpu.get("node2", 0.0), irq))
        got, wall, cpu, irq = stream(args.cluster_script, "node1", "node1", "127.0.0.1", args.seconds)
        local.append(figures_of(got, wall, cpu.get("node1", 0.0), irq))
    link_gbps, link_cpu, link_irq = (median([m[i] for m in link]) for i in range(3))
    local_gbps, local_cpu, local_irq = (median([m[i] for m in local]) for i in range(3))
    figures = {
        "bench": "emulator_floor", "platform": args.platform, "seconds": args.seconds, "reps": args.reps,
        # Between two nodes: both nodes' CPU (sender's and receiver's quota), per GB moved.
        "link_gbps": link_gbps, "link_node_cpu_s_per_gb": link_cpu, "link_softirq_s_per_gb": link_irq,
        # Inside one node over loopback: the TCP stack's own cost of sending and receiving.
        "host_stack_gbps": local_gbps, "host_stack_cpu_s_per_gb": local_cpu, "host_stack_softirq_s_per_gb": local_irq,
    }
    # What the emulation charges the nodes beyond a host's own stack, and what the host pays for it.
    figures["floor_node_cpu_s_per_gb"] = max(0.0, figures["link_node_cpu_s_per_gb"] - figures["host_stack_cpu_s_per_gb"])
    figures["floor_softirq_s_per_gb"] = max(0.0, figures["link_softirq_s_per_gb"] - figures["host_stack_softirq_s_per_gb"])
    print(f"emulator floor: a stream between two nodes ran at {figures['link_gbps']:.2f} Gbit/s and cost the nodes "
          f"{figures['link_node_cpu_s_per_gb']:.2f} CPU s per GB (host softirq {figures['link_softirq_s_per_gb']:.2f}); "
          f"inside one node {figures['host_stack_gbps']:.2f} Gbit/s and {figures['host_stack_cpu_s_per_gb']:.2f} CPU s "
          f"per GB (softirq {figures['host_stack_softirq_s_per_gb']:.2f}). The emulator's floor: "
          f"{figures['floor_node_cpu_s_per_gb']:.2f} CPU s per GB charged to the nodes, "
          f"{figures['floor_softirq_s_per_gb']:.2f} s per GB of the host's softirq")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
