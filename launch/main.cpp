// The dtrain binary: reads the configuration, brings the ranks together (MPI, or torchrun's environment
// and its c10d store), picks the concrete communicator, reducer and workload, and hands them to the
// trainer. Errors that every rank meets at the same point are agreed and printed once, and every rank
// exits with the same status; any other error is recorded in the run log and ends the whole job
// (MPI_Abort, or an exit that torchrun's agent acts on), so no rank is left waiting. docs/failures.md
// has the rules.
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <torch/version.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "runtime/bootstrap/elastic_error_file.h"
#include "runtime/bootstrap/heartbeat.h"
#include "runtime/bootstrap/launcher_env.h"
#include "runtime/bootstrap/mpi_session.h"
#include "runtime/bootstrap/store_heartbeat.h"
#include "runtime/bootstrap/store_session.h"
#include "runtime/comm/make_communicator.h"
#include "runtime/config/config_cli.h"
#include "runtime/config/config_yaml.h"
#include "runtime/config/validate.h"
#include "runtime/log/run_logger.h"
#include "runtime/monitor/network_route.h"
#include "runtime/monitor/profile_window.h"
#include "runtime/monitor/resource_monitor.h"
#include "runtime/monitor/run_telemetry.h"
#if DTRAIN_WITH_CURL
#include "runtime/monitor/trainer_status.h"
#endif
#include "runtime/reduce/bucket_probe.h"
#include "runtime/reduce/bucketed_reducer.h"
#include "runtime/reduce/shard_tree_reducer.h"
#include "runtime/train/checkpoint_files.h"
#include "runtime/train/memory_copy.h"
#include "runtime/train/run_directory.h"
#include "runtime/train/trainer.h"
#include "runtime/util/activity.h"
#include "runtime/util/cpu_budget.h"
#include "runtime/util/error.h"
#include "runtime/util/process_stats.h"
#include "runtime/util/stop_signals.h"
#include "runtime/util/strings.h"
#include "runtime/util/terminal.h"
#include "runtime/util/timer.h"
#include "workloads/registry.h"

namespace dtrain {
namespace {

// An exception as a Failure: the exit status of the error's kind, its message and, for dtrain's errors,
// its origin.
Failure failure_from(const std::exception& e) {
  if (const auto* error = dynamic_cast<const Error*>(&e)) return Failure{exit_code_of(e), error->message(), error->origin()};
  if (const auto* torch_error = dynamic_cast<const c10::Error*>(&e)) {
    return Failure{kExitFailure, torch_error->what_without_backtrace(), {}};
  }
  return Failure{exit_code_of(e), e.what(), {}};
}

// Runs `body`; its exception, if any, as a Failure.
Failure failure_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const std::exception& e) {
    return failure_from(e);
  }
  return Failure{};
}

// train.threads, else what the launcher and the CPUs this process may use allow (cpu_budget.h).
// Far more threads than cores are refused before any is started (check_thread_count).
ThreadChoice threads_per_rank(const TrainConfig& config, const Session& session) {
  const CpuFacts facts = read_cpu_facts();
  ThreadChoice choice;
  if (config.train.threads > 0) {
    choice = ThreadChoice{static_cast<int>(config.train.threads), "--threads", ""};
  } else if (config.train.deterministic) {
    // A kernel that splits a sum over threads sums in another order with another thread count.
    choice = ThreadChoice{1, "train.deterministic", ""};
  } else {
    choice = choose_threads(process_environment(), facts, session.local_world_size());
  }
  const std::string warning = check_thread_count(choice, cores_per_rank(facts, session.local_world_size()));
  if (!warning.empty()) choice.warning += (choice.warning.empty() ? "" : "; ") + warning;
  return choice;
}

int ranks_per_host(const Session& session) {
  int most = 0;
  for (const std::string& host : session.unique_hosts()) {
    const auto& all = session.hostnames();
    most = std::max(most, static_cast<int>(std::count(all.begin(), all.end(), host)));
  }
  return most;
}

// How traffic between hosts travels, for the run log: what the backend uses, and the interface rank 0's
// kernel routes to the first other host through. Gloo always speaks TCP; Open MPI and NCCL pick their
// transport at run time, and without an RDMA device (InfiniBand, RoCE, Omni-Path) both use TCP sockets.
NetworkInfo network_info(const Session& session, const std::string& backend) {
  NetworkInfo network;
  std::error_code ignored;
  const bool rdma = std::filesystem::exists("/sys/class/infiniband", ignored) &&
                    !std::filesystem::is_empty("/sys/class/infiniband", ignored);
  const std::vector<std::string> hosts = session.unique_hosts();
  if (hosts.size() <= 1) {
    if (backend == "mpi") network.transport = "shared memory";
    else if (backend == "gloo") network.transport = "tcp over loopback";
    else if (backend == "nccl") network.transport = "nccl: NVLink, PCIe or shared memory";
    else network.transport = "none";
    return network;
  }
  if (backend == "gloo") network.transport = "tcp";
  else if (backend == "mpi") network.transport = rdma ? "mpi: its choice (an RDMA device is present)" : "tcp";
  else if (backend == "nccl") network.transport = rdma ? "nccl: its choice (an RDMA device is present)" : "tcp";
  else network.transport = backend;
  network.peer_host = hosts[1];  // hosts come in rank order; rank 0's is the first
  std::string why_not;
  if (const std::optional<NetworkRoute> route = route_to_host(network.peer_host, why_not)) {
    network.interface = route->interface;
    network.address = route->address;
    network.mtu = route->mtu;
  }
  return network;
}

