// Plain records of what happened in a run, filled by the trainer and written by the RunLogger.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/log/metric_values.h"

namespace dtrain {

struct RunInfo {
  std::string workload;
  std::string config_yaml;  // the effective configuration
  int world_size = 1;
  std::vector<std::string> hosts;  // unique, in rank order
  int ranks_per_host = 1;          // largest number of ranks on one host
  std::string backend;
  std::string device;
  int threads_per_rank = 1;
  std::string torch_version;
  std::string mpi_version;
  std::string dtrain_version;
  std::string data_description;
  int64_t train_samples = 0;
  int64_t test_samples = 0;
  int64_t parameters = 0;
};

struct ProgressInfo {
  int64_t epoch = 0;
  int64_t samples_done = 0;   // global, this epoch
  int64_t samples_total = 0;  // global dataset size
  MetricValues metrics;       // the training metrics since the previous progress line, over all ranks
};

struct EpochStats {
  int64_t epoch = 0;
  int64_t epochs = 0;
  double lr = 0.0;
  int64_t steps = 0;             // per rank
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
  int64_t bytes_allreduced = 0;  // per rank
  int64_t skipped_steps = 0;     // optimizer steps skipped for NaN/inf gradients (fp16 overflow, skip-step)
  std::string checkpoint_path;   // empty if none was written
};

struct RunSummary {
  int64_t epochs_run = 0;
  double total_s = 0.0;
  MetricValues final_test;  // the last epoch's evaluation metrics
  std::vector<int64_t> peak_rss_bytes;  // per rank
};

}  // namespace dtrain
