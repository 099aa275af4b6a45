#!/usr/bin/env bash
# An emulated cluster on this machine, made of the kernel's own parts: N nodes, each a network namespace
# with its own host name (node1..nodeN), one link to a switch, and optionally a fixed CPU share, so that
# dtrain runs across them the way it runs across real nodes (mpirun with a hostfile, torchrun with one
# agent per node) and its traffic crosses real TCP links that can be shaped, made lossy, or cut.
#
#   deploy/local/cluster.sh up 4 --rate 1gbit --cpu 0.5      # make node1..node4
#   deploy/local/cluster.sh mpirun -- build/dtrain --workload mnist --synthetic --epochs 1
#   deploy/local/cluster.sh torchrun -- build/dtrain --workload mnist --synthetic --epochs 1
#   deploy/local/cluster.sh down
#
# Commands:
#   up N [options]        make the cluster (any earlier one of the same --name is taken down first)
#     --rate RATE         each node's link rate, both directions (tc tbf: 200mbit, 1gbit, 5gbit); default unshaped
#     --mtu BYTES         the links' MTU (default 1500; the overlay's is 50 bytes less, as VXLAN needs)
#     --loss FRACTION     drop this fraction of each node's packets, each direction (iptables statistic);
#                         this kernel has no netem, so there is no delay emulation: a link's latency is the
#                         veth's own (tens of microseconds)
#     --overlay MODE      none (default: nodes talk on the switch) or vxlan: the nodes' names resolve to
#                         addresses on a VXLAN overlay across the switch, as rootless Kubernetes (flannel,
#                         Usernetes) carries pod traffic; every byte is encapsulated and counted against the link
#     --cpu CORES         each node's CPU share as a CFS quota (0.25 = a quarter core), the same at any N
#   down                  remove everything `up` made; safe to run when nothing is up
#   exec NODE CMD...      run CMD on NODE: in its namespaces, its host name, its CPU share and the
#                         environment that points MPI and Gloo at its cluster interface
#   mpirun [ARGS] -- CMD  mpirun from node1 with a hostfile of every node, one rank per node by default,
#                         remote nodes reached through Open MPI's rsh launcher (this script as the agent)
#   torchrun [ARGS] -- CMD  one torchrun agent per node, c10d rendezvous at node1:29400; ARGS go to every
#                         agent (default --nnodes N --nproc_per_node 1, the spelling torchrun 1.13 and later accept)
#   link NODE up|down     set a node's link up or down (a cable pulled, a switch port failing)
#   shape NODE RATE       change one node's link rate (or "none")
#   cpu NODE CORES        change one node's CPU share (a cluster made with --cpu): a slower node
#   usage                 each node's CPU seconds since `up` (user, system) and the time its quota throttled it
#   loss NODE FRACTION    change one node's packet loss (0: none)
#   mtu NODE BYTES        change one node's MTU (an MTU mismatch)
#   status                the nodes, their addresses, links and shaping
#   hostfile              print the path of the Open MPI hostfile
# Every command takes --name NAME (default dtrain; or DTRAIN_CLUSTER): several clusters can coexist.
#
# Safety. Everything lives in namespaces this script makes: the nodes' namespaces (NAME-node1..) and the
# switch's (NAME-switch), which holds the bridge. The addresses (10.213.0.0/24 on the switch,
# 10.214.0.0/24 on the overlay) exist only inside them. No namespace gets a default route, and nothing
# links them to this machine's own namespace, so no packet of theirs can leave the machine or reach its
# network. The cluster's state is in /run/dtrain-cluster/NAME (host names, hostfile, settings),
# /etc/netns/NAME-nodeK (each node's /etc/hosts, as `ip netns exec` expects) and, with --cpu, one cgroup
# per node; `down` removes all of it, and a failing `up` removes what it had made. Needs root.
set -euo pipefail

self=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
name=${DTRAIN_CLUSTER:-dtrain}
readonly underlay_net=10.213.0 overlay_net=10.214.0 vxlan_id=4213 vxlan_port=4789 rdzv_port=29400

die() { echo "cluster: $*" >&2; exit 2; }
say() { echo "cluster: $*" >&2; }