// Throws ConfigError naming the first line in which this rank's dtrain and configuration (`mine`) differ
// from rank 0's (`root`).
void check_same_configuration(const std::string& mine, const std::string& root) {
  if (mine == root) return;
  std::istringstream here_lines(mine);
  std::istringstream root_lines(root);
  std::string here;
  std::string there;
  std::string section;  // the YAML section the lines are in ("train.")
  while (true) {
    const bool more_here = static_cast<bool>(std::getline(here_lines, here));
    const bool more_there = static_cast<bool>(std::getline(root_lines, there));
    if (!more_here) here = "(nothing)";
    if (!more_there) there = "(nothing)";
    if (here != there || !more_here || !more_there) break;
    if (!here.empty() && here.front() != ' ' && here.back() == ':') section = here.substr(0, here.size() - 1) + ".";
  }
  auto key = [&section](const std::string& line) {
    const size_t first = std::min(line.find_first_not_of(' '), line.size());
    return (first > 0 ? section : std::string()) + line.substr(first);
  };
  throw ConfigError("this rank's dtrain or configuration differs from rank 0's: '" + key(here) + "' here, '" +
                    key(there) + "' on rank 0. Start every rank with the same dtrain, flags and files");
}

// --remove-memory-copies: every rank cleans its own node (a node's ranks share the user's directory, and a
// copy that one of them removed is simply gone for the others): every copy no live run holds whose state
// the disk holds too. Exit 0 unless the directory is unsafe.
int remove_memory_copies(const std::string& memory_dir) {
  const std::string root = memory_root(memory_dir);
  if (root.empty()) {
    std::cout << "dtrain: checkpoint.memory_dir is off ('" << memory_dir << "'): no copies to remove" << std::endl;
    return kExitSuccess;
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(root, ec)) {
    print_line_to_stderr("dtrain: error: checkpoint.memory_dir '" + root + "' " +
                         (std::filesystem::exists(root, ec) ? "is not a directory" : "does not exist") +
                         " on this node, so it holds no copies to remove; pass the --checkpoint-memory-dir the runs "
                         "used (their default, auto, is $XDG_RUNTIME_DIR or /dev/shm)");
    return kExitConfig;
  }
  const MemorySweep sweep = sweep_memory_copies(root, SweepScope::kUnneeded);
  if (!sweep.problem.empty()) {
    print_line_to_stderr("dtrain: error: " + sweep.problem);
    return kExitConfig;
  }
  char freed[32];
  std::snprintf(freed, sizeof freed, "%.1f MiB", static_cast<double>(sweep.bytes_freed) / (1 << 20));
  std::cout << "dtrain: removed " << sweep.copies_removed << " checkpoint copies in memory (" << freed << ") from "
            << root << "/dtrain-" << ::geteuid() << "; copies of running dtrains are kept" << std::endl;
  for (const std::string& kept : sweep.kept_ahead) {
    std::cout << "dtrain: kept " << kept << ": newer than any checkpoint on its disk (--resume on this node "
              << "continues from it; remove it by hand if that run is done with)" << std::endl;
  }
  return kExitSuccess;
}

// Each workload with what it trains, its data and the defaults it sets over the generic ones.
void print_workloads(const WorkloadRegistry& registry, const ConfigSchema& schema) {
  bool first = true;
  for (const std::string& name : registry.names()) {
    const std::unique_ptr<Workload> workload = registry.create(name);
    std::cout << (first ? "" : "\n") << name << ": " << registry.description(name) << "\n"
              << "  data: " << workload->data_format() << "\n  defaults:";
    for (const auto& [key, value] : workload_recipe(*workload, schema)) std::cout << " " << key << "=" << value;
    std::cout << "\n";
    first = false;
  }
}

// Who asked this process to stop, and what that usually means: a launcher sends the stop when it ends
// the job, and mpirun kills the ranks a second or two later, before any record at a step boundary.
std::string stop_request_text(int signal, pid_t sender) {
  std::string text = signal_name(signal);
  if (sender <= 0) return text + " from the terminal or the kernel: stopping at the next step boundary with a checkpoint";
  std::string command;
  std::ifstream("/proc/" + std::to_string(sender) + "/comm") >> command;
  const bool launcher = sender == ::getppid();
  text += " from pid " + std::to_string(sender) + (command.empty() ? "" : " (" + command) +
          (launcher ? (command.empty() ? " (" : ", ") + std::string("this rank's launcher)") : command.empty() ? "" : ")") +
          ": stopping at the next step boundary with a checkpoint";
  if (launcher && (command == "mpirun" || command == "orted" || command == "mpiexec" || command == "prterun")) {
    text += ". Open MPI sends it when it ends the job: after a rank died or exited with an error (it then kills "
            "every rank within seconds, before a checkpoint can be saved; its own message names that rank), or when "
            "mpirun itself was stopped";
  } else if (launcher) {
    text += ". A launcher sends it when the job is being stopped, or when it restarts the group after a failure";
  }
  return text;
}

