// How many intra-op threads a rank should use when --threads is 0: what the launcher says (OMP_NUM_THREADS,
// SLURM_CPUS_PER_TASK), else the cores this process may really use (the node's cores, its affinity mask,
// its cgroup's CPU quota) shared among the ranks of the node that share them. Under a Kubernetes CPU limit,
// taskset or a Slurm task binding, ranks then do not oversubscribe.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace dtrain {

// What bounds this process's CPU use.
struct CpuFacts {
  int node_cores = 1;    // std::thread::hardware_concurrency()
  int affinity = 0;      // CPUs in the affinity mask (sched_getaffinity); 0: unknown
  double quota = 0.0;    // the cgroup's CPU quota in cores (cpu.max, cpu.cfs_quota_us); 0: none
};

// The most intra-op threads a rank takes (train.threads and OMP_NUM_THREADS alike).
constexpr int kMaxThreadsPerRank = 1024;
// The most intra-op threads per core a rank may use that dtrain starts (when they are more than 64):
// OpenMP threads that outnumber the cores spin against each other. Measured on a 2-core VM, 2 ranks of
// 1024 threads each: 28 s before the first line of output, then 0.9 s per mnist step instead of 0.01.
constexpr int kMaxThreadsPerCore = 16;

struct ThreadChoice {
  int threads = 1;
  std::string source;  // why: "OMP_NUM_THREADS=1", "cgroup CPU quota 2.5 / 2 ranks on the node", ...
  std::string warning;  // a launcher variable that was not a thread count and was ignored, else ""
};

// This process's facts. `cgroup_root` and `proc_self_cgroup` are there for tests.
CpuFacts read_cpu_facts(const std::string& cgroup_root = "/sys/fs/cgroup",
                        const std::string& proc_self_cgroup = "/proc/self/cgroup");

// The CPU quota in cores of the cgroup that `proc_self_cgroup` (the text of /proc/self/cgroup) names under
// `cgroup_root`: v2's cpu.max ("200000 100000" = 2 cores, "max ..." = none), else v1's cpu.cfs_quota_us /
// cpu.cfs_period_us (-1 = none). 0 when there is no quota or it cannot be read.
double cgroup_cpu_quota(const std::string& cgroup_root, const std::string& proc_self_cgroup);

// The cores (fractional under a quota) one of the node's `local_ranks` ranks may use: the smallest of node
// cores, affinity and quota, shared among the ranks unless their affinity masks fit the node side by side.
double cores_per_rank(const CpuFacts& facts, int local_ranks);

// OMP_NUM_THREADS (its first level where it lists several, as OpenMP reads "4,2"), else SLURM_CPUS_PER_TASK,
// else the usable cores (the smallest of node cores, affinity and quota) divided among the `local_ranks`
// of the node, unless the ranks' affinity masks fit the node side by side (affinity x local ranks <= node
// cores: the launcher bound each rank to cores of its own, which it shares with no other rank). At least
// 1. A variable that is not a positive integer is ignored, and `warning` says so; one above
// kMaxThreadsPerRank throws ConfigError (thousands of threads would stall the start without a word).
ThreadChoice choose_threads(const std::function<std::optional<std::string>(const std::string&)>& env,
                            const CpuFacts& facts, int local_ranks);

// `choice` against the `cores` a rank may use (cores_per_rank): throws ConfigError, before any thread is
// started, when it asks for more than 64 threads and more than kMaxThreadsPerCore per core; returns a
// warning when it asks for more threads than cores (rounded up), else "".
std::string check_thread_count(const ThreadChoice& choice, double cores);

}  // namespace dtrain
