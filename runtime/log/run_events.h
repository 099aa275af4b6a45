// Plain records of what happened in a run, filled by the trainer and written by the RunLogger.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/log/metric_values.h"

namespace dtrain {

// How the ranks' traffic between hosts travels, as rank 0 sees it.
struct NetworkInfo {
  // "shared memory" (MPI on one host), "tcp" (between hosts over sockets), "tcp over loopback" (Gloo on
  // one host), or the library's own choice where it picks at run time ("nccl: ...", "mpi: ...").
  std::string transport = "unknown";
  std::string peer_host;  // the host rank 0's route was taken to ("" on one host)
  std::string interface;  // rank 0's interface towards peer_host ("" when unknown or on one host)
  std::string address;    // its address there
  int mtu = 0;            // its MTU; 0: unknown
};

// The buckets comm.bucket_sizing 'network' chose, and the probe behind them (reduce/bucket_probe.h).
struct BucketProbeRecord {
  double latency_s = 0.0;
  double bytes_per_s = 0.0;
  int64_t small_bytes = 0;
  double small_s = 0.0;
  double small_cpu_s = 0.0;
  int64_t large_bytes = 0;
  double large_s = 0.0;
  double probe_s = 0.0;
  double compute_cores = 0.0;  // the cores a rank computes on; 0: not on the CPU
  double per_bucket_s = 0.0;   // what one more bucket costs a step
};

// How one trained module's gradients are cut into buckets.
struct GradientBuckets {
  std::string module;                 // as the workload names it: "model"; "generator", "discriminator"
  std::vector<int64_t> bucket_bytes;  // in the order they are sent
};

// A train.deterministic run's split of the global batch (runtime/reduce/shard_tree_reducer.h).
struct DeterministicRecord {
  int64_t shards = 0;             // train.shards
  int64_t shards_per_rank = 0;    // backward passes per step on each rank
  int64_t global_batch = 0;       // samples per optimizer step
  int64_t samples_per_shard = 0;  // of a full global batch
};

struct RunInfo {
  std::string workload;
  std::string config_yaml;  // the effective configuration
  // Its keys whose values differ from dtrain's generic defaults ("train.lr: 1"), in config order: what the
  // workload's recipe, the --config file and the flags set.
  std::vector<std::string> config_changes;
  std::string run_name;        // the run directory's name under log.dir
  std::string checkpoint_dir;  // where its checkpoints go ("" without checkpoints)
  int world_size = 1;
  std::vector<std::string> hosts;  // unique, in rank order
  std::vector<std::string> rank_hosts;  // each rank's host, indexed by rank
  int ranks_per_host = 1;          // largest number of ranks on one host
  std::string backend;
  std::string device;
  int threads_per_rank = 1;
  std::string threads_source;  // what decided it: "--threads", "OMP_NUM_THREADS=4", "2 cores / 2 ranks on the node"
  std::string torch_version;
  std::string bootstrap;  // "mpi" or "env": how the ranks met
  std::string launcher;   // "Open MPI v4.1.4", "torchrun, store at node-0:29500, restart 1 of at most 3"
  int restart_count = 0;  // torchrun's restarts of the worker group so far
  double joined_unix_s = 0.0;  // when the ranks had met (MPI started, or torchrun's store joined); 0: unknown
  std::string dtrain_version;
  std::string data_description;
  int64_t bad_files_left_out = 0;  // WorkloadData::bad_files_left_out
  int64_t train_samples = 0;
  int64_t test_samples = 0;
  int64_t parameters = 0;
  std::string accelerator;   // rank 0's GPU product name ("" without a GPU or NVML)
  double peak_tflops = 0.0;  // one device's peak behind the mfu figures; 0 = unknown
  NetworkInfo network;
  std::optional<BucketProbeRecord> bucket_probe;  // set under comm.bucket_sizing 'network' with 2 or more ranks
  std::vector<GradientBuckets> gradient_buckets;  // one per module with an optimizer
  std::optional<DeterministicRecord> deterministic;  // set under train.deterministic
};

// A checkpoint written inside an epoch (checkpoint.every_steps, checkpoint.every_s).
struct CheckpointRecord {
  int64_t epoch = 0;          // the epoch in progress
  int64_t step = 0;           // its optimizer steps taken
  int64_t epoch_samples = 0;  // its global samples trained
  std::string path;
  double save_s = 0.0;        // training time it took: the copy to host memory, or the whole write
  double persist_s = 0.0;     // serialising, writing, syncing and renaming it (behind training when async)
  bool async = false;         // written by the checkpoint writer's thread while training went on
  double wait_s = 0.0;        // of save_s: waiting for the previous checkpoint's persist to finish
};

// A run stopped by a signal (stop_signals.h) at a step boundary all ranks agreed on.
struct StopRecord {
  std::string signal;          // "SIGTERM"
  int signal_number = 0;
  int rank = 0;                // the lowest rank that received it (others may have too)
  int64_t epoch = 0;           // the epoch in progress (or just ended, when step == 0)
  int64_t step = 0;            // its optimizer steps taken; 0: stopped at the epoch's end (or before training)
  int64_t epoch_samples = 0;   // its global samples trained
  std::string checkpoint;      // the checkpoint a --resume continues from ("" when none was saved)
  bool saved = false;          // this stop saved `checkpoint` (false: an earlier one, or none, holds the state)
  bool in_evaluation = false;  // it came during the epoch's evaluation, which a resume does again
  bool checkpoints = true;     // checkpoint.enabled
  std::string at_once;         // why the process exited at once instead (a second signal, the stop timeout)
  double stop_s = 0.0;         // rank 0: from its signal (or its learning of the stop) to the checkpoint on disk
};

// Where a resumed run continued, and what the interruption cost.
struct ResumeRecord {
  std::string checkpoint;
  bool from_memory = false;     // read from rank 0's copy in memory (checkpoint.memory_dir), not the disk
  int restart_count = 0;        // torchrun's restarts of the worker group (TORCHELASTIC_RESTART_COUNT)
  int64_t from_world_size = 0;  // the world size that wrote the checkpoint
  int64_t world_size = 0;       // this run's
  int64_t epoch = 0;            // the epoch it continues (the one after the checkpoint's, at its end)
  int64_t step = 0;             // optimizer steps of that epoch already taken
  int64_t epoch_samples = 0;    // global samples of that epoch already trained
  // From the last progress mark of the interrupted run, when there is one (-1: unknown): the optimizer
  // steps it trained after the checkpoint, which this run trains again, and the seconds from that mark
  // to this resume (detection, restart and start-up).
  int64_t steps_redone = -1;
  double restart_s = -1.0;
  double lost_s = -1.0;  // seconds from the checkpoint being written to this resume (-1: not recorded)
  // Where restart_s went, from this process's side (-1: unknown): down_s from that mark to this process's
  // start (the failure noticed, the launcher's restart), join_s from the start to the ranks having met
  // (MPI's start, or torchrun's store and rendezvous), setup_s from there to reading the checkpoint (the
  // run directory, the data, the model); restore_s follows.
  double down_s = -1.0;
  double join_s = -1.0;
  double setup_s = -1.0;
  double restore_s = 0.0;    // reading and loading the checkpoint
  double unix_time_s = 0.0;  // when training continues (for the restart cost, to the millisecond)
};

// The files of a --profile-steps window, in rank 0's run directory.
struct ProfileRecord {
  int rank = 0;
  int64_t first_step = 0;
  int64_t last_step = 0;
  bool kineto = false;  // LibTorch's trace (with device activity) rather than dtrain's CPU-only one
  bool cuda = false;
  int64_t events = 0;
  std::string trace;  // Chrome trace JSON
  std::string table;  // the operators' CSV table
};

struct ProgressInfo {
  int64_t epoch = 0;
  int64_t samples_done = 0;   // global, this epoch
  int64_t samples_total = 0;  // global dataset size
  MetricValues metrics;       // the training metrics since the previous progress line, over all ranks
  int64_t step = 0;           // the epoch's steps done (micro-batches with train.accumulate)
  double samples_per_s = 0.0;  // global training samples per second since the previous line (0: unknown)
  std::optional<double> run_left_s{};  // the estimate of the whole run's time left (runtime/train/run_eta.h)
  int64_t epoch_samples = 0;  // global samples this epoch trains (fewer than samples_total with train.max_steps)
};

struct EpochStats {
  int64_t epoch = 0;
  int64_t epochs = 0;
  double lr = 0.0;
  int64_t steps = 0;             // per rank, trained by this run (a resumed epoch: since the resume)
  int64_t first_step = 1;        // the epoch's step this run began it at (after a mid-epoch resume: > 1)
  int64_t train_samples = 0;     // global
  MetricValues train;            // the workload's training metrics over the epoch's samples, all ranks
  MetricValues test;             // its evaluation metrics over the whole test set
  int64_t test_samples = 0;
  double epoch_s = 0.0;          // train + eval + checkpoint
  double train_s = 0.0;
  double eval_s = 0.0;
  double samples_per_s = 0.0;    // global training samples / train_s
  double comm_s = 0.0;           // rank 0's summed allreduce windows
  double exposed_comm_s = 0.0;   // rank 0's communication not hidden behind backward
  double comm_wait_cpu_s = 0.0;  // rank 0's CPU seconds (all its threads) while it waited in exposed_comm_s
  // Per rank (index = rank), all ranks' figures gathered at the epoch's end (runtime/monitor/rank_waits.h):
  std::vector<double> exposed_comm_s_by_rank;
  std::vector<double> comm_wait_cpu_s_by_rank;
  // The share of the epoch's training time that the other ranks spent waiting for this rank: how much
  // later than the earliest rank it reached the gradient allreduce, summed over the steps, over train_s.
  std::vector<double> straggler_by_rank;
  int64_t bytes_allreduced = 0;  // per rank
  int64_t bytes_allreduced_per_step = 0;  // per rank: the gradient bytes one optimizer step averages
  double algbw_gbps = 0.0;  // bytes_allreduced / comm_s: the allreduce rate (GB/s) while buckets were in flight
  double busbw_gbps = 0.0;  // algbw x 2 (n - 1) / n: what each rank's link carried (NCCL tests' convention)
  int64_t net_tx_bytes_per_step = 0;  // rank 0's NIC bytes per step while training (sampler's interfaces)
  int64_t net_rx_bytes_per_step = 0;
  int64_t skipped_steps = 0;     // optimizer steps skipped for NaN/inf gradients (fp16 overflow, skip-step)
  // Global: samples of the epoch (training and evaluation) whose files could not be decoded and were stood
  // in for (data.skip_bad_images; Batch::bad_samples).
  int64_t bad_samples = 0;
  double flops_per_sample = 0.0;  // training FLOPs per sample, counted over the run's first steps (flop_counter.h)
  double tflops_achieved = 0.0;   // all ranks: flops_per_sample x train_samples / train_s / 1e12
  std::optional<double> mfu;      // tflops_achieved / (train.peak_tflops x world size), when the peak is known
  std::string checkpoint_path;   // empty if none was written
  std::optional<double> run_left_s;  // the estimate of the run's time left after this epoch
};

// What one rank used at one moment (runtime/monitor/resource_poller.h).
struct ResourceSample {
  double unix_time_s = 0.0;  // wall clock (seconds since 1970), comparable across the ranks of a job
  double cpu_percent = 0.0;  // process CPU time (user + system, all threads) over the interval, % of one core
  int64_t rss_bytes = 0;     // resident set size of the process
  int64_t host_mem_used_bytes = 0;  // MemTotal - MemAvailable of the host (the node, or the container's view)
  int64_t net_rx_bytes = 0;  // received by the counted interfaces since the sampler started
  int64_t net_tx_bytes = 0;  // sent by them since the sampler started
  // With a GPU (NVML) only:
  std::optional<double> gpu_util_percent;         // share of the interval a kernel ran
  std::optional<int64_t> gpu_mem_used_bytes;      // device memory in use (all processes)
  std::optional<double> gpu_mem_bw_util_percent;  // share of the interval device memory was read or written
  std::optional<double> gpu_power_w;
  std::optional<double> gpu_sm_clock_mhz;
};

// Updates posted to Kubeflow Trainer's status server (runtime/monitor/trainer_status.h).
struct StatusPosts {
  int64_t posted = 0;
  int64_t failed = 0;
};

struct RunSummary {
  int64_t epochs_run = 0;
  double total_s = 0.0;
  MetricValues final_test;  // the last epoch's evaluation metrics
  std::vector<int64_t> peak_rss_bytes;  // per rank
  std::optional<StatusPosts> trainer_status;  // set where rank 0 posts progress to Kubeflow Trainer
};

}  // namespace dtrain