# Open MPI's rsh launcher runs this script as its agent (cluster_mpirun sets DTRAIN_CLUSTER_AGENT):
# `cluster.sh [options] HOST COMMAND...`, COMMAND being one shell command line that starts orted.
if [ -n "${DTRAIN_CLUSTER_AGENT:-}" ]; then
  while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done
  case "${1:-}" in node[0-9]*) agent_host=$1; shift; set -- agent "$agent_host" "$@" ;; esac
fi

# The command and --name (anywhere before a `--` that starts a launched command).
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --name) [ $# -ge 2 ] || die "--name needs a value"; name=$2; shift 2 ;;
    --) args+=("$@"); break ;;
    *) args+=("$1"); shift ;;
  esac
done
set -- ${args[@]+"${args[@]}"}
[ $# -ge 1 ] || die "no command (expected up, down, exec, mpirun, torchrun, link, shape, cpu, loss, mtu, usage, status or hostfile)"
command=$1
shift
case "$name" in ''|*[!a-z0-9-]*) die "--name '$name' must be lower-case letters, digits and -" ;; esac
[ ${#name} -le 8 ] || die "--name '$name' is longer than 8 characters (interface names are limited to 15)"

state=/run/dtrain-cluster/$name
switch_ns=$name-switch
node_ns() { echo "$name-node$1"; }

need_root() {
  [ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, links and cgroups); run it as root"
  local tool
  for tool in ip tc nsenter unshare; do
    command -v "$tool" >/dev/null || die "'$tool' not found (Debian: iproute2, util-linux)"
  done
}

# --- settings written by `up`, read by every other command -----------------------------------------
nodes() { cat "$state/nodes" 2>/dev/null || die "no cluster '$name' is up (deploy/local/cluster.sh up N)"; }
setting() { sed -n "s/^$1=//p" "$state/settings" 2>/dev/null; }
cluster_if() { if [ "$(setting overlay)" = vxlan ]; then echo vxlan0; else echo eth0; fi; }

node_index() {  # node1 -> 1, checked against the cluster's size
  local node=$1 n
  [ -s "$state/nodes" ] || die "no cluster '$name' is up (deploy/local/cluster.sh up N)"
  n=$(nodes)
  case "$node" in node[1-9]*) ;; *) die "unknown node '$node' (expected node1..node$n)" ;; esac
  local k=${node#node}
  case "$k" in *[!0-9]*) die "unknown node '$node' (expected node1..node$n)" ;; esac
  [ "$k" -ge 1 ] && [ "$k" -le "$n" ] || die "unknown node '$node' (expected node1..node$n)"
  echo "$k"
}

# --- shaping ------------------------------------------------------------------------------------------
rate_bits() {  # 200mbit, 1gbit, 5gbit, 1000000 -> bits per second
  local rate=$1 number unit
  number=${rate%%[a-zA-Z]*}
  unit=${rate#"$number"}
  case "$number" in ''|*[!0-9.]*) die "--rate '$rate' is not a rate (e.g. 200mbit, 1gbit)" ;; esac
  case "$unit" in
    ''|bit) awk -v n="$number" 'BEGIN { printf "%.0f", n }' ;;
    kbit) awk -v n="$number" 'BEGIN { printf "%.0f", n * 1e3 }' ;;
    mbit) awk -v n="$number" 'BEGIN { printf "%.0f", n * 1e6 }' ;;
    gbit) awk -v n="$number" 'BEGIN { printf "%.0f", n * 1e9 }' ;;
    *) die "--rate '$rate' has unit '$unit' (expected bit, kbit, mbit or gbit)" ;;
  esac
}

