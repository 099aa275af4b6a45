#include "runtime/util/cpu_budget.h"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "runtime/util/error.h"

namespace dtrain {
namespace {

std::optional<int> positive_int(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  int value = 0;
  const char* end = text->data() + text->size();
  auto [ptr, ec] = std::from_chars(text->data(), end, value);
  if (ec != std::errc() || ptr != end || value <= 0) return std::nullopt;
  return value;
}

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string cores_text(double cores) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", cores);
  return text;
}

}  // namespace

double cgroup_cpu_quota(const std::string& cgroup_root, const std::string& proc_self_cgroup) {
  std::istringstream lines(proc_self_cgroup);
  std::string line;
  std::string v2_path;
  std::string v1_path;
  bool v2 = false;
  bool v1 = false;
  while (std::getline(lines, line)) {
    // "hierarchy:controllers:path"; v2 is "0::path", v1's cpu controller lists "cpu" among its controllers.
    const size_t first = line.find(':');
    const size_t second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (line.compare(0, first, "0") == 0 && controllers.empty()) {
      v2 = true;
      v2_path = path;
    }
    std::istringstream names(controllers);
    std::string name;
    while (std::getline(names, name, ',')) {
      if (name == "cpu") {
        v1 = true;
        v1_path = path;
      }
    }
  }
  if (v1) {
    // The controller's mount: "cpu", or a joint "cpu,cpuacct".
    for (const std::string& mount : {std::string("/cpu"), std::string("/cpu,cpuacct")}) {
      for (const std::string& dir : {cgroup_root + mount + v1_path, cgroup_root + mount}) {
        const std::string quota = read_first_line(dir + "/cpu.cfs_quota_us");
        const std::string period = read_first_line(dir + "/cpu.cfs_period_us");
        if (quota.empty() || period.empty()) continue;
        const double q = std::atof(quota.c_str());
        const double p = std::atof(period.c_str());
        return q > 0 && p > 0 ? q / p : 0.0;
      }
    }
  }
  if (v2) {
    for (const std::string& dir : {cgroup_root + v2_path, cgroup_root}) {
      std::istringstream max(read_first_line(dir + "/cpu.max"));
      std::string quota;
      double period = 0;
      if (!(max >> quota >> period)) continue;
      if (quota == "max" || period <= 0) return 0.0;
      return std::atof(quota.c_str()) / period;
    }
  }
  return 0.0;
}

CpuFacts read_cpu_facts(const std::string& cgroup_root, const std::string& proc_self_cgroup) {
  CpuFacts facts;
  facts.node_cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) == 0) facts.affinity = CPU_COUNT(&mask);
  std::ifstream in(proc_self_cgroup);
  std::stringstream text;
  text << in.rdbuf();
  facts.quota = cgroup_cpu_quota(cgroup_root, text.str());
  return facts;
}

namespace {

// The cores this process may really use, what bounds them, and whether the ranks of the node were bound
// to cores of their own (each rank's affinity mask fits the node beside the others').
struct UsableCores {
  double cores = 1.0;
  std::string source;
  bool bound = false;
};

UsableCores usable_cores(const CpuFacts& facts, int local_ranks) {
  UsableCores usable{static_cast<double>(std::max(1, facts.node_cores)), std::to_string(facts.node_cores) + " cores",
                     false};
  if (facts.affinity > 0 && facts.affinity < usable.cores) {
    usable.cores = facts.affinity;
    usable.source = "affinity mask of " + std::to_string(facts.affinity) + (facts.affinity == 1 ? " core" : " cores");
    usable.bound = facts.affinity * local_ranks <= facts.node_cores;
  }
  if (facts.quota > 0 && facts.quota < usable.cores) {
    usable.cores = facts.quota;
    usable.source = "cgroup CPU quota of " + cores_text(facts.quota) + (facts.quota == 1.0 ? " core" : " cores");
    usable.bound = false;  // a pod's or job's quota is shared by all its ranks
  }
  return usable;
}

}  // namespace

double cores_per_rank(const CpuFacts& facts, int local_ranks) {
  local_ranks = std::max(1, local_ranks);
  const UsableCores usable = usable_cores(facts, local_ranks);
  return usable.bound ? usable.cores : usable.cores / local_ranks;
}

ThreadChoice choose_threads(const std::function<std::optional<std::string>(const std::string&)>& env,
                            const CpuFacts& facts, int local_ranks) {
  std::string warning;
  for (const char* name : {"OMP_NUM_THREADS", "SLURM_CPUS_PER_TASK"}) {
    std::optional<std::string> text = env(name);
    if (!text) continue;
    // OpenMP's list of nested levels ("4,2"): the outer level is what an intra-op pool uses.
    const std::string first = std::string(name) == "OMP_NUM_THREADS" ? text->substr(0, text->find(',')) : *text;
    const std::optional<int> value = positive_int(first);
    if (!value) {
      const bool too_large = !first.empty() && std::all_of(first.begin(), first.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
                             first.find_first_not_of('0') != std::string::npos;
      if (!too_large) {
        warning += std::string(warning.empty() ? "" : "; ") + "ignoring " + name + "='" + *text +
                   "', which is not a positive number of threads";
        continue;
      }
    }
    if (!value || *value > kMaxThreadsPerRank) {
      throw ConfigError(std::string(name) + "=" + *text + " asks for more intra-op threads per rank than dtrain takes (1 to " +
                        std::to_string(kMaxThreadsPerRank) + "); set it to the cores each rank should use, or pass --threads");
    }
    return ThreadChoice{*value, std::string(name) + "=" + *text, warning};
  }
  local_ranks = std::max(1, local_ranks);
  const UsableCores usable = usable_cores(facts, local_ranks);
  const int whole = std::max(1, static_cast<int>(std::floor(usable.cores + 1e-9)));
  if (usable.bound || local_ranks == 1) return ThreadChoice{whole, usable.source, warning};
  return ThreadChoice{std::max(1, whole / local_ranks),
                      usable.source + " / " + std::to_string(local_ranks) + " ranks on the node", warning};
}

std::string check_thread_count(const ThreadChoice& choice, double cores) {
  cores = std::max(cores, 0.01);
  const int whole = std::max(1, static_cast<int>(std::ceil(cores - 1e-9)));
  if (choice.threads <= whole) return "";
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%.0f", choice.threads / cores);
  const std::string what = choice.source + " asks for " + std::to_string(choice.threads) + " intra-op threads per rank, " +
                           ratio + " times the " + cores_text(cores) + (cores == 1.0 ? " core" : " cores") +
                           " this rank may use";
  if (choice.threads > 64 && choice.threads > kMaxThreadsPerCore * cores) {
    throw ConfigError(what + ": threads that outnumber the cores this far spin against each other and stall the run "
                             "(1024 on 2 cores: half a minute before the first line). Set it to at most " +
                      std::to_string(whole) + ", or leave it unset (and --threads 0) for dtrain to choose");
  }
  return what + ": they will contend for the cores; " + std::to_string(whole) + " would not";
}

}  // namespace dtrain
