// The operator profiler's table (self times by nesting, device time charged to the launching operator),
// its fallback Chrome trace, a real profile of LibTorch ops, and the GPU peak table behind mfu.
#include "test/support/catch.h"

#include <ATen/ATen.h>

#include <map>

#include "runtime/log/json_line.h"
#include "runtime/monitor/op_profiler.h"
#include "runtime/monitor/peak_flops.h"

using namespace dtrain;

namespace {

ProfileEvent cpu(const std::string& name, int64_t start_us, int64_t duration_us, uint64_t correlation = 0,
                 uint64_t thread = 1) {
  ProfileEvent e;
  e.name = name;
  e.thread = thread;
  e.start_ns = start_us * 1000;
  e.duration_ns = duration_us * 1000;
  e.correlation = correlation;
  return e;
}

ProfileEvent kernel(const std::string& name, int64_t duration_us, uint64_t launched_by) {
  ProfileEvent e;
  e.name = name;
  e.on_device = true;
  e.start_ns = 1000000;
  e.duration_ns = duration_us * 1000;
  e.linked_correlation = launched_by;
  return e;
}

std::map<std::string, OpProfileRow> by_name(const std::vector<OpProfileRow>& rows) {
  std::map<std::string, OpProfileRow> map;
  for (const OpProfileRow& r : rows) map[r.name] = r;
  return map;
}

}  // namespace

TEST_CASE("the profile table subtracts nested operators and charges kernels to their launcher", "[monitor]") {
  // linear [0, 100) holds addmm [10, 70), which holds a runtime call [20, 30); relu [100, 120) follows.
  // Another thread's op overlaps in time but nests in nothing.
  const std::vector<ProfileEvent> events = {
      cpu("aten::linear", 0, 100, 1),     cpu("aten::addmm", 10, 60, 2),        cpu("cudaLaunchKernel", 20, 10, 3),
      cpu("aten::relu", 100, 20, 4),      cpu("aten::addmm", 200, 40, 5),       cpu("aten::add", 5, 50, 6, 2),
      kernel("gemm_kernel", 300, 2),      kernel("gemm_kernel", 200, 5),        kernel("relu_kernel", 7, 4),
      kernel("ncclAllReduce", 900, 0)};
  const std::vector<OpProfileRow> rows = summarize_profile(events);
  auto table = by_name(rows);
  CHECK(table["aten::linear"].calls == 1);
  CHECK(table["aten::linear"].total_cpu_us == 100);
  CHECK(table["aten::linear"].self_cpu_us == 40);
  CHECK(table["aten::addmm"].calls == 2);
  CHECK(table["aten::addmm"].total_cpu_us == 100);
  CHECK(table["aten::addmm"].self_cpu_us == 90);  // 50 of the first, 40 of the second
  CHECK(table["aten::addmm"].self_cuda_us == 500);
  CHECK(table["aten::linear"].self_cuda_us == 0);  // its kernels are its child's
  CHECK(table["aten::relu"].self_cuda_us == 7);
  CHECK(table["aten::add"].self_cpu_us == 50);
  CHECK(table["ncclAllReduce"].kind == "kernel");
  CHECK(table["ncclAllReduce"].calls == 1);
  // Most device time first.
  REQUIRE(rows.size() == 6);
  CHECK(rows[0].name == "ncclAllReduce");
  CHECK(rows[1].name == "aten::addmm");

  const std::string csv = profile_table_csv(rows);
  CHECK(csv.rfind("name,kind,calls,self_cpu_us,total_cpu_us,self_cuda_us\n", 0) == 0);
  CHECK(csv.find("aten::addmm,op,2,90.000,100.000,500.000\n") != std::string::npos);
}

TEST_CASE("names with commas or quotes are quoted in the profile table", "[monitor]") {
  const std::string csv = profile_table_csv(summarize_profile({cpu("void f<int, \"x\">", 0, 1)}));
  CHECK(csv.find("\"void f<int, \"\"x\"\">\",op,1,") != std::string::npos);
}