# shape_dev NS DEV RATE: a token bucket on DEV's egress, holding 1 ms at the rate and at least 128 KiB
# (two TSO segments). A real link has no burst above its rate, but the bucket trades two errors:
# with 4 ms, 256 KiB allreduces crossed a 5 Gbit/s link at 3x its rate; with 0.25 ms (64 KiB), TCP
# reached only 45% of a 1 Gbit/s link. With 1 ms, MPI reached 91-93% of 1 Gbit/s at 1-16 MiB
# (bench/cluster_allreduce_bench.sh), and only messages below about a bucket's worth per ring step can
# beat the rate. It queues at most 20 ms.
shape_dev() {
  local ns=$1 dev=$2 rate=$3 bits burst
  ip -n "$ns" link show "$dev" >/dev/null 2>&1 || return 0
  tc -n "$ns" qdisc del dev "$dev" root 2>/dev/null || true
  [ "$rate" = none ] && return 0
  bits=$(rate_bits "$rate")
  [ "$bits" -gt 0 ] || die "--rate '$rate' must be positive"
  burst=$(awk -v b="$bits" 'BEGIN { x = b / 8 * 0.001; if (x < 131072) x = 131072; printf "%.0f", x }')
  tc -n "$ns" qdisc add dev "$dev" root tbf rate "${bits}bit" burst "$burst" latency 20ms
}

shape_node() {  # both directions of node K's link: its own egress, and the switch port's egress towards it
  shape_dev "$(node_ns "$1")" eth0 "$2"
  shape_dev "$switch_ns" "$name-p$1" "$2"
}

# loss_node K FRACTION: drop that fraction of the node's packets on its link, each direction.
loss_node() {
  local ns fraction=$2
  ns=$(node_ns "$1")
  awk -v p="$fraction" 'BEGIN { exit !(p ~ /^[0-9]*\.?[0-9]+$/ && p >= 0 && p < 1) }' ||
    die "--loss '$fraction' must be a fraction in [0, 1) (0.01 = 1%)"
  ip netns exec "$ns" iptables -F INPUT 2>/dev/null || true
  ip netns exec "$ns" iptables -F OUTPUT 2>/dev/null || true
  if awk -v p="$fraction" 'BEGIN { exit !(p > 0) }'; then
    command -v iptables >/dev/null || die "'iptables' not found (Debian: iptables)"
    ip netns exec "$ns" iptables -A INPUT -i eth0 -m statistic --mode random --probability "$fraction" -j DROP
    ip netns exec "$ns" iptables -A OUTPUT -o eth0 -m statistic --mode random --probability "$fraction" -j DROP
  fi
}

mtu_node() {
  local ns
  ns=$(node_ns "$1")
  ip -n "$ns" link set eth0 mtu "$2"
  ip -n "$switch_ns" link set "$name-p$1" mtu "$2"
  if ip -n "$ns" link show vxlan0 >/dev/null 2>&1; then ip -n "$ns" link set vxlan0 mtu $(($2 - 50)); fi
}

