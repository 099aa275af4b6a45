// LibTorch's profiler over a window of training steps (--profile-steps A:B on --profile-rank): a Chrome
// trace to open in Perfetto or chrome://tracing, and a table of the operations by self CUDA time and
// self CPU time with call counts, the table the accelerator studies used to make with torch.profiler.
//
// The profiler is the "Kineto" one of torch/csrc/autograd/profiler_kineto.h: LibTorch's own collector
// records every operator (on the starting thread and the autograd threads it hands work to); where
// LibTorch is built with Kineto, Kineto adds the CUDA kernels, memory copies and runtime calls (CUPTI)
// and writes the trace. Debian's LibTorch is built without Kineto: its profile has CPU operators only,
// and dtrain writes their trace itself (ProfileOutput::kineto says which).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dtrain {

// One profiled event, as the summary needs it.
struct ProfileEvent {
  std::string name;
  bool on_device = false;          // a CUDA kernel or memory copy; else a CPU operator or runtime call
  uint64_t thread = 0;             // CPU events: the thread that ran them
  int64_t start_ns = 0;
  int64_t duration_ns = 0;
  uint64_t correlation = 0;        // CPU events: the id device events link to
  uint64_t linked_correlation = 0; // device events: the correlation id of the CPU event that launched them
};

// One row of the operations table. A device event is charged to the innermost operator that launched
// it (its self CUDA time, as torch.profiler counts it); one that no profiled operator launched (a
// collective's kernel) gets a row of its own, kind "kernel".
struct OpProfileRow {
  std::string name;
  std::string kind;  // "op" or "kernel"
  int64_t calls = 0;
  double self_cpu_us = 0.0;   // CPU time minus that of the operators nested in it, on the same thread
  double total_cpu_us = 0.0;  // CPU time including nested operators
  double self_cuda_us = 0.0;  // device time of what it launched itself
};

// The table, most self CUDA time first, then most self CPU time.
std::vector<OpProfileRow> summarize_profile(const std::vector<ProfileEvent>& events);

// The table as CSV: name,kind,calls,self_cpu_us,total_cpu_us,self_cuda_us.
std::string profile_table_csv(const std::vector<OpProfileRow>& rows);

// A Chrome trace ("traceEvents" of complete events, times in microseconds) of `events`, with `note` in
// its metadata: the trace of a LibTorch without Kineto.
std::string chrome_trace_json(const std::vector<ProfileEvent>& events, const std::string& note);

struct ProfileOutput {
  std::string trace_json;
  std::string table_csv;
  bool kineto = false;      // the trace is Kineto's (with device activity where profiled)
  bool cuda = false;        // CUDA activity was profiled
  int64_t events = 0;       // events in the table's input
};

// Profiles the constructing thread (and the autograd threads its work reaches) from construction until
// stop(). One at a time per process: LibTorch's profiler is a single state.
class OpProfiler final {
 public:
  explicit OpProfiler(bool cuda);
  ~OpProfiler();  // stops without a result if stop() was not called
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;

  ProfileOutput stop();

 private:
  bool cuda_;
  bool running_ = false;
};

}  // namespace dtrain
