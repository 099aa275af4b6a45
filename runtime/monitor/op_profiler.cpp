#include "runtime/monitor/op_profiler.h"

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/version.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <unordered_map>

#include "runtime/log/json_line.h"
#include "runtime/util/check.h"
#include "runtime/util/error.h"
#include "runtime/util/file_io.h"

namespace dtrain {
namespace {

namespace prof = torch::autograd::profiler;
namespace impl = torch::profiler::impl;

// LibTorch 2 reports event times in nanoseconds, 1.x in microseconds.
int64_t start_ns(const prof::KinetoEvent& e) {
#if TORCH_VERSION_MAJOR >= 2
  return static_cast<int64_t>(e.startNs());
#else
  return static_cast<int64_t>(e.startUs()) * 1000;
#endif
}

int64_t duration_ns(const prof::KinetoEvent& e) {
#if TORCH_VERSION_MAJOR >= 2
  return static_cast<int64_t>(e.durationNs());
#else
  return static_cast<int64_t>(e.durationUs()) * 1000;
#endif
}

std::set<impl::ActivityType> activities(bool cuda) {
  std::set<impl::ActivityType> set{impl::ActivityType::CPU};
  if (cuda) set.insert(impl::ActivityType::CUDA);
  return set;
}

impl::ProfilerConfig profiler_config() { return impl::ProfilerConfig(impl::ProfilerState::KINETO); }

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string format_us(double us) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", us);
  return text;
}

// Where Kineto writes the trace before it is read back: the run directory lives on rank 0, which may be
// another node.
std::string temporary_trace_path() {
  std::error_code ignored;
  std::filesystem::path dir = std::filesystem::temp_directory_path(ignored);
  if (dir.empty()) dir = "/tmp";
  return (dir / ("dtrain-profile-" + std::to_string(::getpid()) + ".trace.json")).string();
}

}  // namespace

std::vector<OpProfileRow> summarize_profile(const std::vector<ProfileEvent>& events) {
  std::map<std::pair<std::string, std::string>, OpProfileRow> rows;  // by (kind, name)
  auto row = [&rows](const std::string& kind, const std::string& name) -> OpProfileRow& {
    OpProfileRow& r = rows[{kind, name}];
    r.name = name;
    r.kind = kind;
    return r;
  };

  // Self CPU time: each thread's events nest by time; an event's direct children are the events that
  // start inside it while it is the innermost open one.
  std::unordered_map<uint64_t, std::vector<const ProfileEvent*>> by_thread;
  std::unordered_map<uint64_t, const ProfileEvent*> by_correlation;
  for (const ProfileEvent& e : events) {
    if (e.on_device) continue;
    by_thread[e.thread].push_back(&e);
    if (e.correlation != 0) by_correlation[e.correlation] = &e;
  }
  for (auto& [thread, list] : by_thread) {
    std::sort(list.begin(), list.end(), [](const ProfileEvent* a, const ProfileEvent* b) {
      return a->start_ns != b->start_ns ? a->start_ns < b->start_ns : a->duration_ns > b->duration_ns;
    });
    std::vector<std::pair<const ProfileEvent*, int64_t>> open;  // event, its children's time so far
    auto close = [&](const std::pair<const ProfileEvent*, int64_t>& done) {
      OpProfileRow& r = row("op", done.first->name);
      r.calls += 1;
      r.total_cpu_us += static_cast<double>(done.first->duration_ns) / 1e3;
      r.self_cpu_us += static_cast<double>(std::max<int64_t>(0, done.first->duration_ns - done.second)) / 1e3;
    };
    for (const ProfileEvent* e : list) {
      while (!open.empty() && open.back().first->start_ns + open.back().first->duration_ns <= e->start_ns) {
        close(open.back());
        open.pop_back();
      }
      if (!open.empty()) open.back().second += e->duration_ns;
      open.emplace_back(e, 0);
    }
    for (auto it = open.rbegin(); it != open.rend(); ++it) close(*it);
  }

  for (const ProfileEvent& e : events) {
    if (!e.on_device) continue;
    auto launcher = by_correlation.find(e.linked_correlation);
    const double us = static_cast<double>(e.duration_ns) / 1e3;
    if (e.linked_correlation != 0 && launcher != by_correlation.end()) {
      row("op", launcher->second->name).self_cuda_us += us;
    } else {
      OpProfileRow& r = row("kernel", e.name);
      r.calls += 1;
      r.self_cuda_us += us;
    }
  }

  std::vector<OpProfileRow> table;
  table.reserve(rows.size());
  for (auto& entry : rows) table.push_back(std::move(entry.second));
  std::sort(table.begin(), table.end(), [](const OpProfileRow& a, const OpProfileRow& b) {
    if (a.self_cuda_us != b.self_cuda_us) return a.self_cuda_us > b.self_cuda_us;
    if (a.self_cpu_us != b.self_cpu_us) return a.self_cpu_us > b.self_cpu_us;
    return a.name < b.name;
  });
  return table;
}