// The part of a run that failure reports need: where each rank is, the heartbeat that names stuck
// ranks, and rank 0's run log. Members are declared in the order they may be destroyed in reverse.
class Job final {
 public:
  // `launcher`: the environment as the launcher left it, read before MPI started.
  // `joined_unix_s`: when the session had started (the ranks had met).
  Job(Session& session, LauncherEnv launcher, const WorkloadRegistry& registry, const ConfigSchema& schema,
      double joined_unix_s)
      : session_(session),
        launcher_(std::move(launcher)),
        registry_(registry),
        schema_(schema),
        joined_unix_s_(joined_unix_s) {}
  // The stop watchdog's first and last words refer to this job: gone with it.
  ~Job() {
    set_stop_last_words(nullptr);
    set_stop_first_words(nullptr);
  }
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  int run(int argc, char** argv);
  // What ended the run, for torchrun's error file (write_elastic_error_file): the failure or the stop,
  // "" after a success.
  const std::string& exit_message() const { return exit_message_; }

  // Ends the job for an error that this rank met alone: rank 0 records it in the run log, another rank
  // hands it to rank 0 over the heartbeat first; then MPI_Abort, so peers inside a collective do not wait
  // for this rank until their timeout. Returns (with the exit status) only in a single-process run.
  int fail_alone(Failure failure);

 private:
  // Runs `body` on every rank and returns the failure the ranks agree on (the lowest failing rank's, on
  // every rank), or none; the agreement is bounded by `wait`.
  Failure agree(const WaitOptions& wait, const std::function<void()>& body) {
    return session_.first_error(failure_of(body), wait);
  }
  // An error that every rank met at the same point: printed once, recorded once, and every rank exits
  // with the same status after a clean goodbye.
  int fail_together(const Failure& failure);
  // What the launcher implies for the configuration: under an elastic agent the global batch is held
  // (train.elastic_batch auto), and every start of the group resumes from its checkpoints, unless
  // checkpoint.resume was set: the agent restarts workers after failures and for nodes that join.
  void apply_launcher(TrainConfig& config, const ConfigSources& sources);
  int train(const CommandLine& cmd, const Workload& workload, BackendKind backend, DeviceKind device, int cuda_device,
            const ThreadChoice& threads);
  // The reducers of the run, and the network probe that sized their buckets (comm.bucket_sizing network,
  // 2 or more ranks, not deterministic: collective, once), or the failure the ranks agreed on.
  struct Reducers {
    ReducerFactory factory;
    std::optional<BucketProbeRecord> probe;
    Failure failure;
  };
  Reducers plan_reducers(const TrainConfig& config, Communicator& comm, c10::Device device, const WaitOptions& wait);
  // The stop watchdog's first words (who asked) and last words (a stop that ends the process at once).
  void install_stop_words(const std::string& checkpoint_dir);
  // The trainer and what watches its loop, declared so that the watchers outlive nothing they watch.
  struct Watchers {
    std::unique_ptr<Trainer> trainer;
    std::unique_ptr<RunTelemetry> telemetry;
    std::unique_ptr<ResourceMonitor> resources;
    std::unique_ptr<ProfileWindow> profile;
#if DTRAIN_WITH_CURL
    std::unique_ptr<TrainerStatusReporter> trainer_status;  // rank 0, where Kubeflow Trainer asks for progress
#endif
  };
  // Local: the run log (rank 0 writes it), the trainer (it loads the data) and its observers.
  void build_trainer(const TrainConfig& config, const TrainConfig& run_config, const Workload& workload, Communicator& comm,
                     const ReducerFactory& make_reducer, c10::Device device, const ThreadChoice& threads,
                     const RunDirectory* run_dir, Watchers& watchers);
  // What the run_start record says of the run.
  RunInfo run_info(const TrainConfig& config, const TrainConfig& run_config, const RunDirectory* run_dir,
                   const Communicator& comm, c10::Device device, const ThreadChoice& threads) const;
  void start_heartbeat(double timeout_s);
  // The stop watchdog's last words (set_stop_last_words): rank 0 records the stop that ends the process
  // at once; returns where the run was.
  std::string record_stop_at_once(int signal, const std::string& why, const std::string& checkpoint_dir);
  // After a failure no agent restarts: rank 0's copy in memory goes, unless it holds the newest state.
  void retire_memory_copy_after_failure();
  void stop_heartbeat();
  void warn(const std::string& message);

