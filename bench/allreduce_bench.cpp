// Allreduce sweep in the manner of nccl-tests: for each size, warm-up, a fixed number of timed
// iterations, a correctness check outside the timed region, and time, algbw and busbw. dtrain's
// communicator (the layer the reducer uses) and the library's own call run on the same buffers in the
// same job, so dtrain's overhead is a ratio. Prints a table (rank 0) and writes JSON (--json).
//
//   mpirun -np 2 dtrain_allreduce_bench --backend mpi --max-bytes 64M --json allreduce.json
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <cxxopts.hpp>
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <vector>

#include "bench/raw_allreduce.h"
#include "runtime/bootstrap/mpi_session.h"
#include "runtime/comm/make_communicator.h"
#include "runtime/log/json_line.h"
#include "runtime/util/file_io.h"
#include "runtime/util/error.h"
#include "runtime/util/timer.h"

namespace dtrain::bench {
namespace {

struct SweepOptions {
  BackendKind backend = BackendKind::kMpi;
  int64_t min_bytes = 8;
  int64_t max_bytes = int64_t{256} << 20;
  int64_t factor = 2;
  int64_t warmup = 5;
  int64_t iters = 20;
  bool breakdown = false;
  std::string json_path;
};

struct SizeResult {
  int64_t bytes = 0;
  int64_t count = 0;
  double dtrain_s = 0.0;  // per iteration, slowest rank
  double raw_s = 0.0;
  bool dtrain_correct = false;
  bool raw_correct = false;
  std::vector<double> staged_s;  // --breakdown: raw with 1, 2, 3 of dtrain's ordering calls (RawAllreduce)
};

int64_t parse_bytes(const std::string& text) {
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    throw ConfigError("size '" + text + "' is not a byte count (e.g. 8, 64K, 256M, 1G)");
  }
  const std::string unit = text.substr(used);
  if (unit == "K") value <<= 10;
  else if (unit == "M") value <<= 20;
  else if (unit == "G") value <<= 30;
  else if (!unit.empty()) throw ConfigError("size '" + text + "' has unknown unit '" + unit + "'; use K, M or G");
  if (value < 4) throw ConfigError("size '" + text + "' is below one float (4 bytes)");
  return value;
}

SweepOptions parse(int argc, char** argv) {
  cxxopts::Options spec("dtrain_allreduce_bench", "allreduce sweep: dtrain's communicator vs the raw library call");
  spec.add_options()("backend", "mpi, gloo or nccl", cxxopts::value<std::string>()->default_value("mpi"))(
      "min-bytes", "smallest size", cxxopts::value<std::string>()->default_value("8"))(
      "max-bytes", "largest size", cxxopts::value<std::string>()->default_value("256M"))(
      "factor", "size step factor", cxxopts::value<int64_t>()->default_value("2"))(
      "warmup", "untimed iterations per size", cxxopts::value<int64_t>()->default_value("5"))(
      "iters", "timed iterations per size", cxxopts::value<int64_t>()->default_value("20"))(
      "json", "write the results as JSON to this file", cxxopts::value<std::string>()->default_value(""))(
      "breakdown", "NCCL: also time the raw call with the stream-ordering calls dtrain adds, one more at a time")(
      "help", "show this help");
  cxxopts::ParseResult args = spec.parse(argc, argv);
  if (args.count("help")) {
    std::cout << spec.help();
    std::exit(0);
  }
  SweepOptions o;
  const std::string backend = args["backend"].as<std::string>();
  if (backend == "mpi") o.backend = BackendKind::kMpi;
  else if (backend == "nccl") o.backend = BackendKind::kNccl;
  else if (backend == "gloo") o.backend = BackendKind::kGloo;
  else throw ConfigError("--backend must be mpi, gloo or nccl, got '" + backend + "'");
  o.min_bytes = parse_bytes(args["min-bytes"].as<std::string>());
  o.max_bytes = parse_bytes(args["max-bytes"].as<std::string>());
  o.factor = args["factor"].as<int64_t>();
  o.warmup = args["warmup"].as<int64_t>();
  o.iters = args["iters"].as<int64_t>();
  o.json_path = args["json"].as<std::string>();
  o.breakdown = args.count("breakdown") > 0;
  if (o.min_bytes > o.max_bytes) throw ConfigError("--min-bytes exceeds --max-bytes");
  if (o.factor < 2) throw ConfigError("--factor must be at least 2, got " + std::to_string(o.factor));
  if (o.iters < 1 || o.warmup < 0) throw ConfigError("--iters must be >= 1 and --warmup >= 0");
  return o;
}

// Waits until every collective issued on `tensor` has completed on its device (no-op for CPU tensors).
void settle(const at::Tensor& tensor) {
  if (tensor.is_cuda()) (void)tensor.reshape(-1)[0].item<float>();
}

double slowest_rank(double seconds) {
  MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return seconds;
}

bool all_ranks_true(bool ok) {
  int value = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return value == 1;
}

// Every element becomes the sum over ranks of (rank + 1): exact in float for any world size we run.
bool check_sum(const at::Tensor& tensor, int rank, int world_size, const std::function<void(at::Tensor&)>& sum) {
  at::Tensor t = tensor;
  t.fill_(static_cast<float>(rank + 1));
  sum(t);
  settle(t);
  const float expected = static_cast<float>(world_size) * static_cast<float>(world_size + 1) / 2.0f;
  return all_ranks_true(at::all(t == expected).item<bool>());
}

SizeResult measure(int64_t bytes, const SweepOptions& o, Communicator& comm, RawAllreduce& raw,
                   const at::TensorOptions& options) {
  SizeResult r;
  r.count = bytes / 4;
  r.bytes = r.count * 4;
  at::Tensor buffer = at::zeros({r.count}, options);
  auto dtrain_sum = [&comm](at::Tensor& t) { comm.allreduce_async(t, ReduceOp::kSum)->wait(); };
  auto raw_sum = [&raw](at::Tensor& t) {
    raw.sum(t);
    raw.synchronize();
  };

  r.dtrain_correct = check_sum(buffer, comm.rank(), comm.world_size(), dtrain_sum);
  r.raw_correct = check_sum(buffer, comm.rank(), comm.world_size(), raw_sum);

  // Timed loops sum zeros: the values stay finite, whatever the iteration count.
  buffer.zero_();
  settle(buffer);
  for (int64_t i = 0; i < o.warmup; ++i) comm.allreduce_async(buffer, ReduceOp::kSum)->wait();
  settle(buffer);
  comm.barrier();
  Stopwatch watch;
  for (int64_t i = 0; i < o.iters; ++i) comm.allreduce_async(buffer, ReduceOp::kSum)->wait();
  settle(buffer);
  r.dtrain_s = slowest_rank(watch.elapsed_s() / static_cast<double>(o.iters));

  // The library's call, as nccl-tests times it: queued back to back, one synchronisation at the end.
  const auto time_raw = [&] {
    for (int64_t i = 0; i < o.warmup; ++i) raw.sum(buffer);
    raw.synchronize();
    comm.barrier();
    watch.reset();
    for (int64_t i = 0; i < o.iters; ++i) raw.sum(buffer);
    raw.synchronize();
    return slowest_rank(watch.elapsed_s() / static_cast<double>(o.iters));
  };
  r.raw_s = time_raw();
  for (int stage = 1; o.breakdown && stage <= raw.max_stage(); ++stage) {
    raw.set_stage(stage);
    r.staged_s.push_back(time_raw());
  }
  raw.set_stage(0);
  return r;
}

double gb_per_s(int64_t bytes, double seconds) { return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0; }

int run(int argc, char** argv, MpiSession& session) {
  const SweepOptions o = parse(argc, argv);
  const DeviceKind device = o.backend == BackendKind::kNccl ? resolve_device(DeviceKind::kCuda) : DeviceKind::kCpu;
  const BackendKind backend = resolve_backend(o.backend, device, BootstrapKind::kMpi);
  CommSetup setup;
  setup.backend = backend;
  if (device == DeviceKind::kCuda) setup.cuda_device = select_cuda_device(session, backend);
  setup.wait.timeout_s = CommOptions{}.timeout_s;
  std::unique_ptr<Communicator> comm = make_communicator(setup, session);
  std::unique_ptr<RawAllreduce> raw = make_raw_allreduce(backend, session, setup.cuda_device, setup.wait.timeout_s);
  const at::TensorOptions options =
      device == DeviceKind::kCuda ? at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, setup.cuda_device)
                                  : at::TensorOptions().dtype(at::kFloat);

