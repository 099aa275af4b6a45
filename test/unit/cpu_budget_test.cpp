// Threads per rank when --threads is 0: the launcher's variables first, then the cores the rank may use
// (affinity, cgroup quota), shared among the ranks of the node.
#include "test/support/catch.h"

#include <sched.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "runtime/util/cpu_budget.h"
#include "test/support/fake_env.h"
#include "test/support/temp_dir.h"

using namespace dtrain;
using Catch::Matchers::Contains;
using dtrain::test::env_of;

namespace {

void write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

}  // namespace

TEST_CASE("the launcher's thread count comes first", "[threads]") {
  const CpuFacts facts{16, 16, 0.0};
  ThreadChoice c = choose_threads(env_of({{"OMP_NUM_THREADS", "3"}, {"SLURM_CPUS_PER_TASK", "8"}}), facts, 4);
  CHECK(c.threads == 3);
  CHECK(c.source == "OMP_NUM_THREADS=3");
  c = choose_threads(env_of({{"SLURM_CPUS_PER_TASK", "8"}}), facts, 4);
  CHECK(c.threads == 8);
  CHECK(c.source == "SLURM_CPUS_PER_TASK=8");
  // Values that are no thread count are passed over, and said so.
  c = choose_threads(env_of({{"OMP_NUM_THREADS", "0"}, {"SLURM_CPUS_PER_TASK", "four"}}), facts, 4);
  CHECK(c.threads == 4);
  CHECK(c.source == "16 cores / 4 ranks on the node");
  CHECK(c.warning == "ignoring OMP_NUM_THREADS='0', which is not a positive number of threads; ignoring "
                     "SLURM_CPUS_PER_TASK='four', which is not a positive number of threads");
  CHECK(choose_threads(env_of({{"OMP_NUM_THREADS", "3"}}), facts, 4).warning.empty());
  // OpenMP's nested levels: the outer one.
  c = choose_threads(env_of({{"OMP_NUM_THREADS", "6,2"}}), facts, 4);
  CHECK(c.threads == 6);
  CHECK(c.source == "OMP_NUM_THREADS=6,2");
}

TEST_CASE("a launcher's thread count beyond what a rank takes is a configuration error", "[threads]") {
  const CpuFacts facts{16, 16, 0.0};
  for (const char* value : {"1025", "999999", "99999999999999999999"}) {
    CHECK_THROWS_WITH(choose_threads(env_of({{"OMP_NUM_THREADS", value}}), facts, 1),
                      std::string("OMP_NUM_THREADS=") + value + " asks for more intra-op threads per rank than dtrain "
                      "takes (1 to 1024); set it to the cores each rank should use, or pass --threads");
  }
  CHECK(choose_threads(env_of({{"OMP_NUM_THREADS", "1024"}}), facts, 1).threads == 1024);
}

TEST_CASE("far more threads than a rank's cores are refused before any is started; more than its cores warned", "[threads]") {
  CHECK_THROWS_WITH(check_thread_count(ThreadChoice{1024, "OMP_NUM_THREADS=1024", ""}, 2.0),
                    Contains("OMP_NUM_THREADS=1024 asks for 1024 intra-op threads per rank, 512 times the 2 cores this "
                             "rank may use") && Contains("Set it to at most 2, or leave it unset"));
  CHECK_THROWS_AS(check_thread_count(ThreadChoice{65, "--threads", ""}, 0.25), ConfigError);
  // 64 threads are never refused (a big node's rank under a small quota still starts), only warned about.
  CHECK_THAT(check_thread_count(ThreadChoice{64, "--threads", ""}, 0.25),
             Contains("--threads asks for 64 intra-op threads per rank, 256 times the 0.25 cores") &&
                 Contains("they will contend for the cores; 1 would not"));
  CHECK_THAT(check_thread_count(ThreadChoice{8, "OMP_NUM_THREADS=8", ""}, 1.0), Contains("8 times the 1 core this rank"));
  CHECK(check_thread_count(ThreadChoice{2, "cores", ""}, 2.0).empty());
  CHECK(check_thread_count(ThreadChoice{3, "cores", ""}, 2.5).empty());  // a fractional quota, rounded up
  CHECK_NOTHROW(check_thread_count(ThreadChoice{256, "OMP_NUM_THREADS=256", ""}, 16.0));
}