# --- CPU shares ---------------------------------------------------------------------------------------
# cgroup v1 (a `cpu` hierarchy) or v2 (cpu.max); the node's processes join it in `exec`.
cgroup_root() {
  if [ -d /sys/fs/cgroup/cpu ] && [ -f /sys/fs/cgroup/cpu/cgroup.procs ]; then
    echo "/sys/fs/cgroup/cpu/dtrain-cluster-$name"
  elif [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    echo "/sys/fs/cgroup/dtrain-cluster-$name"
  fi
}

# cgroup v1 mounts cpuacct apart from cpu (on some hosts): the node's CPU time is counted there, with
# or without a quota, so that `usage` can say where each node's CPU went.
acct_root() {
  if [ -f /sys/fs/cgroup/cpuacct/cpuacct.usage ]; then
    echo "/sys/fs/cgroup/cpuacct/dtrain-cluster-$name"
  elif [ -f /sys/fs/cgroup/cpu/cpuacct.usage ]; then
    echo "/sys/fs/cgroup/cpu/dtrain-cluster-$name"
  fi
}

make_acct_cgroups() {
  local n=$1 root k
  root=$(acct_root)
  [ -n "$root" ] || return 0
  for k in $(seq 1 "$n"); do mkdir -p "$root/node$k"; done
}

# set_node_cpu K CORES: node K's CFS quota.
set_node_cpu() {
  local k=$1 cores=$2 root period quota
  awk -v c="$cores" 'BEGIN { exit !(c ~ /^[0-9]*\.?[0-9]+$/ && c > 0) }' || die "cpu share '$cores' must be a positive number of cores"
  root=$(cgroup_root)
  # The shortest period whose quota the kernel takes (quotas start at 1 ms), not CFS's usual 100 ms: a
  # node out of quota stops, peers in a collective wait for it, and with 100 ms periods every allreduce
  # waited out whole periods (mnist at 0.25 cores: 0.75 s per step at 4 nodes, 0.44 s at 8). A short
  # period makes the share a steady quarter core rather than 25 ms of every 100.
  period=$(awk -v c="$cores" 'BEGIN { p = 1000 / c; if (p < 1000) p = 1000; if (p > 100000) p = 100000; printf "%.0f", p }')
  quota=$(awk -v c="$cores" -v p="$period" 'BEGIN { printf "%.0f", c * p }')
  mkdir -p "$root/node$k"
  if [ -f "$root/node$k/cpu.max" ]; then
    echo "$quota $period" >"$root/node$k/cpu.max"
  else
    # Lower the quota before the period and raise it after, so that the pair is valid at every moment.
    echo "$quota" >"$root/node$k/cpu.cfs_quota_us" 2>/dev/null || true
    echo "$period" >"$root/node$k/cpu.cfs_period_us"
    echo "$quota" >"$root/node$k/cpu.cfs_quota_us"
  fi
}

make_cgroups() {
  local cores=$1 n=$2 root k
  awk -v c="$cores" 'BEGIN { exit !(c ~ /^[0-9]*\.?[0-9]+$/ && c > 0) }' || die "--cpu '$cores' must be a positive number of cores"
  root=$(cgroup_root)
  [ -n "$root" ] || die "--cpu needs cgroup v1's cpu controller or cgroup v2; neither is mounted"
  mkdir -p "$root"
  if [ -f "$(dirname "$root")/cgroup.controllers" ]; then  # v2: delegate the cpu controller downwards
    echo +cpu >"$(dirname "$root")/cgroup.subtree_control" 2>/dev/null || true
    echo +cpu >"$root/cgroup.subtree_control" || die "cannot enable the cpu controller in $root"
  fi
  for k in $(seq 1 "$n"); do set_node_cpu "$k" "$cores"; done
}

remove_cgroups() {
  local root k
  for root in "$(cgroup_root)" "$(acct_root)"; do
    [ -n "$root" ] && [ -d "$root" ] || continue
    for k in "$root"/node*; do
      [ -d "$k" ] || continue
      # Processes still in it (a launch that outlived `down`) move back to the parent's parent.
      while read -r pid; do echo "$pid" >"$(dirname "$root")/cgroup.procs" 2>/dev/null || true; done <"$k/cgroup.procs"
      rmdir "$k" 2>/dev/null || true
    done
    rmdir "$root" 2>/dev/null || true
  done
}

# node_cpu_usage K: "user_s system_s throttled_s" of node K's processes since `up` (0 where not counted).
node_cpu_usage() {
  local k=$1 acct quota_root
  acct=$(acct_root)
  quota_root=$(cgroup_root)
  local user=0 system=0 throttled=0
  if [ -n "$acct" ] && [ -f "$acct/node$k/cpuacct.stat" ]; then
    # USER_HZ ticks.
    read -r user system < <(awk -v hz="$(getconf CLK_TCK)" '/^user/ {u = $2 / hz} /^system/ {s = $2 / hz} END {print u, s}' "$acct/node$k/cpuacct.stat")
  elif [ -n "$quota_root" ] && [ -f "$quota_root/node$k/cpu.stat" ] && grep -q '^user_usec' "$quota_root/node$k/cpu.stat"; then
    read -r user system < <(awk '/^user_usec/ {u = $2 / 1e6} /^system_usec/ {s = $2 / 1e6} END {print u, s}' "$quota_root/node$k/cpu.stat")
  fi
  if [ -n "$quota_root" ] && [ -f "$quota_root/node$k/cpu.stat" ]; then
    throttled=$(awk '/^throttled_time/ {t = $2 / 1e9} /^throttled_usec/ {t = $2 / 1e6} END {print t + 0}' "$quota_root/node$k/cpu.stat")
  fi
  echo "$user $system $throttled"
}

# --- up and down --------------------------------------------------------------------------------------
cluster_down() {
  local ns k
  # Processes left in the nodes (a launch that is still running) end with their namespaces.
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$name-(node[0-9]+|switch)$" || true); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
  for k in "$state"/uts/node*; do
    [ -e "$k" ] || continue
    umount "$k" 2>/dev/null || true
  done
  rm -rf "$state"
  rm -rf /etc/netns/"$name"-node*
  remove_cgroups
}

cluster_up() {
  local n="" rate=none mtu=1500 loss=0 overlay=none cpu=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --rate) rate=$2; shift 2 ;;
      --mtu) mtu=$2; shift 2 ;;
      --loss) loss=$2; shift 2 ;;
      --overlay) overlay=$2; shift 2 ;;
      --cpu) cpu=$2; shift 2 ;;
      -*) die "up: unknown option '$1' (expected --rate, --mtu, --loss, --overlay, --cpu)" ;;
      *) [ -z "$n" ] || die "up: one node count, got '$n' and '$1'"; n=$1; shift ;;
    esac
  done
  case "$n" in ''|*[!0-9]*) die "up: needs a node count (1 to 200), got '${n}'" ;; esac
  [ "$n" -ge 1 ] && [ "$n" -le 200 ] || die "up: node count must be 1 to 200, got $n"
  case "$mtu" in ''|*[!0-9]*) die "--mtu must be bytes (576 to 9000), got '$mtu'" ;; esac
  [ "$mtu" -ge 576 ] && [ "$mtu" -le 9000 ] || die "--mtu must be 576 to 9000 bytes, got $mtu"
  case "$overlay" in none|vxlan) ;; *) die "--overlay must be none or vxlan, got '$overlay'" ;; esac
  [ "$rate" = none ] || rate_bits "$rate" >/dev/null
  [ "$overlay" = none ] || [ "$mtu" -ge 626 ] || die "--overlay vxlan needs --mtu of at least 626 (50 bytes of encapsulation)"
  [ -z "$cpu" ] || awk -v c="$cpu" 'BEGIN { exit !(c ~ /^[0-9]*\.?[0-9]+$/ && c > 0) }' ||
    die "--cpu '$cpu' must be a positive number of cores"
  awk -v l="$loss" 'BEGIN { exit !(l ~ /^[0-9]*\.?[0-9]+$/ && l < 1) }' ||
    die "--loss '$loss' must be a fraction in [0, 1) (0.01 = 1%)"
  local made
  if ! made=$(mkdir -p -- "$state/uts" 2>&1); then die "cannot create the cluster's state directory '$state': ${made##*: }"; fi

  cluster_down
  trap 'status=$?; if [ $status -ne 0 ]; then say "up failed (exit $status); removing what it made"; cluster_down; fi' EXIT
  mkdir -p -- "$state/uts"
  {
    echo "rate=$rate"; echo "mtu=$mtu"; echo "loss=$loss"; echo "overlay=$overlay"; echo "cpu=${cpu:-none}"
  } >"$state/settings"

  ip netns add "$switch_ns"
  ip -n "$switch_ns" link set lo up
  ip -n "$switch_ns" link add br0 type bridge
  ip -n "$switch_ns" link set br0 mtu "$mtu" up

  local hosts="127.0.0.1 localhost"$'\n' k ns addr
  : >"$state/hostfile"
  for k in $(seq 1 "$n"); do
    ns=$(node_ns "$k")
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    # The veth is made in the switch, then one end moves into the node: no end ever lives in this
    # machine's own namespace.
    ip -n "$switch_ns" link add "$name-p$k" mtu "$mtu" type veth peer name eth0 mtu "$mtu" netns "$ns"
    ip -n "$switch_ns" link set "$name-p$k" master br0 up
    ip -n "$ns" addr add "$underlay_net.$k/24" dev eth0
    ip -n "$ns" link set eth0 up
    # node1 is where mpirun runs. Keepalives find a cut node's daemon only while mpirun's connection to
    # it is idle; when mpirun was sending to it (the abort's kill order, once a rank gave up), the
    # kernel retransmits for net.ipv4.tcp_retries2 rounds: 15 by default, about 15 minutes of a hung
    # mpirun. 6 rounds give up after about 25 s, as docs/failures.md advises for a launcher node.
    [ "$k" -ne 1 ] || ip netns exec "$ns" sysctl -qw net.ipv4.tcp_retries2=6
    # Its own host name: what MPI, Gloo and dtrain's run log see as the node.
    touch "$state/uts/node$k"
    unshare --uts="$state/uts/node$k" hostname "node$k"
    addr=$underlay_net.$k
    if [ "$overlay" = vxlan ]; then
      addr=$overlay_net.$k
      ip -n "$ns" link add vxlan0 type vxlan id "$vxlan_id" dev eth0 local "$underlay_net.$k" dstport "$vxlan_port" nolearning
      ip -n "$ns" link set vxlan0 mtu $((mtu - 50))
      ip -n "$ns" addr add "$addr/24" dev vxlan0
      ip -n "$ns" link set vxlan0 up
    fi
    hosts+="$addr node$k"$'\n'
    echo "node$k slots=1" >>"$state/hostfile"
  done
  if [ "$overlay" = vxlan ]; then
    # As flannel programs its VTEPs: each peer's overlay MAC points at that peer's address, so unicast
    # goes to one node; the all-zeros entries replicate only broadcasts (ARP) to every peer. Without the
    # per-MAC entries every unicast frame went to all N-1 peers: at 8 nodes, mnist stepped 2.7x slower
    # than the network model predicted, which is how this was found.
    local -a macs=()
    for k in $(seq 1 "$n"); do macs[k]=$(ip -n "$(node_ns "$k")" -br link show vxlan0 | awk '{print $3}'); done
    for k in $(seq 1 "$n"); do
      for j in $(seq 1 "$n"); do
        [ "$j" -eq "$k" ] && continue
        ip netns exec "$(node_ns "$k")" bridge fdb append 00:00:00:00:00:00 dev vxlan0 dst "$underlay_net.$j"
        ip netns exec "$(node_ns "$k")" bridge fdb append "${macs[j]}" dev vxlan0 dst "$underlay_net.$j"
      done
    done
  fi
  for k in $(seq 1 "$n"); do
    mkdir -p "/etc/netns/$(node_ns "$k")"
    printf '%s' "$hosts" >"/etc/netns/$(node_ns "$k")/hosts"
    echo "node$k" >"/etc/netns/$(node_ns "$k")/hostname"
    shape_node "$k" "$rate"
    [ "$loss" = 0 ] || loss_node "$k" "$loss"
  done
  [ -z "$cpu" ] || make_cgroups "$cpu" "$n"
  make_acct_cgroups "$n"
  echo "$n" >"$state/nodes"
  trap - EXIT
  say "up: $n nodes (node1..node$n) on $(cluster_if_for "$overlay"); link ${rate/none/unshaped}, MTU $mtu$(
    [ "$loss" = 0 ] || echo ", loss $loss")$([ -z "$cpu" ] || echo ", $cpu cores per node")"
}