  const int n = session.world_size();
  const double bus_factor = n > 1 ? 2.0 * (n - 1) / n : 0.0;  // bytes each rank moves per payload byte (ring)
  std::vector<SizeResult> results;
  if (session.is_root()) {
    std::printf("# dtrain allreduce sweep: backend %s, %d ranks on %zu hosts, float32 sum, %lld warm-up + %lld timed iterations\n",
                comm->backend_name().c_str(), n, session.unique_hosts().size(), static_cast<long long>(o.warmup),
                static_cast<long long>(o.iters));
    std::printf("# times are per iteration on the slowest rank; busbw = algbw x 2(n-1)/n; ratio = dtrain / %s time\n",
                raw->name().c_str());
    if (o.breakdown && raw->max_stage() > 0) {
      std::printf("# breakdown: raw time with dtrain's stream ordering added one call pair at a time: +order (mark the\n"
                  "# caller's stream, the collective's stream waits), +done (mark the end), +wait (the caller's stream waits)\n");
    }
    std::printf("%12s %12s | %10s %9s %9s %5s | %10s %9s %9s %5s | %6s", "bytes", "count", "dtrain us", "algbw",
                "busbw", "ok", "raw us", "algbw", "busbw", "ok", "ratio");
    if (o.breakdown && raw->max_stage() > 0) std::printf(" | %9s %9s %9s", "+order us", "+done us", "+wait us");
    std::printf("\n");
  }
  bool all_correct = true;
  for (int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.factor) {
    const SizeResult r = measure(bytes, o, *comm, *raw, options);
    results.push_back(r);
    all_correct = all_correct && r.dtrain_correct && r.raw_correct;
    if (session.is_root()) {
      std::printf("%12lld %12lld | %10.2f %9.3f %9.3f %5s | %10.2f %9.3f %9.3f %5s | %6.2f",
                  static_cast<long long>(r.bytes), static_cast<long long>(r.count), r.dtrain_s * 1e6,
                  gb_per_s(r.bytes, r.dtrain_s), gb_per_s(r.bytes, r.dtrain_s) * bus_factor,
                  r.dtrain_correct ? "yes" : "NO", r.raw_s * 1e6, gb_per_s(r.bytes, r.raw_s),
                  gb_per_s(r.bytes, r.raw_s) * bus_factor, r.raw_correct ? "yes" : "NO", r.dtrain_s / r.raw_s);
      if (!r.staged_s.empty()) {
        std::printf(" |");
        for (double s : r.staged_s) std::printf(" %9.2f", s * 1e6);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }

  if (session.is_root() && !o.json_path.empty()) {
    JsonRecord json = JsonRecord::object();
    json["bench"] = "allreduce";
    json["backend"] = comm->backend_name();
    json["raw"] = raw->name();
    json["world_size"] = n;
    json["hosts"] = session.unique_hosts().size();
    json["dtype"] = "float32";
    json["warmup"] = o.warmup;
    json["iters"] = o.iters;
    json["all_correct"] = all_correct;
    JsonRecord& rows = json["results"] = JsonRecord::array();
    for (const SizeResult& r : results) {
      JsonRecord row = JsonRecord::object();
      row["bytes"] = r.bytes;
      row["count"] = r.count;
      row["dtrain_us"] = r.dtrain_s * 1e6;
      row["dtrain_algbw_gbps"] = gb_per_s(r.bytes, r.dtrain_s);
      row["dtrain_busbw_gbps"] = gb_per_s(r.bytes, r.dtrain_s) * bus_factor;
      row["dtrain_correct"] = r.dtrain_correct;
      row["raw_us"] = r.raw_s * 1e6;
      row["raw_algbw_gbps"] = gb_per_s(r.bytes, r.raw_s);
      row["raw_busbw_gbps"] = gb_per_s(r.bytes, r.raw_s) * bus_factor;
      row["raw_correct"] = r.raw_correct;
      row["ratio"] = r.dtrain_s / r.raw_s;
      if (!r.staged_s.empty()) {
        JsonRecord staged = JsonRecord::array();
        for (double s : r.staged_s) staged.push_back(s * 1e6);
        row["raw_with_ordering_us"] = std::move(staged);  // +order, +done, +wait
      }
      rows.push_back(std::move(row));
    }
    write_file_atomically(o.json_path, json_line(json) + "\n");
  }
  if (!all_correct) {
    if (session.is_root()) std::fprintf(stderr, "allreduce results were WRONG for at least one size\n");
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace dtrain::bench

int main(int argc, char** argv) {
  dtrain::MpiSession session(&argc, &argv);
  try {
    return dtrain::bench::run(argc, argv, session);
  } catch (const c10::Error& e) {
    std::cerr << session.origin().prefix() << "dtrain_allreduce_bench: " << e.what_without_backtrace() << std::endl;
  } catch (const std::exception& e) {
    std::cerr << session.origin().prefix() << "dtrain_allreduce_bench: " << e.what() << std::endl;
  }
  if (session.world_size() > 1) session.abort(1);
  return 1;
}