  Session& session_;
  LauncherEnv launcher_;
  const WorkloadRegistry& registry_;
  const ConfigSchema& schema_;  // the generic options and the registry's workloads'
  const double joined_unix_s_;

  std::string launcher_note_;  // a warning about the launcher's variables, for the run log
  std::string restart_note_;   // why a restarted group resumes
  std::string resume_job_;     // torchrun's job (TORCHELASTIC_RUN_ID) when its restarts resume unasked
  std::string exit_message_;   // exit_message()
  Activity activity_;
  std::unique_ptr<RunLogger> logger_;
  std::atomic<RunLogger*> log_sink_{nullptr};  // logger_ once it exists; read by the heartbeat thread
  std::unique_ptr<Heartbeat> heartbeat_;
  std::unique_ptr<StoreHeartbeat> store_heartbeat_;  // under torchrun: names stuck ranks through the store
  // Whose checkpoint copy in memory a failure removes (rank 0, with no elastic agent to restart it).
  std::optional<CheckpointOptions> memory_checkpoints_;
};

int Job::run(int argc, char** argv) {
  CommandLine cmd;
  std::unique_ptr<Workload> workload;
  BackendKind backend = BackendKind::kMpi;
  DeviceKind device = DeviceKind::kCpu;
  int cuda_device = -1;
  ThreadChoice threads;
  // Before the configuration is known, the default timeout bounds the agreement.
  Failure failure = agree(WaitOptions{CommOptions{}.timeout_s, &activity_, {}}, [&] {
    cmd = parse_command_line(argc, argv, schema_);
    if (cmd.show_help || cmd.show_version || cmd.list_workloads || cmd.remove_memory_copies) return;
    if (session_.mpi_world()) launcher_note_ = check_launcher(launcher_, session_.world_size());
    workload = registry_.create(cmd.config.workload);
    cmd.config = configure_workload(*workload, cmd.config, cmd.sources, schema_);
    apply_launcher(cmd.config, cmd.sources);
    validate_config(cmd.config, cmd.sources);
    if (cmd.print_config) return;
    device = resolve_device(cmd.config.comm.device);
    backend = resolve_backend(cmd.config.comm.backend, device, session_.kind());
    validate_for_device(cmd.config, device, cmd.sources);
    validate_for_backend(cmd.config, backend, cmd.sources);
    if (device == DeviceKind::kCuda) cuda_device = select_cuda_device(session_, backend);
    threads = threads_per_rank(cmd.config, session_);
    if (session_.is_root()) validate_output_dirs(cmd.config, cmd.sources);
  });
  if (failure.failed()) return fail_together(failure);
  if (cmd.remove_memory_copies) return remove_memory_copies(cmd.config.checkpoint.memory_dir);
  if (cmd.show_help || cmd.show_version || cmd.list_workloads || cmd.print_config) {
    if (session_.is_root()) {
      if (cmd.show_help) std::cout << help_text(schema_);
      if (cmd.show_version) {
        std::cout << "dtrain " << DTRAIN_VERSION << " (" << libtorch_kernels_description() << "; backends: "
                  << join(available_backends()) << "; devices: " << join(available_devices()) << ")\n";
      }
      if (cmd.list_workloads) print_workloads(registry_, schema_);
      if (cmd.print_config) std::cout << to_yaml(cmd.config, schema_);
      std::cout << std::flush;
      if (!std::cout) {
        print_line_to_stderr("dtrain: error: cannot write to standard output");
        return kExitIo;
      }
    }
    return kExitSuccess;
  }
  // Every rank must train the same thing with the same dtrain: a node with another image, or another YAML
  // file at the same path, would otherwise train a different model into the same collectives. Paths only
  // rank 0 uses (log.dir, checkpoint.dir) may be node-local and differ.
  const std::string mine =
      "dtrain " + std::string(DTRAIN_VERSION) + " (" + libtorch_description() + ")\n" + compared_yaml(cmd.config, schema_);
  const WaitOptions wait{cmd.config.comm.timeout_s, &activity_, {}};
  failure = agree(wait, [&] { check_same_configuration(mine, session_.broadcast(mine, 0, wait, "rank 0's configuration")); });
  if (failure.failed()) return fail_together(failure);
  // From here a stop waits for a step boundary (before, there was nothing to save: it ended the process).
  install_stop_signals(StopSignalOptions{cmd.config.checkpoint.on_usr1, cmd.config.checkpoint.stop_timeout_s, true});
  return train(cmd, *workload, backend, device, cuda_device, threads);
}