TEST_CASE("the fallback trace is Chrome's format with times from the first event", "[monitor]") {
  const JsonRecord trace =
      JsonRecord::parse(chrome_trace_json({cpu("aten::mm", 1000, 5), cpu("aten::add", 1010, 2)}, "CPU only"));
  CHECK(trace["displayTimeUnit"] == "ms");
  CHECK(trace["otherData"]["note"] == "CPU only");
  const JsonRecord& events = trace["traceEvents"];
  REQUIRE(events.size() == 2);
  CHECK(events[0]["name"] == "aten::mm");
  CHECK(events[0]["cat"] == "cpu_op");
  CHECK(events[0]["ph"] == "X");
  // Microseconds from the first event, as Chrome's trace viewer and Perfetto read them.
  CHECK(events[0]["ts"] == 0.0);
  CHECK(events[0]["dur"] == 5.0);
  CHECK(events[1]["ts"] == 10.0);
  CHECK(events[1]["dur"] == 2.0);
}

TEST_CASE("the profiler records the operators of a forward and backward pass", "[monitor]") {
  const at::Tensor x = at::randn({8, 16});
  const at::Tensor w = at::randn({4, 16}).requires_grad_(true);
  ProfileOutput out;
  {
    OpProfiler profiler(/*cuda=*/false);
    for (int i = 0; i < 3; ++i) at::linear(x, w).relu().sum().backward();
    out = profiler.stop();
  }
  CHECK(out.events > 0);
  CHECK(out.trace_json.find("traceEvents") != std::string::npos);
  CHECK(out.trace_json.find("aten::relu") != std::string::npos);
  // Three passes: three forward mm (linear without bias), three threshold_backward.
  CHECK(out.table_csv.find("\naten::relu,op,3,") != std::string::npos);
  CHECK(out.table_csv.find("\naten::threshold_backward,op,3,") != std::string::npos);
  // A second profiler may start once the first has stopped.
  OpProfiler again(false);
  at::relu(x);
  CHECK(again.stop().table_csv.find("\naten::relu,op,1,") != std::string::npos);
}

TEST_CASE("GPU peaks come from the product name NVML reports, per precision", "[monitor]") {
  auto peak = [](const std::string& name, Precision p) {
    const auto found = gpu_peak_tflops(name, p);
    return found ? found->model + " " + std::to_string(static_cast<int>(found->tflops)) : std::string("none");
  };
  CHECK(peak("NVIDIA H100 80GB HBM3", Precision::kBf16) == "H100 SXM 989");
  CHECK(peak("NVIDIA H100 80GB HBM3", Precision::kFp32) == "H100 SXM 66");
  CHECK(peak("NVIDIA H100 PCIe", Precision::kFp16) == "H100 PCIe 756");
  CHECK(peak("NVIDIA H200", Precision::kBf16) == "H200 989");
  CHECK(peak("NVIDIA A100-SXM4-80GB", Precision::kBf16) == "A100 312");
  CHECK(peak("NVIDIA A100 80GB PCIe", Precision::kFp32) == "A100 19");
  CHECK(peak("Tesla V100-SXM2-32GB", Precision::kFp16) == "V100 SXM2 125");
  CHECK(peak("Tesla V100-PCIE-16GB", Precision::kFp32) == "V100 PCIe 14");
  CHECK(peak("Tesla V100S-PCIE-32GB", Precision::kFp32) == "V100S PCIe 16");
  CHECK(peak("Tesla V100-SXM2-16GB", Precision::kBf16) == "none");  // no bf16 before Ampere
  CHECK(peak("Tesla T4", Precision::kFp16) == "T4 65");
  CHECK(peak("NVIDIA L4", Precision::kBf16) == "L4 121");
  CHECK(peak("NVIDIA L40S", Precision::kBf16) == "L40S 362");
  CHECK(peak("NVIDIA A10", Precision::kFp32) == "A10 31");
  CHECK(peak("NVIDIA A10G", Precision::kFp32) == "none");  // another GPU, not in the table
  CHECK(peak("NVIDIA GeForce RTX 4090", Precision::kFp32) == "none");
  CHECK(peak("", Precision::kFp32) == "none");
}
