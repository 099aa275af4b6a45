// The run configuration as plain data. The generic defaults live here; a workload's recipe overrides
// some of them (Workload::apply_defaults), and the YAML file and flags override both. A workload's own
// options (biggan.d_steps) live in its section of workload_options, declared in its folder. The CLI help and
// the YAML reference read the generic ones from these structs; --print-config shows the merged result.
#pragma once

#include <any>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/util/error.h"

namespace dtrain {

enum class OptimizerKind { kAdadelta, kSgd, kAdam, kAdamW };
enum class LrSchedule { kConstant, kStep, kMultiStep, kCosine };
enum class LogFormat { kKatib, kPytorch };
// Rank 0's live progress (rate and time left of the epoch and the evaluation): a bar redrawn in place, a
// plain line every log.progress_interval_s, or none; auto: the bar where a terminal shows stderr (also
// through Open MPI's launcher), else the lines.
enum class ProgressMode { kAuto, kBar, kLines, kOff };
enum class BackendKind { kAuto, kMpi, kNccl, kGloo };
enum class BootstrapKind { kAuto, kMpi, kEnv };  // how the ranks find each other
enum class DeviceKind { kAuto, kCpu, kCuda };
enum class Precision { kFp32, kBf16, kFp16 };  // compute precision of forward/backward under autocast
enum class Compression { kNone, kBf16 };        // wire format of gradient buckets
// How a rank waits for an MPI collective: passive tests it with short pauses between polls (the progress
// thread of mpi_progress.h for the gradients) and blocks; active polls without pause, as Open MPI's own
// MPI_Wait does, for nodes with a core to spare and the lowest latency.
enum class WaitPolicy { kPassive, kActive };
enum class BucketSizing { kFixed, kNetwork };  // comm.bucket_mb as given, or from a probe at start-up
enum class NonFinitePolicy { kStop, kSkipStep };  // what a NaN/inf loss or gradient does to the run
// When the world size changes between restarts: hold the global batch (per-rank batch = global / ranks)
// or the per-rank batch. auto: global under torchrun's elastic agent, else per-rank.
enum class ElasticBatch { kAuto, kGlobal, kPerRank };

struct TrainOptions {
  int64_t epochs = 1;
  int64_t batch_size = 64;  // per rank; the global batch is batch_size x world_size
  int64_t eval_batch_size = 1000;
  OptimizerKind optimizer = OptimizerKind::kSgd;
  double lr = 0.1;
  double momentum = 0.9;  // SGD only
  bool nesterov = false;  // SGD only
  double weight_decay = 0.0;  // L2 for SGD and Adam, decoupled for AdamW
  bool no_decay_norm_bias = false;  // no weight decay on biases and normalisation weights (1-d tensors)
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_eps = 1e-8;
  // The learning rate at each step: linear warm-up over warmup_epochs (in steps), then the schedule.
  LrSchedule lr_schedule = LrSchedule::kConstant;
  double lr_gamma = 0.1;  // step: lr x gamma^floor((epoch - 1) / lr_step_epochs); multistep: per milestone
  int64_t lr_step_epochs = 30;
  std::vector<int64_t> lr_milestones;  // multistep: increasing epochs after which the rate is multiplied by gamma
  double lr_min = 0.0;        // cosine: the rate at the end of the last epoch
  double warmup_epochs = 0.0;
  double label_smoothing = 0.0;  // classifiers: cross-entropy against (1 - e) one-hot + e uniform
  double clip_grad_norm = 0.0;   // clip the averaged gradients to this global L2 norm; 0 = no clipping
  int64_t seed = 1;
  int64_t max_steps = 0;   // per rank and epoch; 0 = the whole epoch
  int64_t eval_samples = 0;  // evaluate on the first this many test samples; 0 = the whole test set
  int64_t accumulate = 1;  // backward passes per optimizer step; only the last one communicates
  ElasticBatch elastic_batch = ElasticBatch::kAuto;
  // With elastic_batch global: samples per optimizer step over all ranks. 0: batch_size x accumulate x
  // ranks of the run's first start (a resumed run keeps its checkpoint's).
  int64_t global_batch_size = 0;
  int64_t threads = 0;     // intra-op threads per rank; 0 = cores of the node / ranks on the node
  Precision precision = Precision::kFp32;  // bf16/fp16: autocast; fp16 adds a dynamic loss scale
  bool channels_last = false;  // 4-d activations and weights in NHWC memory order (faster convolutions on GPUs)
  bool sync_batchnorm = false;  // BatchNorm batch statistics over the global batch (all ranks) in training
  // Same bits at any world size (runtime/reduce/shard_tree_reducer.h): the global batch is split into
  // `shards` fixed micro-batches whose gradients are summed in one tree over shard indices, whatever the
  // ranks; one intra-op thread per rank. Holds the global batch (train.elastic_batch global).
  bool deterministic = false;
  int64_t shards = 8;  // with deterministic: a power of two; the world size must divide it
  NonFinitePolicy on_nonfinite = NonFinitePolicy::kStop;  // see docs/failures.md
  double peak_tflops = 0.0;  // one device's peak TFLOP/s at the run's precision, for MFU; 0 = unknown
};

struct DataOptions {
  std::string dir;  // empty: the workload's default location
  bool synthetic = false;
  int64_t image_size = 0;  // side of the square images the model sees; 0 = the workload's own size
  int64_t workers = 4;     // decoding threads per rank for datasets read from image files
  double val_fraction = 0.1;  // image folders without a val/ folder: the seeded share held out for testing
  bool skip_bad_images = false;  // image files the start-up check finds bad are left out (counted), not an error
};

// Defaults that code below the configuration (the reducer's bucket layout, the heartbeat) also starts
// from: named once, here.
constexpr double kDefaultBucketMb = 25.0;
constexpr double kDefaultFirstBucketMb = 1.0;
// A collective that does not finish in this time fails the run. Five minutes is far above any step or
// checkpoint of the studies' models at 32 nodes, and well below PyTorch's 10; the heartbeat warns about
// stopped ranks within seconds and about a lagging one after a fifth of it.
constexpr double kDefaultCommTimeoutS = 300.0;

struct CommOptions {
  // mpi: the MPI launcher's ranks (mpirun, srun); env: RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT as
  // torchrun and a PyTorchJob set them; auto: whichever launcher started this process. Read before the
  // ranks exist, so only from the command line and the --config file.
  BootstrapKind bootstrap = BootstrapKind::kAuto;
  BackendKind backend = BackendKind::kAuto;
  DeviceKind device = DeviceKind::kAuto;
  double bucket_mb = kDefaultBucketMb;
  double first_bucket_mb = kDefaultFirstBucketMb;  // as PyTorch DDP: gradients ready first start moving early
  // network: the buckets as small as the allreduce's latency allows (reduce/bucket_probe.h), bucket_mb and
  // first_bucket_mb their upper bounds.
  BucketSizing bucket_sizing = BucketSizing::kFixed;
  double timeout_s = kDefaultCommTimeoutS;  // a collective that takes longer fails the run
  Compression compress = Compression::kNone;  // bf16 halves the bytes of fp32 gradient buckets on the wire
  WaitPolicy wait = WaitPolicy::kPassive;
};

// Training steps first..last of a run, counted from 1 across epochs; first == 0 means none.
struct StepRange {
  int64_t first = 0;
  int64_t last = 0;
  bool empty() const { return first == 0; }
};

struct LogOptions {
  std::string dir = "dtrain-logs";
  // The run's directory under dir, which holds its run log, config and (by default) checkpoints. Empty: a
  // new one named <UTC time>-<workload>, or with checkpoint.resume the newest run of the workload.
  std::string run_name;
  LogFormat format = LogFormat::kKatib;
  int64_t interval = 10;  // steps between the "Train Epoch" lines of the training metrics; 0 = none
  ProgressMode progress = ProgressMode::kAuto;
  double progress_interval_s = 5.0;  // seconds between two lines of progress: lines
  double sample_interval_s = 1.0;  // seconds between resource samples (CPU, memory, GPU, network) per rank; 0 = none
  StepRange profile_steps;  // steps profiled with LibTorch's profiler (trace and operations table); none by default
  int64_t profile_rank = 0;  // the rank that profiles them
  bool tensorboard = true;  // TensorBoard event files in the run directory's tensorboard/ (rank 0)
  // Use a run directory or checkpoint.dir that another user owns, or that others can write without the
  // sticky bit (a group's project directory), trusting those users not to replace what dtrain writes
  // there. Without it such a directory is refused (run_directory.h). Links are never followed either way.
  bool allow_shared_dirs = false;
};

struct CheckpointOptions {
  // Empty: checkpoints/ in the run's directory. Another directory is locked while a run uses it, so two
  // runs never write into one.
  std::string dir;
  bool resume = false;
  int64_t keep = 3;  // newest checkpoints kept; 0 = keep all
  bool enabled = true;
  // Also checkpoint inside an epoch, every this many optimizer steps and/or seconds (0 = not), so a
  // failure loses at most that much work; a resume continues the epoch where it stopped.
  int64_t every_steps = 0;
  double every_s = 0.0;
  // Copy the state to host memory at the step and write it from a thread of its own while training goes
  // on (false: write it on the training thread).
  bool async = true;
  // Rank 0 also keeps the newest checkpoint here, in memory (a tmpfs), for restarts on the same node, in
  // a directory private to the user (memory_copy.h); "auto": $XDG_RUNTIME_DIR where it is the user's
  // private directory, else /dev/shm; empty: not.
  std::string memory_dir = "auto";
  // A new run starts from the weights in this safetensors file (PyTorch's save_file(model.state_dict())
  // or a dtrain checkpoint); a run that resumes from a checkpoint of its own does not read it.
  std::string init_from;
  // SIGTERM, SIGINT, SIGHUP and SIGUSR2 stop the run at the next step boundary with a checkpoint there
  // (stop_signals.h); SIGUSR1 too when on_usr1. After stop_timeout_s the process exits at once.
  bool on_usr1 = false;
  double stop_timeout_s = 25.0;
};

// The options a workload declares itself (biggan.d_steps): one struct of the workload's own per section,
// set through the fields it contributes to the ConfigSchema. The struct names its section, and nothing
// else spells it: `static constexpr const char* kSection = "biggan";`, so get<BigGanTrainOptions>()
// cannot ask for a misspelt section and read its defaults. A section never set reads as its struct's
// defaults, so the generic configuration needs to know no workload.
class WorkloadOptions {
 public:
  template <class Section>
  const Section& get() const {
    const auto it = sections_.find(Section::kSection);
    if (it == sections_.end()) {
      static const Section defaults{};
      return defaults;
    }
    return checked<Section>(it->second);
  }