Job::Reducers Job::plan_reducers(const TrainConfig& config, Communicator& comm, c10::Device device, const WaitOptions& wait) {
  Reducers reducers;
  ReducerOptions options;
  options.buckets = BucketOptions{static_cast<size_t>(config.comm.bucket_mb * (1 << 20)),
                                  static_cast<size_t>(config.comm.first_bucket_mb * (1 << 20))};
  options.compress_bf16 = config.comm.compress == Compression::kBf16;
  // comm.bucket_sizing network: the probe runs once, and each reducer's buckets follow from it and the
  // bytes of its model's gradients. train.deterministic sums whole gradients in its tree after backward:
  // it has no buckets to size.
  std::optional<AllreduceFit> fit;
  double compute_cores = 0.0;
  if (config.comm.bucket_sizing == BucketSizing::kNetwork && comm.world_size() > 1 && !config.train.deterministic) {
    reducers.failure = agree(wait, [&] { fit = probe_allreduce(comm, device); });
    if (reducers.failure.failed()) return reducers;
    if (device.is_cpu()) compute_cores = cores_per_rank(read_cpu_facts(), session_.local_world_size());
    reducers.probe = BucketProbeRecord{fit->latency_s, fit->bytes_per_s, fit->small_bytes, fit->small_s, fit->small_cpu_s,
                                       fit->large_bytes, fit->large_s, fit->probe_s, compute_cores,
                                       per_bucket_s(*fit, compute_cores)};
  }
  // The trainer's batch plan says whether the run is deterministic and how its shards are shared.
  reducers.factory = [options, fit, compute_cores](std::vector<at::Tensor> params, const std::vector<at::Tensor>& buffers,
                                                   Communicator& c, const ReducerPlan& plan) -> std::unique_ptr<GradReducer> {
    if (plan.shards > 0) {
      return std::make_unique<ShardTreeReducer>(std::move(params), buffers, c, plan.shards, plan.sharing_ranks);
    }
    ReducerOptions sized = options;
    if (fit) {
      int64_t gradient_bytes = 0;
      for (const at::Tensor& p : params) gradient_bytes += static_cast<int64_t>(p.nbytes());
      sized.buckets = buckets_for_network(*fit, compute_cores, gradient_bytes, options.buckets);
    }
    return std::make_unique<BucketedReducer>(std::move(params), buffers, c, sized);
  };
  return reducers;
}

void Job::install_stop_words(const std::string& checkpoint_dir) {
  set_stop_first_words([this](int signal, pid_t sender) {
    if (RunLogger* logger = log_sink_.load()) logger->warning(stop_request_text(signal, sender));
  });
  set_stop_last_words([this, checkpoint_dir](int signal, const std::string& why) {
    if (signal == 0) {
      // Not a stop: the process ends for `why` (a worker whose agent is gone), recorded as the error it is.
      if (RunLogger* logger = log_sink_.load()) logger->error(why, 0, activity_.snapshot());
      write_elastic_error_file(process_environment(), kExitComm, why);
      return "the run was " + describe(activity_.snapshot());
    }
    std::string where = record_stop_at_once(signal, why, checkpoint_dir);
    write_elastic_error_file(process_environment(), kExitSignalBase + signal,
                             "stopped at once by " + signal_name(signal) + ": " + why + " (" + where + ")");
    return where;
  });
}

void Job::build_trainer(const TrainConfig& config, const TrainConfig& run_config, const Workload& workload,
                        Communicator& comm, const ReducerFactory& make_reducer, c10::Device device,
                        const ThreadChoice& threads, const RunDirectory* run_dir, Watchers& watchers) {
  logger_ = std::make_unique<RunLogger>(config.log, session_.is_root(),
                                        run_dir ? std::optional<Directory>(run_dir->directory()) : std::nullopt);
  log_sink_.store(logger_.get());
  if (!launcher_note_.empty()) logger_->warning(launcher_note_);
  if (!threads.warning.empty()) logger_->warning(threads.warning);
  if (!restart_note_.empty()) logger_->info(restart_note_);
  if (run_dir && !run_dir->note().empty()) logger_->info(run_dir->note());
  watchers.trainer = std::make_unique<Trainer>(run_config, workload, comm, *logger_, make_reducer, device, &activity_);
  Trainer& trainer = *watchers.trainer;
  // What watches the loop: the epoch records' FLOPs, MFU and network figures, resource samples, the
  // profiler window.
  watchers.telemetry = std::make_unique<RunTelemetry>(trainer.train_options(), comm, *logger_, device);
  watchers.resources = std::make_unique<ResourceMonitor>(run_config.log, comm, *logger_, device);
  watchers.profile = std::make_unique<ProfileWindow>(run_config.log, comm, *logger_, device);
  trainer.observe(*watchers.telemetry);
  trainer.observe(*watchers.resources);
  trainer.observe(*watchers.profile);
  // Kubeflow Trainer's status server, where the TrainJob asks for progress (KUBEFLOW_TRAINER_SERVER_URL).
  const char* status_url = std::getenv("KUBEFLOW_TRAINER_SERVER_URL");
  if (session_.is_root() && status_url != nullptr && *status_url != '\0') {
#if DTRAIN_WITH_CURL
    watchers.trainer_status = std::make_unique<TrainerStatusReporter>(*trainer_status_endpoint_from_env(),
                                                                      run_config.train.epochs, *logger_);
    trainer.observe(*watchers.trainer_status);
#else
    logger_->warning("KUBEFLOW_TRAINER_SERVER_URL is set, but this dtrain was built without libcurl "
                     "(DTRAIN_WITH_CURL): it posts no progress to Kubeflow Trainer's status server");
#endif
  }
  trainer.stop_on([] { return stop_signal(); });
}

