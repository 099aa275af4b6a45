// The dtrain binary: reads the configuration, bootstraps MPI, picks the concrete communicator, reducer
// and workload, and hands them to the trainer. Errors before training are agreed across ranks so that
// every rank exits with the same message; later errors abort the whole job instead of hanging it.
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

#include <algorithm>
#include <functional>
#include <iostream>
#include <memory>
#include <thread>

#include "runtime/bootstrap/mpi_session.h"
#include "runtime/comm/make_communicator.h"
#include "runtime/config/config_cli.h"
#include "runtime/config/config_yaml.h"
#include "runtime/config/validate.h"
#include "runtime/log/run_logger.h"
#include "runtime/reduce/bucketed_reducer.h"
#include "runtime/train/trainer.h"
#include "runtime/util/error.h"
#include "runtime/util/strings.h"
#include "workloads/registry.h"

namespace dtrain {
namespace {

constexpr int kExitFailure = 1;
constexpr int kExitConfigError = 2;

// Runs `body` and returns its error message ("" on success), so that ranks can agree on it.
std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

int threads_per_rank(const TrainConfig& config, const MpiSession& session) {
  if (config.train.threads > 0) return static_cast<int>(config.train.threads);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / session.local_world_size());
}

int ranks_per_host(const MpiSession& session) {
  int most = 0;
  for (const std::string& host : session.unique_hosts()) {
    const auto& all = session.hostnames();
    most = std::max(most, static_cast<int>(std::count(all.begin(), all.end(), host)));
  }
  return most;
}

void print_workloads(const WorkloadRegistry& registry) {
  for (const std::string& name : registry.names()) std::cout << name << "\t" << registry.description(name) << "\n";
}

int run(int argc, char** argv, MpiSession& session) {
  WorkloadRegistry registry;
  register_builtin_workloads(registry);
  const double startup_timeout_s = CommOptions{}.timeout_s;

  CommandLine cmd;
  std::unique_ptr<Workload> workload;
  BackendKind backend = BackendKind::kMpi;
  DeviceKind device = DeviceKind::kCpu;
  int cuda_device = -1;
  std::string error = error_of([&] {
    cmd = parse_command_line(argc, argv);
    validate_config(cmd.config, cmd.sources);
    if (cmd.show_help || cmd.show_version || cmd.list_workloads) return;
    workload = registry.create(cmd.config.workload);
    device = resolve_device(cmd.config.comm.device);
    backend = resolve_backend(cmd.config.comm.backend, device);
    validate_for_device(cmd.config, device, cmd.sources);
    if (device == DeviceKind::kCuda) cuda_device = select_cuda_device(session, backend);
  });
  error = session.first_error(error, startup_timeout_s);
  if (!error.empty()) {
    if (session.is_root()) std::cerr << "dtrain: error: " << error << std::endl;
    return kExitConfigError;
  }
  if (cmd.show_help || cmd.show_version || cmd.list_workloads || cmd.print_config) {
    if (session.is_root()) {
      if (cmd.show_help) std::cout << help_text();
      if (cmd.show_version) {
        std::cout << "dtrain " << DTRAIN_VERSION << " (" << libtorch_description() << "; backends: " << join(available_backends())
                  << "; devices: " << join(available_devices()) << ")\n";
      }
      if (cmd.list_workloads) print_workloads(registry);
      if (cmd.print_config) std::cout << to_yaml(cmd.config);
      std::cout << std::flush;
    }
    return 0;
  }

  const TrainConfig& config = cmd.config;
  const int threads = threads_per_rank(config, session);
  at::set_num_threads(threads);
  at::set_num_interop_threads(1);

  CommSetup setup;
  setup.backend = backend;
  setup.cuda_device = cuda_device;
  setup.on_fatal = [&session](const std::string& message) {
    std::cerr << message << std::endl;
    session.abort(kExitFailure);
  };
  std::unique_ptr<Communicator> comm = make_communicator(setup, session, config.comm);
  ReducerOptions reducer_options;
  reducer_options.buckets = BucketOptions{static_cast<size_t>(config.comm.bucket_mb * (1 << 20)),
                                          static_cast<size_t>(config.comm.first_bucket_mb * (1 << 20))};
  reducer_options.compress_bf16 = config.comm.compress == Compression::kBf16;
  ReducerFactory make_reducer = [reducer_options](std::vector<at::Tensor> params,
                                                  const std::vector<at::Tensor>& buffers,
                                                  Communicator& c) -> std::unique_ptr<GradReducer> {
    return std::make_unique<BucketedReducer>(std::move(params), buffers, c, reducer_options);
  };
  const c10::Device compute_device = device == DeviceKind::kCuda
                                         ? c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(cuda_device))
                                         : c10::Device(c10::DeviceType::CPU);

  std::unique_ptr<RunLogger> logger;
  std::unique_ptr<Trainer> trainer;
  error = error_of([&] {
    logger = std::make_unique<RunLogger>(config.log, session.is_root(), config.workload);
    trainer = std::make_unique<Trainer>(config, *workload, *comm, *logger, make_reducer, compute_device);
  });
  error = session.first_error(error, config.comm.timeout_s);
  if (!error.empty()) {
    if (session.is_root()) std::cerr << "dtrain: error: " << error << std::endl;
    return kExitFailure;
  }

  RunInfo info;
  info.workload = config.workload;
  info.config_yaml = to_yaml(config);
  info.world_size = session.world_size();
  info.hosts = session.unique_hosts();
  info.ranks_per_host = ranks_per_host(session);
  info.backend = comm->backend_name();
  info.device = compute_device.str();
  info.threads_per_rank = threads;
  info.torch_version = TORCH_VERSION;
  info.mpi_version = session.mpi_library_version();
  info.dtrain_version = DTRAIN_VERSION;
  trainer->run(std::move(info));
  return 0;
}

}  // namespace
}  // namespace dtrain

int main(int argc, char** argv) {
  std::unique_ptr<dtrain::MpiSession> session;
  try {
    session = std::make_unique<dtrain::MpiSession>(&argc, &argv);
  } catch (const std::exception& e) {
    std::cerr << "dtrain: cannot start MPI: " << e.what() << std::endl;
    return dtrain::kExitFailure;
  }
  std::string error;
  try {
    return dtrain::run(argc, argv, *session);
  } catch (const c10::Error& e) {
    error = e.what_without_backtrace();
  } catch (const std::exception& e) {
    error = e.what();
  }
  // Past the agreed start-up, ranks may be inside different collectives: end the whole job rather than
  // leave the healthy ranks waiting for this one.
  const std::string prefix = error.rfind("[rank ", 0) == 0 ? "" : session->rank_prefix();
  std::cerr << prefix << "dtrain: error: " << error << std::endl;
  if (session->world_size() > 1) session->abort(dtrain::kExitFailure);
  return dtrain::kExitFailure;
}