  template <class Section>
  Section& edit() {
    return const_cast<Section&>(checked<Section>(sections_.try_emplace(Section::kSection, Section{}).first->second));
  }

 private:
  template <class Section>
  static const Section& checked(const std::any& value) {
    const Section* typed = std::any_cast<Section>(&value);
    if (typed == nullptr) {
      throw Error(std::string("two options structs name the section '") + Section::kSection + "' (kSection)");
    }
    return *typed;
  }

  std::map<std::string, std::any> sections_;
};

struct TrainConfig {
  std::string workload;  // a registered name; ConfigSchema::defaults() holds the one a run trains unless told
  TrainOptions train;
  DataOptions data;
  CommOptions comm;
  LogOptions log;
  CheckpointOptions checkpoint;
  WorkloadOptions workload_options;
};

// Where each key's value came from ("--batch-size", "run.yaml"); keys left at their default are absent.
using ConfigSources = std::map<std::string, std::string>;

const char* to_string(OptimizerKind kind);
const char* to_string(LrSchedule schedule);
const char* to_string(LogFormat format);
const char* to_string(ProgressMode mode);
const char* to_string(BackendKind kind);
const char* to_string(BootstrapKind kind);
const char* to_string(ElasticBatch policy);
const char* to_string(DeviceKind kind);
const char* to_string(Precision precision);
const char* to_string(Compression compression);
const char* to_string(WaitPolicy policy);
const char* to_string(BucketSizing sizing);
const char* to_string(NonFinitePolicy policy);

}  // namespace dtrain