RunInfo Job::run_info(const TrainConfig& config, const TrainConfig& run_config, const RunDirectory* run_dir,
                      const Communicator& comm, c10::Device device, const ThreadChoice& threads) const {
  RunInfo info;
  info.workload = config.workload;
  info.config_yaml = to_yaml(config, schema_);
  info.config_changes = config_changes(config, schema_);
  if (run_dir) info.run_name = run_dir->name();
  info.checkpoint_dir = run_config.checkpoint.dir;
  info.world_size = session_.world_size();
  info.hosts = session_.unique_hosts();
  info.rank_hosts = session_.hostnames();
  info.ranks_per_host = ranks_per_host(session_);
  info.backend = comm.backend_name();
  info.device = device.str();
  info.threads_per_rank = threads.threads;
  info.threads_source = threads.source;
  info.torch_version = TORCH_VERSION;
  info.bootstrap = to_string(session_.kind());
  info.launcher = session_.description();
  info.restart_count = session_.restart_count();
  info.joined_unix_s = joined_unix_s_;
  info.dtrain_version = DTRAIN_VERSION;
  if (session_.is_root()) info.network = network_info(session_, info.backend);
  return info;
}

int Job::train(const CommandLine& cmd, const Workload& workload, BackendKind backend, DeviceKind device,
               int cuda_device, const ThreadChoice& threads) {
  const TrainConfig& config = cmd.config;
  at::set_num_threads(threads.threads);
  at::set_num_interop_threads(1);
  start_heartbeat(config.comm.timeout_s);

  WaitOptions wait{config.comm.timeout_s, &activity_, [this] {
                     if (heartbeat_) return heartbeat_->diagnose();
                     return store_heartbeat_ ? store_heartbeat_->diagnose() : std::string();
                   }};
  CommSetup setup;
  setup.backend = backend;
  setup.cuda_device = cuda_device;
  setup.wait = wait;
  setup.wait.active = config.comm.wait == WaitPolicy::kActive;
  setup.on_fatal = [this](const CommError& error) { fail_alone(failure_from(error)); };
  std::unique_ptr<Communicator> comm = make_communicator(setup, session_);
  const c10::Device compute_device = device == DeviceKind::kCuda
                                         ? c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(cuda_device))
                                         : c10::Device(c10::DeviceType::CPU);
  const Reducers reducers = plan_reducers(config, *comm, compute_device, wait);
  if (reducers.failure.failed()) return fail_together(reducers.failure);

  // Rank 0 chooses the run's directory and locks it (and a shared checkpoint.dir); every rank learns where
  // its checkpoints are, so that messages name the same paths everywhere. Under an elastic agent the
  // previous incarnation of rank 0 may still hold the locks for a moment.
  std::unique_ptr<RunDirectory> run_dir;  // held until the run ends: its locks
  Failure failure = agree(wait, [&] {
    if (session_.is_root()) {
      run_dir = RunDirectory::open(config, session_.elastic_agent() ? config.comm.timeout_s : 0.0, resume_job_);
    }
  });
  if (failure.failed()) return fail_together(failure);
  TrainConfig run_config = config;  // checkpoint.dir resolved; config.yaml keeps what was asked for
  failure = agree(wait, [&] {
    run_config.checkpoint.dir =
        session_.broadcast(run_dir ? run_dir->checkpoint_dir() : std::string(), 0, wait, "the checkpoint directory");
  });
  if (failure.failed()) return fail_together(failure);
  // Rank 0's checkpoint copy in memory outlives a failed worker only when an agent will restart it.
  if (session_.is_root() && !session_.elastic_agent()) memory_checkpoints_ = run_config.checkpoint;
  install_stop_words(run_config.checkpoint.dir);

  // Building the trainer loads the data; restoring reads the checkpoint. Both fail the same way on every
  // rank (or on one, whose error the others adopt), so the ranks agree and exit together.
  Watchers watchers;
  failure = agree(wait, [&] {
    build_trainer(config, run_config, workload, *comm, reducers.factory, compute_device, threads, run_dir.get(), watchers);
  });
  if (!failure.failed()) failure = agree(wait, [&] { watchers.trainer->restore(); });
  if (failure.failed()) return fail_together(failure);

  RunInfo info = run_info(config, run_config, run_dir.get(), *comm, compute_device, threads);
  info.bucket_probe = reducers.probe;
  try {
    watchers.trainer->run(std::move(info));
  } catch (const NonFiniteError& e) {
    // Decided from values reduced over all ranks: every rank stops at the same step with this error.
    return fail_together(failure_from(e));
  } catch (const StoppedBySignal& e) {
    // Agreed at a step boundary, the checkpoint saved and the stop recorded by rank 0 (its console line).
    stop_heartbeat();
    exit_message_ = e.what();
    return exit_code_of(e);
  }
  stop_heartbeat();
  return kExitSuccess;
}