std::string profile_table_csv(const std::vector<OpProfileRow>& rows) {
  std::string csv = "name,kind,calls,self_cpu_us,total_cpu_us,self_cuda_us\n";
  for (const OpProfileRow& r : rows) {
    csv += csv_field(r.name) + "," + r.kind + "," + std::to_string(r.calls) + "," + format_us(r.self_cpu_us) + "," +
           format_us(r.total_cpu_us) + "," + format_us(r.self_cuda_us) + "\n";
  }
  return csv;
}

std::string chrome_trace_json(const std::vector<ProfileEvent>& events, const std::string& note) {
  int64_t origin = 0;
  bool first = true;
  for (const ProfileEvent& e : events) {
    if (first || e.start_ns < origin) origin = e.start_ns;
    first = false;
  }
  const int64_t pid = ::getpid();
  JsonRecord trace = JsonRecord::object();
  trace["displayTimeUnit"] = "ms";
  trace["otherData"]["note"] = note;
  JsonRecord& records = trace["traceEvents"] = JsonRecord::array();
  for (const ProfileEvent& e : events) {
    JsonRecord record = JsonRecord::object();
    record["name"] = e.name;
    record["cat"] = e.on_device ? "kernel" : "cpu_op";
    record["ph"] = "X";
    record["pid"] = pid;
    record["tid"] = static_cast<int64_t>(e.on_device ? 0 : e.thread);
    record["ts"] = static_cast<double>(e.start_ns - origin) / 1e3;
    record["dur"] = static_cast<double>(e.duration_ns) / 1e3;
    records.push_back(std::move(record));
  }
  return json_line(trace) + "\n";
}

OpProfiler::OpProfiler(bool cuda) : cuda_(cuda) {
  DTRAIN_CHECK(!impl::profilerEnabled(), Error, "the operator profiler is already running on this thread");
  const std::set<impl::ActivityType> kinds = activities(cuda_);
  prof::prepareProfiler(profiler_config(), kinds);
  prof::enableProfiler(profiler_config(), kinds);
  running_ = true;
}

OpProfiler::~OpProfiler() {
  if (!running_) return;
  try {
    prof::disableProfiler();
  } catch (const std::exception&) {
    // On the way out of a failed run; the profile is lost either way.
  }
}

ProfileOutput OpProfiler::stop() {
  DTRAIN_CHECK(running_, Error, "the operator profiler was stopped twice");
  running_ = false;
  const std::unique_ptr<prof::ProfilerResult> result = prof::disableProfiler();
  std::vector<ProfileEvent> events;
  events.reserve(result->events().size());
  for (const prof::KinetoEvent& k : result->events()) {
    ProfileEvent e;
    e.name = k.name();
    e.on_device = k.deviceType() != c10::DeviceType::CPU;
    e.thread = k.startThreadId();
    e.start_ns = start_ns(k);
    e.duration_ns = duration_ns(k);
    e.correlation = k.correlationId();
    e.linked_correlation = k.linkedCorrelationId();
    events.push_back(std::move(e));
  }
  ProfileOutput out;
  out.cuda = cuda_;
  out.events = static_cast<int64_t>(events.size());
  out.table_csv = profile_table_csv(summarize_profile(events));
  const std::string path = temporary_trace_path();
  try {
    result->save(path);  // throws where LibTorch has no Kineto
    out.trace_json = read_file(path);
    out.kineto = true;
  } catch (const c10::Error&) {
    out.trace_json = chrome_trace_json(events,
                                       "LibTorch " TORCH_VERSION " without Kineto: CPU operators only, trace written by "
                                       "dtrain from the profiler's events");
  }
  std::error_code ignored;
  std::filesystem::remove(path, ignored);
  return out;
}

}  // namespace dtrain