TEST_CASE("the usable cores are shared among the ranks of the node", "[threads]") {
  auto none = env_of({});
  CHECK(choose_threads(none, CpuFacts{2, 2, 0.0}, 2).threads == 1);
  CHECK(choose_threads(none, CpuFacts{2, 2, 0.0}, 1).source == "2 cores");
  // taskset -c 0: one core, whatever the node has.
  ThreadChoice c = choose_threads(none, CpuFacts{8, 1, 0.0}, 1);
  CHECK(c.threads == 1);
  CHECK(c.source == "affinity mask of 1 core");
  // Ranks bound to cores of their own (4 ranks x 8 cores on 32): no sharing.
  c = choose_threads(none, CpuFacts{32, 8, 0.0}, 4);
  CHECK(c.threads == 8);
  CHECK(c.source == "affinity mask of 8 cores");
  // Ranks bound to a socket each of 2 (4 ranks x 16 cores on 32): shared.
  CHECK(choose_threads(none, CpuFacts{32, 16, 0.0}, 4).threads == 4);
  // A pod limited to 2.5 CPUs with 2 ranks: 2 whole cores, 1 each.
  c = choose_threads(none, CpuFacts{64, 64, 2.5}, 2);
  CHECK(c.threads == 1);
  CHECK(c.source == "cgroup CPU quota of 2.5 cores / 2 ranks on the node");
  CHECK(choose_threads(none, CpuFacts{64, 64, 8.0}, 2).threads == 4);
  CHECK(choose_threads(none, CpuFacts{64, 64, 0.5}, 1).threads == 1);  // never 0
}

TEST_CASE("cgroup CPU quotas are read from v2's cpu.max and v1's cfs files", "[threads]") {
  test::TempDir root;
  write(root.file("kubepods/pod1/cpu.max"), "250000 100000\n");
  CHECK(cgroup_cpu_quota(root.path(), "0::/kubepods/pod1\n") == Approx(2.5));
  write(root.file("unlimited/cpu.max"), "max 100000\n");
  CHECK(cgroup_cpu_quota(root.path(), "0::/unlimited\n") == 0.0);
  write(root.file("cpu,cpuacct/slurm/job7/cpu.cfs_quota_us"), "400000\n");
  write(root.file("cpu,cpuacct/slurm/job7/cpu.cfs_period_us"), "100000\n");
  CHECK(cgroup_cpu_quota(root.path(), "4:memory:/slurm/job7\n3:cpu,cpuacct:/slurm/job7\n") == Approx(4.0));
  write(root.file("cpu/cpu.cfs_quota_us"), "-1\n");
  write(root.file("cpu/cpu.cfs_period_us"), "100000\n");
  CHECK(cgroup_cpu_quota(root.path(), "1:cpu:/\n") == 0.0);
  CHECK(cgroup_cpu_quota(root.path(), "garbage") == 0.0);
  CHECK(cgroup_cpu_quota(root.file("nowhere"), "0::/\n") == 0.0);
}

TEST_CASE("this process's facts agree with its affinity mask", "[threads]") {
  const CpuFacts facts = read_cpu_facts();
  cpu_set_t mask;
  CPU_ZERO(&mask);
  REQUIRE(sched_getaffinity(0, sizeof mask, &mask) == 0);
  CHECK(facts.affinity == CPU_COUNT(&mask));
  CHECK(facts.node_cores >= 1);
  CHECK(facts.quota >= 0.0);
}