cluster_if_for() { if [ "$1" = vxlan ]; then echo "a VXLAN overlay (vxlan0)"; else echo "a bridge (eth0)"; fi; }

# --- running on nodes ---------------------------------------------------------------------------------
# node_exec K CMD...: CMD inside node K's network and UTS namespaces, with its /etc/hosts, in its cgroup. MPI's and Gloo's interface variables name the
# cluster's interface, so their traffic, and dtrain's network counters, use that one.
node_exec() {
  local k=$1 ns root iface
  shift
  ns=$(node_ns "$k")
  iface=$(cluster_if)
  root=$(cgroup_root)
  if [ -n "$root" ] && [ -d "$root/node$k" ]; then echo $$ >"$root/node$k/cgroup.procs"; fi
  root=$(acct_root)
  if [ -n "$root" ] && [ -d "$root/node$k" ]; then echo $$ >"$root/node$k/cgroup.procs"; fi
  export OMPI_MCA_btl_tcp_if_include=$iface OMPI_MCA_oob_tcp_if_include=$iface GLOO_SOCKET_IFNAME=$iface
  export DTRAIN_CLUSTER=$name
  # Not `ip netns exec`: it mounts a fresh /sys, which hides /sys/fs/cgroup, where dtrain reads the CPU
  # quota that sizes its threads (as in a Kubernetes pod). A private mount namespace puts the node's hosts
  # file over /etc/hosts instead.
  exec nsenter --net="/run/netns/$ns" --uts="$state/uts/node$k" -- \
    unshare --mount --propagation private -- /bin/sh -c 'mount --bind "$0" /etc/hosts && exec "$@"' \
    "/etc/netns/$ns/hosts" "$@"
}