void Job::apply_launcher(TrainConfig& config, const ConfigSources& sources) {
  if (!session_.mpi_world() && !launcher_.mpi_variable.empty()) {
    launcher_note_ = "ignoring the MPI launcher's variables (" + launcher_.mpi_variable +
                     "): comm.bootstrap is 'env', so the ranks come from torchrun's (" + launcher_.torch_summary + ")";
  }
  if (config.train.elastic_batch == ElasticBatch::kAuto) {
    config.train.elastic_batch =
        session_.elastic_agent() || config.train.deterministic ? ElasticBatch::kGlobal : ElasticBatch::kPerRank;
  }
  if (session_.elastic_agent() && config.checkpoint.enabled && !sources.count("checkpoint.resume")) {
    config.checkpoint.resume = true;
    resume_job_ = process_environment()("TORCHELASTIC_RUN_ID").value_or("");
    restart_note_ = "under torchrun's elastic agent (restart " + std::to_string(session_.restart_count()) +
                    "): resuming from the newest checkpoint if there is one (--resume=false starts afresh)";
  }
}

std::string Job::record_stop_at_once(int signal, const std::string& why, const std::string& checkpoint_dir) {
  const ActivitySnapshot where = activity_.snapshot();
  if (RunLogger* logger = log_sink_.load()) {
    StopRecord record;
    record.signal = signal_name(signal);
    record.signal_number = signal;
    record.epoch = where.epoch;
    record.step = where.step;
    record.checkpoints = !checkpoint_dir.empty();
    try {
      record.checkpoint = latest_checkpoint(checkpoint_dir).value_or("");
    } catch (const std::exception&) {
    }
    record.stop_s = seconds_since_stop_signal();
    record.at_once = why + " (the run was " + describe(where) + ")";
    logger->stopped_at_once(record);
  }
  return "the run was " + describe(where);
}

void Job::start_heartbeat(double timeout_s) {
  if (session_.world_size() == 1) return;
  const std::optional<MpiWorld> mpi = session_.mpi_world();
  if (!mpi) {
    // Under torchrun, Gloo's and NCCL's timeouts bound every wait and the agent restarts the group; the
    // store heartbeat names the rank a stalled collective waits for. Without it a run still fails at the
    // timeout, only without the name: a store that cannot take a connection more is worth a note only.
    if (session_.store_endpoint()) {
      const Failure failure = failure_of([&] {
        store_heartbeat_ = std::make_unique<StoreHeartbeat>(session_, activity_, StoreHeartbeatOptions{});
      });
      if (failure.failed()) print_line_to_stderr(session_.origin().prefix() + "dtrain: note: " + failure.message);
    }
    return;
  }
  if (!mpi->thread_multiple) {
    if (session_.is_root()) {
      print_line_to_stderr(
          "dtrain: note: this MPI provides no MPI_THREAD_MULTIPLE, so no heartbeat runs: a stuck rank "
          "still fails the job after comm.timeout_s, but cannot be named");
    }
    return;
  }
  HeartbeatCallbacks callbacks;
  callbacks.on_warning = [this](const std::string& message) { warn(message); };
  callbacks.on_peer_fatal = [this](int rank, const std::string& message, const ActivitySnapshot& where) {
    if (RunLogger* logger = log_sink_.load()) logger->error(message, rank, where);
  };
  heartbeat_ = std::make_unique<Heartbeat>(session_, activity_, heartbeat_options_for(timeout_s), std::move(callbacks));
}

void Job::stop_heartbeat() {
  store_heartbeat_.reset();
  if (!heartbeat_) return;
  const Failure failure = failure_of([&] { heartbeat_->stop(); });
  if (failure.failed()) fail_alone(failure);
}

void Job::warn(const std::string& message) {
  if (session_.is_root()) {
    if (RunLogger* logger = log_sink_.load()) {
      logger->warning(message);
      return;
    }
    print_line_to_stderr("dtrain: warning: " + message);
  } else {
    print_line_to_stderr(session_.origin().prefix() + "dtrain: warning: " + message);
  }
}

void Job::retire_memory_copy_after_failure() {
  if (!memory_checkpoints_) return;
  const std::string note = retire_memory_copy(memory_root(memory_checkpoints_->memory_dir), memory_checkpoints_->dir);
  memory_checkpoints_.reset();
  if (!note.empty()) warn(note);
}

int Job::fail_together(const Failure& failure) {
  exit_message_ = failure.text();
  retire_memory_copy_after_failure();
  if (session_.is_root()) {
    print_line_to_stderr("dtrain: error: " + failure.text());
    if (RunLogger* logger = log_sink_.load()) {
      logger->error(failure.message, std::max(failure.origin.rank, 0), activity_.snapshot());
    }
  }
  stop_heartbeat();
  return failure.exit_code;
}

