#!/usr/bin/env bash
# Allreduce across the emulated cluster (deploy/local/cluster.sh): for each link rate and node count, a
# fresh cluster with one rank per node, and dtrain_allreduce_bench's sweep of dtrain's communicator
# (what the reducer uses) against the library's own call on the same buffers, in the same job, for each
# backend: mpi (raw: MPI_Allreduce) and gloo (raw: ProcessGroupGloo::allreduce, what
# torch.distributed.all_reduce runs). Prints,
# per configuration and size, busbw as a fraction of the shaped link rate and dtrain / raw; writes each
# sweep's JSON (the input of dtrain-report's scaling model, --calibrate) to OUT.
#
#   bench/cluster_allreduce_bench.sh --rates "1gbit 5gbit" --nodes "2 4 8" --out bench-out/allreduce
#
# Options: --rates, --nodes, --backends (default "mpi gloo"), --out DIR, --overlay none|vxlan, --mtu BYTES, --min-bytes, --max-bytes
# (default 256K and 32M, factor 4), --iters (default 8), --bench PATH (default build/dtrain_allreduce_bench).
# Needs root (namespaces). The nodes share this machine's cores: at high rates and many nodes the cores,
# not the link, may bound busbw; the table's last column says how close to the link each size came.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
cluster="$root/deploy/local/cluster.sh"
rates="1gbit 5gbit"
backends="mpi gloo"
nodes="2 4 8"
out=bench-out/allreduce
overlay=none
mtu=1500
min_bytes=256K
max_bytes=32M
iters=8
bench=$root/build/dtrain_allreduce_bench
while [ $# -gt 0 ]; do
  case "$1" in
    --rates) rates=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --backends) backends=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --overlay) overlay=$2; shift 2 ;;
    --mtu) mtu=$2; shift 2 ;;
    --min-bytes) min_bytes=$2; shift 2 ;;
    --max-bytes) max_bytes=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --bench) bench=$2; shift 2 ;;
    *) echo "cluster_allreduce_bench: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[ -x "$bench" ] || { echo "cluster_allreduce_bench: no $bench (build with -DDTRAIN_BUILD_BENCH=ON)" >&2; exit 2; }
bench=$(readlink -f "$bench")
# shellcheck source=../scripts/mpi_env.sh
. "$root/scripts/mpi_env.sh"
export DTRAIN_CLUSTER=${DTRAIN_CLUSTER:-bench}
trap 'bash "$cluster" down >/dev/null 2>&1' EXIT
mkdir -p "$out"
out=$(readlink -f "$out")

for rate in $rates; do
  for n in $nodes; do
    bash "$cluster" up "$n" --rate "$rate" --mtu "$mtu" --overlay "$overlay" >/dev/null
    for backend in $backends; do
      json="$out/allreduce-$backend-$rate-n$(printf %02d "$n")-$overlay-mtu$mtu.json"
      echo "== $backend, $n nodes, $rate links, overlay $overlay, MTU $mtu"
      bash "$cluster" mpirun -- "$bench" --backend "$backend" --min-bytes "$min_bytes" --max-bytes "$max_bytes" \
        --factor 4 --warmup 2 --iters "$iters" --json "$json"
      # The link rate travels with the sweep, for the model and the summary.
      /usr/bin/python3 - "$json" "$rate" "$overlay" "$mtu" <<'PY'
import json, re, sys
path, rate, overlay, mtu = sys.argv[1:5]
number, unit = re.fullmatch(r"([0-9.]+)([a-z]*)", rate).groups()
bits = float(number) * {"": 1, "bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}[unit]
sweep = json.load(open(path))
sweep.update(link_rate=rate, link_gbps=bits / 8 / 1e9, overlay=overlay, mtu=int(mtu))
json.dump(sweep, open(path, "w"))
PY
    done
  done
done
bash "$cluster" down >/dev/null 2>&1

echo
echo "# busbw (GB/s) as a fraction of the link rate (1 GB/s = 8 Gbit/s), and dtrain / raw time (below 1: dtrain faster)"
/usr/bin/python3 - "$out" <<'PY'
import glob, json, sys
print(f"{'backend':>7} {'link':>6} {'nodes':>5} {'bytes':>10} | {'dtrain busbw':>12} {'of link':>7} | {'raw busbw':>9} {'of link':>7} | {'dtrain/raw':>10}")
for path in sorted(glob.glob(sys.argv[1] + "/allreduce-*.json")):
    s = json.load(open(path))
    for r in s["results"]:
        print(f"{s['backend']:>7} {s['link_rate']:>6} {s['world_size']:>5} {r['bytes']:>10} | {r['dtrain_busbw_gbps']:>12.4f} "
              f"{r['dtrain_busbw_gbps'] / s['link_gbps']:>7.1%} | {r['raw_busbw_gbps']:>9.4f} "
              f"{r['raw_busbw_gbps'] / s['link_gbps']:>7.1%} | {r['ratio']:>10.3f}")
PY