rsh_agent() {  # HOST COMMAND...: what ssh would do on HOST
  [ $# -ge 2 ] || die "rsh agent: expected HOST COMMAND, got '$*'"
  local host=$1
  shift
  node_exec "$(node_index "$host")" /bin/sh -c "$*"
}

cluster_mpirun() {
  local n
  n=$(nodes)
  local -a mpi_args=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do mpi_args+=("$1"); shift; done
  [ "${1:-}" = -- ] || die "mpirun: expected [mpirun options] -- COMMAND"
  shift
  [ $# -ge 1 ] || die "mpirun: no command after --"
  local has_np=0 a
  for a in ${mpi_args[@]+"${mpi_args[@]}"}; do case "$a" in -np|-n|--np|-c) has_np=1 ;; esac; done
  [ "$has_np" -eq 1 ] || mpi_args=(-np "$n" ${mpi_args[@]+"${mpi_args[@]}"})
  # The agent is this script; orted reports back to mpirun in node1 over the cluster interface.
  # Keepalives on mpirun's own connections (oob) find a node whose link went down within about
  # 10 s + 3 x 2 s, instead of the kernel's two hours: then mpirun ends the job (docs/failures.md).
  # The nodes share this machine's cores, which each node's orted cannot see: ranks that spin while
  # they wait (Open MPI's default with one rank per slot) take the cores their peers need to send and
  # compute. Yielding when idle, measured with 8 nodes at 1 Gbit/s, 16 MiB: busbw 58% -> 88% of the link,
  # 256 KiB: 54 -> 3.6 ms (docs/benchmarks.md).
  node_exec 1 env DTRAIN_CLUSTER_AGENT=1 mpirun --hostfile "$state/hostfile" \
    --mca plm_rsh_agent "$self" --mca plm_rsh_no_tree_spawn 1 --mca mpi_yield_when_idle 1 \
    --mca oob_tcp_keepalive_time 10 --mca oob_tcp_keepalive_intvl 2 --mca oob_tcp_keepalive_probes 3 \
    -x OMPI_MCA_btl_tcp_if_include -x GLOO_SOCKET_IFNAME -x DTRAIN_CLUSTER \
    ${OMPI_ALLOW_RUN_AS_ROOT:+--allow-run-as-root} \
    ${mpi_args[@]+"${mpi_args[@]}"} "$@"
}

cluster_torchrun() {
  local n
  n=$(nodes)
  local -a run_args=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do run_args+=("$1"); shift; done
  [ "${1:-}" = -- ] || die "torchrun: expected [torchrun options] -- COMMAND"
  shift
  [ $# -ge 1 ] || die "torchrun: no command after --"
  local has_nnodes=0 has_nproc=0 a
  for a in ${run_args[@]+"${run_args[@]}"}; do
    case "$a" in --nnodes|--nnodes=*) has_nnodes=1 ;; --nproc-per-node|--nproc_per_node|--nproc-per-node=*|--nproc_per_node=*) has_nproc=1 ;; esac
  done
  [ "$has_nnodes" -eq 1 ] || run_args+=(--nnodes "$n")
  [ "$has_nproc" -eq 1 ] || run_args+=(--nproc_per_node 1)
  case "$1" in *.py) ;; *) run_args+=(--no_python) ;; esac  # dtrain is a program, not a Python script
  # torchrun 1.13 on Python 3.11 fails unless --redirects and --tee are 1 or 2 (its Std flags do not
  # parse other values there). 1, as in deploy/slurm/torchrun.sbatch: each agent keeps its workers'
  # stdout in the cluster's state directory and prints it with torchrun's "[default0]:" prefix.
  local has_redirects=0
  for a in ${run_args[@]+"${run_args[@]}"}; do case "$a" in --redirects|--redirects=*|-r) has_redirects=1 ;; esac; done
  [ "$has_redirects" -eq 1 ] || run_args+=(--redirects 1 --tee 1)
  local python=${DTRAIN_PYTHON:-/usr/bin/python3} id
  id="$name-$(date +%s%N)"
  local -a pids=()
  local k
  for k in $(seq 1 "$n"); do
    # Each agent is its own process tree in its node; their output interleaves, rank 0's progress first.
    ("$self" --name "$name" exec "node$k" "$python" -m torch.distributed.run \
       --rdzv_backend c10d --rdzv_endpoint "node1:$rdzv_port" --rdzv_id "$id" --log_dir "$state/torchrun/node$k" \
       "${run_args[@]}" "$@") &
    pids+=($!)
  done
  # A stop for this script (SIGUSR2 as the study runners relay one, SIGTERM, SIGINT, SIGHUP) goes to every
  # agent as SIGTERM: each tells its workers, which save a checkpoint and exit.
  trap 'kill -TERM "${pids[@]}" 2>/dev/null' USR2 TERM INT HUP
  # The job's status is the worst agent's; an agent killed with its node (link down) counts as failed.
  local status=0 s
  for k in "${!pids[@]}"; do
    set +e
    # wait returns early for a trapped signal: wait again until the agent is gone.
    while :; do
      wait "${pids[$k]}"
      s=$?
      kill -0 "${pids[$k]}" 2>/dev/null || break
    done
    set -e
    [ "$s" -eq 0 ] || { say "torchrun: the agent on node$((k + 1)) exited with $s"; [ "$status" -ne 0 ] || status=$s; }
  done
  return "$status"
}

