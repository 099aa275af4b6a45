// The run configuration as plain data. Defaults live here and only here: the CLI help, the YAML
// reference in the docs and --print-config all read them from these structs.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace dtrain {

enum class OptimizerKind { kAdadelta, kSgd };
enum class LogFormat { kKatib, kPytorch };
enum class BackendKind { kAuto, kMpi, kNccl };
enum class DeviceKind { kAuto, kCpu, kCuda };
enum class Precision { kFp32, kBf16, kFp16 };  // compute precision of forward/backward under autocast
enum class Compression { kNone, kBf16 };        // wire format of gradient buckets
enum class NonFinitePolicy { kStop, kSkipStep };  // what a NaN/inf loss or gradient does to the run

struct TrainOptions {
  int64_t epochs = 1;
  int64_t batch_size = 64;  // per rank; the global batch is batch_size x world_size
  int64_t eval_batch_size = 1000;
  OptimizerKind optimizer = OptimizerKind::kAdadelta;
  double lr = 1.0;
  double momentum = 0.9;  // SGD only
  double lr_gamma = 0.7;  // step decay: lr x gamma^(floor((epoch - 1) / lr_step_epochs))
  int64_t lr_step_epochs = 1;
  int64_t seed = 1;
  int64_t max_steps = 0;   // per rank and epoch; 0 = the whole epoch
  int64_t accumulate = 1;  // backward passes per optimizer step; only the last one communicates
  int64_t threads = 0;     // intra-op threads per rank; 0 = cores of the node / ranks on the node
  Precision precision = Precision::kFp32;  // bf16/fp16: autocast; fp16 adds a dynamic loss scale
  NonFinitePolicy on_nonfinite = NonFinitePolicy::kStop;  // see docs/failures.md
};

struct DataOptions {
  std::string dir;  // empty: the workload's default location
  bool synthetic = false;
};

struct CommOptions {
  BackendKind backend = BackendKind::kAuto;
  DeviceKind device = DeviceKind::kAuto;
  double bucket_mb = 25.0;
  double first_bucket_mb = 1.0;  // PyTorch DDP's first bucket: gradients ready first start moving early
  // A collective that does not finish in this time fails the run. Five minutes is far above any step or
  // checkpoint of the studies' models at 32 nodes, and well below PyTorch's 10; the heartbeat warns about
  // stopped ranks within seconds and about a lagging one after a fifth of it.
  double timeout_s = 300.0;
  Compression compress = Compression::kNone;  // bf16 halves the bytes of fp32 gradient buckets on the wire
};

struct LogOptions {
  std::string dir = "dtrain-logs";
  LogFormat format = LogFormat::kKatib;
  int64_t interval = 10;  // steps between progress lines; 0 = none
  bool progress_bar = true;  // only drawn when stderr is a terminal
};

struct CheckpointOptions {
  std::string dir = "dtrain-checkpoints";
  bool resume = false;
  int64_t keep = 3;  // newest checkpoints kept; 0 = keep all
  bool enabled = true;
};

struct TrainConfig {
  std::string workload = "mnist";
  TrainOptions train;
  DataOptions data;
  CommOptions comm;
  LogOptions log;
  CheckpointOptions checkpoint;
};

// Where each key's value came from ("--batch-size", "run.yaml"); keys left at their default are absent.
using ConfigSources = std::map<std::string, std::string>;

const char* to_string(OptimizerKind kind);
const char* to_string(LogFormat format);
const char* to_string(BackendKind kind);
const char* to_string(DeviceKind kind);
const char* to_string(Precision precision);
const char* to_string(Compression compression);
const char* to_string(NonFinitePolicy policy);

}  // namespace dtrain