int Job::fail_alone(Failure failure) {
  // This rank's error: in a job of several, the message says which rank it is.
  if (failure.origin.rank < 0 && session_.world_size() > 1) {
    failure.origin.rank = session_.rank();
    failure.origin.world_size = session_.world_size();
  }
  print_line_to_stderr("dtrain: error: " + failure.text());
  retire_memory_copy_after_failure();
  if (session_.is_root()) {
    if (RunLogger* logger = log_sink_.load()) logger->error(failure.message, 0, activity_.snapshot());
  } else if (heartbeat_) {
    heartbeat_->report_fatal(failure.message);
  }
  // Before the abort, which ends this process: torchrun's agent then names this worker's failure first.
  write_elastic_error_file(process_environment(), failure.exit_code, failure.text());
  if (session_.world_size() > 1) session_.abort(failure.exit_code);
  return failure.exit_code;
}

}  // namespace
}  // namespace dtrain

namespace dtrain {
namespace {

// The session the launcher's environment and comm.bootstrap ask for. The configuration is read here
// only for comm.bootstrap and comm.timeout_s (how long to wait for the other ranks): its errors are
// reported after the ranks have met, once, by the parse every rank repeats.
std::unique_ptr<Session> start_session(int* argc, char*** argv, const LauncherEnv& launcher,
                                       const ConfigSchema& schema) {
  CommOptions comm;
  try {
    comm = parse_command_line(*argc, *argv, schema).config.comm;
  } catch (const std::exception&) {
  }
  if (choose_bootstrap(comm.bootstrap, launcher) == BootstrapKind::kEnv) {
    const TorchEnv env = read_torch_env(process_environment());
    // A worker whose agent is gone can only hold the others up: end it at once, from the watcher's
    // thread, whatever this worker is waiting for.
    // Rank 0 records it in its run log (as an `error` record) first, once there is one.
    auto on_agent_gone = [origin = ErrorOrigin{env.rank, env.world_size, {}}](pid_t agent) {
      end_process_at_once(kExitComm,
                          "the torchrun agent that started this worker (pid " + std::to_string(agent) +
                              ") is gone; stopping, so that the other workers fail fast and their agents restart "
                              "without this one",
                          origin.prefix());
    };
    return std::make_unique<StoreSession>(env, comm.timeout_s, on_agent_gone);
  }
  return std::make_unique<MpiSession>(argc, argv, /*started_alone=*/launcher.mpi_variable.empty());
}

}  // namespace
}  // namespace dtrain

namespace {
// What `dtrain` trains when no file or flag names a workload: the README's main job.
constexpr const char* kDefaultWorkload = "mnist";
}  // namespace

int main(int argc, char** argv) {
  // A console that goes away (`dtrain ... | head`) is a failed write, reported and recorded with status 5
  // (docs/failures.md), not a silent death by SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  // Before any thread or large mapping: too small an address space would stall the start without a word.
  if (const std::string problem = dtrain::address_space_problem(); !problem.empty()) {
    dtrain::print_line_to_stderr("dtrain: error: " + problem);
    dtrain::write_elastic_error_file(dtrain::process_environment(), dtrain::kExitConfig, problem);
    return dtrain::kExitConfig;
  }
  const dtrain::LauncherEnv launcher = dtrain::read_launcher_env(dtrain::process_environment());
  // From here a stop signal waits for a step boundary (or the stop timeout) instead of killing the
  // process: the defaults until the configuration is read.
  dtrain::install_stop_signals(dtrain::StopSignalOptions{});
  dtrain::WorkloadRegistry registry;
  dtrain::register_builtin_workloads(registry);
  const dtrain::ConfigSchema schema(registry.config_fields(), kDefaultWorkload);
  std::unique_ptr<dtrain::Session> session;
  try {
    session = dtrain::start_session(&argc, &argv, launcher, schema);
  } catch (const dtrain::Error& e) {
    dtrain::print_line_to_stderr(std::string("dtrain: error: ") + e.what());
    dtrain::write_elastic_error_file(dtrain::process_environment(), dtrain::exit_code_of(e), e.what());
    return dtrain::exit_code_of(e);
  } catch (const std::exception& e) {
    dtrain::print_line_to_stderr(std::string("dtrain: cannot start: ") + e.what());
    dtrain::write_elastic_error_file(dtrain::process_environment(), dtrain::kExitComm,
                                     std::string("cannot start: ") + e.what());
    return dtrain::kExitComm;
  }
  dtrain::Job job(*session, launcher, registry, schema, dtrain::unix_now_s());
  dtrain::Failure failure;
  try {
    const int status = job.run(argc, argv);
    dtrain::write_elastic_error_file(dtrain::process_environment(), status, job.exit_message());
    return status;
  } catch (const std::exception& e) {
    failure = dtrain::failure_from(e);
  }
  // Past the agreed start-up, ranks may be inside different collectives: end the whole job rather than
  // leave the healthy ranks waiting for this one.
  return job.fail_alone(std::move(failure));
}