cluster_status() {
  local n k ns
  n=$(nodes)
  echo "cluster $name: $n nodes; $(tr '\n' ' ' <"$state/settings")"
  for k in $(seq 1 "$n"); do
    ns=$(node_ns "$k")
    printf 'node%s  %s\n' "$k" "$(ip -n "$ns" -br addr show | awk '$1 != "lo" {print $1, $2, $3}' | tr '\n' ' ')"
    tc -n "$ns" qdisc show dev eth0 | sed 's/^/        /'
  done
}

case "$command" in
  up) need_root; cluster_up "$@" ;;
  down) need_root; cluster_down; say "down: cluster '$name' removed" ;;
  exec)
    need_root
    [ $# -ge 2 ] || die "exec: expected NODE COMMAND..."
    k=$(node_index "$1"); shift; node_exec "$k" "$@" ;;
  mpirun) need_root; cluster_mpirun "$@" ;;
  torchrun) need_root; cluster_torchrun "$@" ;;
  link)
    need_root
    [ $# -eq 2 ] || die "link: expected NODE up|down"
    k=$(node_index "$1")
    case "$2" in up|down) ;; *) die "link: expected up or down, got '$2'" ;; esac
    ip -n "$(node_ns "$k")" link set eth0 "$2" ;;
  cpu)
    need_root
    [ $# -eq 2 ] || die "cpu: expected NODE CORES"
    [ "$(setting cpu)" != none ] || die "cpu: the cluster was made without --cpu; make it with up N --cpu CORES"
    k=$(node_index "$1")
    set_node_cpu "$k" "$2" ;;
  usage)
    n=$(nodes)
    echo "node user_s system_s throttled_s"
    for k in $(seq 1 "$n"); do echo "node$k $(node_cpu_usage "$k")"; done ;;
  # (The node first, into a variable: a failed $(...) inside a command's arguments would not stop it.)
  shape) need_root; [ $# -eq 2 ] || die "shape: expected NODE RATE"; k=$(node_index "$1"); shape_node "$k" "$2" ;;
  loss) need_root; [ $# -eq 2 ] || die "loss: expected NODE FRACTION"; k=$(node_index "$1"); loss_node "$k" "$2" ;;
  mtu)
    need_root
    [ $# -eq 2 ] || die "mtu: expected NODE BYTES"
    case "$2" in ''|*[!0-9]*) die "mtu: expected bytes, got '$2'" ;; esac
    k=$(node_index "$1")
    mtu_node "$k" "$2" ;;
  status) cluster_status ;;
  hostfile) nodes >/dev/null; echo "$state/hostfile" ;;
  agent) [ -n "${DTRAIN_CLUSTER_AGENT:-}" ] || die "'agent' is for Open MPI's rsh launcher only"; rsh_agent "$@" ;;
  *)
    die "unknown command '$command' (expected up, down, exec, mpirun, torchrun, link, shape, cpu, loss, mtu, usage, status or hostfile)" ;;
esac
