#include "runtime/config/config_fields.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <utility>

#include "runtime/util/cpu_budget.h"
#include "runtime/util/error.h"
#include "runtime/util/strings.h"

namespace dtrain {

const char* to_string(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kAdadelta: return "adadelta";
    case OptimizerKind::kSgd: return "sgd";
    case OptimizerKind::kAdam: return "adam";
    case OptimizerKind::kAdamW: return "adamw";
  }
  return "?";
}
const char* to_string(LrSchedule schedule) {
  switch (schedule) {
    case LrSchedule::kConstant: return "constant";
    case LrSchedule::kStep: return "step";
    case LrSchedule::kMultiStep: return "multistep";
    case LrSchedule::kCosine: return "cosine";
  }
  return "?";
}
const char* to_string(LogFormat format) {
  switch (format) {
    case LogFormat::kKatib: return "katib";
    case LogFormat::kPytorch: return "pytorch";
  }
  return "?";
}
const char* to_string(ProgressMode mode) {
  switch (mode) {
    case ProgressMode::kAuto: return "auto";
    case ProgressMode::kBar: return "bar";
    case ProgressMode::kLines: return "lines";
    case ProgressMode::kOff: return "off";
  }
  return "?";
}
const char* to_string(BackendKind kind) {
  switch (kind) {
    case BackendKind::kAuto: return "auto";
    case BackendKind::kMpi: return "mpi";
    case BackendKind::kNccl: return "nccl";
    case BackendKind::kGloo: return "gloo";
  }
  return "?";
}
const char* to_string(BootstrapKind kind) {
  switch (kind) {
    case BootstrapKind::kAuto: return "auto";
    case BootstrapKind::kMpi: return "mpi";
    case BootstrapKind::kEnv: return "env";
  }
  return "?";
}
const char* to_string(ElasticBatch policy) {
  switch (policy) {
    case ElasticBatch::kAuto: return "auto";
    case ElasticBatch::kGlobal: return "global";
    case ElasticBatch::kPerRank: return "per-rank";
  }
  return "?";
}
const char* to_string(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kAuto: return "auto";
    case DeviceKind::kCpu: return "cpu";
    case DeviceKind::kCuda: return "cuda";
  }
  return "?";
}

const char* to_string(Precision precision) {
  switch (precision) {
    case Precision::kFp32: return "fp32";
    case Precision::kBf16: return "bf16";
    case Precision::kFp16: return "fp16";
  }
  return "?";
}
const char* to_string(NonFinitePolicy policy) {
  switch (policy) {
    case NonFinitePolicy::kStop: return "stop";
    case NonFinitePolicy::kSkipStep: return "skip-step";
  }
  return "?";
}
const char* to_string(Compression compression) {
  switch (compression) {
    case Compression::kNone: return "none";
    case Compression::kBf16: return "bf16";
  }
  return "?";
}
const char* to_string(BucketSizing sizing) {
  switch (sizing) {
    case BucketSizing::kFixed: return "fixed";
    case BucketSizing::kNetwork: return "network";
  }
  return "?";
}
const char* to_string(WaitPolicy policy) {
  switch (policy) {
    case WaitPolicy::kPassive: return "passive";
    case WaitPolicy::kActive: return "active";
  }
  return "?";
}

namespace {

// "run.yaml: train.batch_size" or "--batch-size (train.batch_size)".
std::string subject(const std::string& key, const std::string& origin) {
  if (origin.rfind("--", 0) == 0) return origin + " (" + key + ")";
  return origin + ": " + key;
}

[[noreturn]] void bad_value(const std::string& key, const std::string& origin, const std::string& expected,
                            const std::string& text) {
  throw ConfigError(subject(key, origin) + " must be " + expected + ", got '" + text + "'");
}

std::string format_double(double value) {
  std::ostringstream os;
  os.precision(std::numeric_limits<double>::max_digits10 - 2);
  os << value;
  return os.str();
}

constexpr int64_t kMaxCount = kMaxConfigCount;

ConfigField make_field(std::string key, std::string flag, std::string help, std::string value_hint,
                       bool is_bool = false) {
  ConfigField field;
  field.key = std::move(key);
  field.flag = std::move(flag);
  field.help = std::move(help);
  field.value_hint = std::move(value_hint);
  field.is_bool = is_bool;
  return field;
}

}  // namespace

ConfigField int_field(std::string key, std::string flag, std::string help, FieldRef<int64_t> ref, int64_t min_value,
                      int64_t max_value) {
  ConfigField field = make_field(key, std::move(flag), std::move(help), "INT");
  std::string expected = "an integer >= " + std::to_string(min_value);
  if (max_value != std::numeric_limits<int64_t>::max()) {
    expected = "an integer in [" + std::to_string(min_value) + ", " + std::to_string(max_value) + "]";
  }
  field.parse = [key, ref, min_value, max_value, expected](TrainConfig& c, const std::string& text,
                                                           const std::string& origin) {
    int64_t value = 0;
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (text.empty() || ec != std::errc() || ptr != end) bad_value(key, origin, expected, text);
    if (value < min_value || value > max_value) bad_value(key, origin, expected, text);
    ref.edit(c) = value;
  };
  field.format = [ref](const TrainConfig& c) { return std::to_string(ref.read(c)); };
  field.copy = [ref](TrainConfig& to, const TrainConfig& from) { ref.edit(to) = ref.read(from); };
  return field;
}

ConfigField float_field(std::string key, std::string flag, std::string help, FieldRef<double> ref, double min_value,
                        bool min_inclusive, double max_value) {
  ConfigField field = make_field(key, std::move(flag), std::move(help), "FLOAT");
  std::string expected = std::string("a number ") + (min_inclusive ? ">= " : "> ") + format_double(min_value);
  if (std::isfinite(max_value)) expected += " and <= " + format_double(max_value);
  field.parse = [key, ref, min_value, min_inclusive, max_value, expected](TrainConfig& c, const std::string& text,
                                                                          const std::string& origin) {
    errno = 0;
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (text.empty() || errno != 0 || end != text.c_str() + text.size() || !std::isfinite(value)) {
      bad_value(key, origin, expected, text);
    }
    const bool above_min = min_inclusive ? value >= min_value : value > min_value;
    if (!above_min || value > max_value) bad_value(key, origin, expected, text);
    ref.edit(c) = value;
  };
  field.format = [ref](const TrainConfig& c) { return format_double(ref.read(c)); };
  field.copy = [ref](TrainConfig& to, const TrainConfig& from) { ref.edit(to) = ref.read(from); };
  return field;
}

ConfigField bool_field(std::string key, std::string flag, std::string help, FieldRef<bool> ref) {
  ConfigField field = make_field(key, std::move(flag), std::move(help), "BOOL", true);
  field.parse = [key, ref](TrainConfig& c, const std::string& text, const std::string& origin) {
    if (text == "true") {
      ref.edit(c) = true;
    } else if (text == "false") {
      ref.edit(c) = false;
    } else {
      bad_value(key, origin, "true or false", text);
    }
  };
  field.format = [ref](const TrainConfig& c) { return std::string(ref.read(c) ? "true" : "false"); };
  field.copy = [ref](TrainConfig& to, const TrainConfig& from) { ref.edit(to) = ref.read(from); };
  return field;
}

ConfigField string_field(std::string key, std::string flag, std::string help, FieldRef<std::string> ref,
                         bool allow_empty, std::string value_hint) {
  ConfigField field = make_field(key, std::move(flag), std::move(help), std::move(value_hint));
  field.parse = [key, ref, allow_empty](TrainConfig& c, const std::string& text, const std::string& origin) {
    if (!allow_empty && text.empty()) bad_value(key, origin, "a non-empty string", text);
    ref.edit(c) = text;
  };
  field.format = [ref](const TrainConfig& c) { return ref.read(c); };
  field.copy = [ref](TrainConfig& to, const TrainConfig& from) { ref.edit(to) = ref.read(from); };
  return field;
}

namespace {

// A comma-separated list of increasing positive integers ("30,60,80"; a YAML list works too); empty is
// allowed.
ConfigField int_list_field(std::string key, std::string flag, std::string help, FieldRef<std::vector<int64_t>> ref) {
  ConfigField field = make_field(key, std::move(flag), std::move(help), "INT,INT,...");
  field.is_list = true;
  field.parse = [key, ref](TrainConfig& c, const std::string& text, const std::string& origin) {
    const std::string expected = "a comma-separated list of increasing integers >= 1, such as 30,60,80";
    std::vector<int64_t> values;
    int64_t previous = 0;
    size_t begin = 0;
    while (begin < text.size()) {
      size_t end = text.find(',', begin);
      if (end == std::string::npos) end = text.size();
      std::string item = text.substr(begin, end - begin);
      item.erase(0, item.find_first_not_of(' '));
      item.erase(item.find_last_not_of(' ') + 1);
      int64_t value = 0;
      const char* last = item.data() + item.size();
      auto [ptr, ec] = std::from_chars(item.data(), last, value);
      if (item.empty() || ec != std::errc() || ptr != last || value <= previous || value > kMaxCount) {
        bad_value(key, origin, expected, text);
      }
      values.push_back(value);
      previous = value;
      begin = end + 1;
      if (end + 1 == text.size()) bad_value(key, origin, expected, text);  // a trailing comma
    }
    ref.edit(c) = std::move(values);
  };
  field.format = [ref](const TrainConfig& c) {
    return join(ref.read(c), ",", [](int64_t value) { return std::to_string(value); });
  };
  field.copy = [ref](TrainConfig& to, const TrainConfig& from) { ref.edit(to) = ref.read(from); };
  return field;
}

// "A:B" with 1 <= A <= B (steps A to B), or "" for none.
ConfigField step_range_field(std::string key, std::string flag, std::string help, FieldRef<StepRange> ref) {
  ConfigField field = make_field(key, std::move(flag), std::move(help), "A:B");
  field.parse = [key, ref](TrainConfig& c, const std::string& text, const std::string& origin) {
    const std::string expected = "FIRST:LAST with 1 <= FIRST <= LAST (training steps, counted from 1 across epochs), "
                                 "such as 20:25, or an empty string for none";
    if (text.empty()) {
      ref.edit(c) = StepRange{};
      return;
    }
    const size_t colon = text.find(':');
    if (colon == std::string::npos) bad_value(key, origin, expected, text);
    StepRange range;
    const char* begin = text.data();
    auto first = std::from_chars(begin, begin + colon, range.first);
    auto last = std::from_chars(begin + colon + 1, begin + text.size(), range.last);
    if (colon == 0 || first.ec != std::errc() || first.ptr != begin + colon || last.ec != std::errc() ||
        last.ptr != begin + text.size() || colon + 1 == text.size() || range.first < 1 || range.last < range.first ||
        range.last > kMaxCount) {
      bad_value(key, origin, expected, text);
    }
    ref.edit(c) = range;
  };
  field.format = [ref](const TrainConfig& c) {
    const StepRange& range = ref.read(c);
    return range.empty() ? std::string() : std::to_string(range.first) + ":" + std::to_string(range.last);
  };
  field.copy = [ref](TrainConfig& to, const TrainConfig& from) { ref.edit(to) = ref.read(from); };
  return field;
}

template <class E>
ConfigField enum_field(std::string key, std::string flag, std::string help, FieldRef<E> ref, std::vector<E> values) {
  const std::string choices = join(values, "|", [](E value) { return std::string(to_string(value)); });
  ConfigField field = make_field(key, std::move(flag), std::move(help), choices);
  field.parse = [key, ref, values, choices](TrainConfig& c, const std::string& text, const std::string& origin) {
    for (E value : values) {
      if (text == to_string(value)) {
        ref.edit(c) = value;
        return;
      }
    }
    bad_value(key, origin, "one of " + choices, text);
  };
  field.format = [ref](const TrainConfig& c) { return std::string(to_string(ref.read(c))); };
  field.copy = [ref](TrainConfig& to, const TrainConfig& from) { ref.edit(to) = ref.read(from); };
  return field;
}

std::vector<ConfigField> build_fields() {
  std::vector<ConfigField> f;
  f.push_back(string_field("workload", "workload", "workload to train (see --list-workloads)",
                           [](TrainConfig& c) -> std::string& { return c.workload; }, false));
  f.back().value_hint = "NAME";

  f.push_back(int_field("train.epochs", "epochs", "number of epochs",
                        [](TrainConfig& c) -> int64_t& { return c.train.epochs; }, 1, kMaxCount));
  f.push_back(int_field("train.batch_size", "batch-size",
                        "samples per step on EACH rank (global batch = batch-size x ranks)",
                        [](TrainConfig& c) -> int64_t& { return c.train.batch_size; }, 1, kMaxCount));
  f.push_back(int_field("train.eval_batch_size", "eval-batch-size", "samples per evaluation step on each rank",
                        [](TrainConfig& c) -> int64_t& { return c.train.eval_batch_size; }, 1, kMaxCount));
  f.push_back(enum_field<OptimizerKind>("train.optimizer", "optimizer", "optimizer",
                                        [](TrainConfig& c) -> OptimizerKind& { return c.train.optimizer; },
                                        {OptimizerKind::kAdadelta, OptimizerKind::kSgd, OptimizerKind::kAdam,
                                         OptimizerKind::kAdamW}));
  f.push_back(float_field("train.lr", "lr", "peak learning rate (after warm-up, before decay)",
                          [](TrainConfig& c) -> double& { return c.train.lr; }, 0.0, false));
  f.push_back(float_field("train.momentum", "momentum", "SGD momentum",
                          [](TrainConfig& c) -> double& { return c.train.momentum; }, 0.0, true, 1.0));
  f.push_back(bool_field("train.nesterov", "nesterov", "SGD with Nesterov momentum",
                         [](TrainConfig& c) -> bool& { return c.train.nesterov; }));
  f.push_back(float_field("train.weight_decay", "weight-decay", "weight decay (L2 for sgd/adam, decoupled for adamw)",
                          [](TrainConfig& c) -> double& { return c.train.weight_decay; }, 0.0, true, 1.0));
  f.push_back(bool_field("train.no_decay_norm_bias", "no-decay-norm-bias",
                         "exempt biases and normalisation weights (all 1-d parameters) from weight decay",
                         [](TrainConfig& c) -> bool& { return c.train.no_decay_norm_bias; }));
  f.push_back(float_field("train.adam_beta1", "adam-beta1", "Adam/AdamW beta1",
                          [](TrainConfig& c) -> double& { return c.train.adam_beta1; }, 0.0, true, 0.9999));
  f.push_back(float_field("train.adam_beta2", "adam-beta2", "Adam/AdamW beta2",
                          [](TrainConfig& c) -> double& { return c.train.adam_beta2; }, 0.0, true, 0.99999));
  f.push_back(float_field("train.adam_eps", "adam-eps", "Adam/AdamW epsilon",
                          [](TrainConfig& c) -> double& { return c.train.adam_eps; }, 0.0, false, 1.0));
  f.push_back(enum_field<LrSchedule>("train.lr_schedule", "lr-schedule",
                                     "learning-rate schedule after warm-up: constant, step (every lr-step-epochs), "
                                     "multistep (at lr-milestones) or cosine (to lr-min, per step)",
                                     [](TrainConfig& c) -> LrSchedule& { return c.train.lr_schedule; },
                                     {LrSchedule::kConstant, LrSchedule::kStep, LrSchedule::kMultiStep,
                                      LrSchedule::kCosine}));
  f.push_back(float_field("train.lr_gamma", "lr-gamma", "learning-rate decay factor of step and multistep",
                          [](TrainConfig& c) -> double& { return c.train.lr_gamma; }, 0.0, false, 1.0));
  f.push_back(int_field("train.lr_step_epochs", "lr-step-epochs", "step schedule: epochs between learning-rate decays",
                        [](TrainConfig& c) -> int64_t& { return c.train.lr_step_epochs; }, 1, kMaxCount));
  f.push_back(int_list_field("train.lr_milestones", "lr-milestones",
                             "multistep schedule: epochs after which the learning rate is multiplied by lr-gamma",
                             [](TrainConfig& c) -> std::vector<int64_t>& { return c.train.lr_milestones; }));
  f.push_back(float_field("train.lr_min", "lr-min", "cosine schedule: learning rate at the end of the last epoch",
                          [](TrainConfig& c) -> double& { return c.train.lr_min; }, 0.0, true));
  f.push_back(float_field("train.warmup_epochs", "warmup-epochs",
                          "linear learning-rate warm-up from 0 over this many epochs (counted in steps)",
                          [](TrainConfig& c) -> double& { return c.train.warmup_epochs; }, 0.0, true, 1e6));
  f.push_back(float_field("train.label_smoothing", "label-smoothing",
                          "classifiers: label smoothing of the training cross-entropy",
                          [](TrainConfig& c) -> double& { return c.train.label_smoothing; }, 0.0, true, 0.99));
  f.push_back(float_field("train.clip_grad_norm", "clip-grad-norm",
                          "clip the averaged gradients of each module to this global L2 norm (0 = off)",
                          [](TrainConfig& c) -> double& { return c.train.clip_grad_norm; }, 0.0, true));
  f.push_back(int_field("train.seed", "seed", "seed for initialisation, shuffling, dropout and synthetic data",
                        [](TrainConfig& c) -> int64_t& { return c.train.seed; }, 0));
  f.push_back(int_field("train.max_steps", "max-steps", "stop each epoch after this many steps per rank (0 = no limit)",
                        [](TrainConfig& c) -> int64_t& { return c.train.max_steps; }, 0, kMaxCount));
  f.push_back(int_field("train.eval_samples", "eval-samples",
                        "evaluate on the first this many test samples, shared by the ranks (0 = the whole test set)",
                        [](TrainConfig& c) -> int64_t& { return c.train.eval_samples; }, 0, kMaxCount));
  f.push_back(int_field("train.accumulate", "accumulate",
                        "backward passes per optimizer step (gradient accumulation; only the last communicates)",
                        [](TrainConfig& c) -> int64_t& { return c.train.accumulate; }, 1, 1024));
  f.push_back(enum_field<ElasticBatch>("train.elastic_batch", "elastic-batch",
                                       "when the world size changes between restarts, hold the global batch (per-rank "
                                       "batch = global / ranks, accumulating when it does not fit) or the per-rank one; "
                                       "auto: global under torchrun's elastic agent",
                                       [](TrainConfig& c) -> ElasticBatch& { return c.train.elastic_batch; },
                                       {ElasticBatch::kAuto, ElasticBatch::kGlobal, ElasticBatch::kPerRank}));
  f.push_back(int_field("train.global_batch_size", "global-batch-size",
                        "with elastic-batch global: samples per optimizer step over all ranks (0 = batch-size x "
                        "accumulate x ranks at the first start; a resumed run keeps its checkpoint's)",
                        [](TrainConfig& c) -> int64_t& { return c.train.global_batch_size; }, 0, kMaxCount));
  f.push_back(int_field("train.threads", "threads", "intra-op threads per rank (0 = OMP_NUM_THREADS, else SLURM_CPUS_PER_TASK, else the cores this "
                        "rank may use (affinity, cgroup quota) / ranks sharing them)",
                        [](TrainConfig& c) -> int64_t& { return c.train.threads; }, 0, kMaxThreadsPerRank));
  f.push_back(enum_field<Precision>("train.precision", "precision",
                                    "compute precision: autocast to bf16/fp16 (fp16 with dynamic loss scaling; CUDA only)",
                                    [](TrainConfig& c) -> Precision& { return c.train.precision; },
                                    {Precision::kFp32, Precision::kBf16, Precision::kFp16}));
  f.push_back(bool_field("train.channels_last", "channels-last",
                         "image models: NHWC memory order for 4-d weights and inputs (faster convolutions on GPUs)",
                         [](TrainConfig& c) -> bool& { return c.train.channels_last; }));
  f.push_back(bool_field("train.sync_batchnorm", "sync-batchnorm",
                         "BatchNorm statistics over all ranks' samples in training (SyncBatchNorm), for small "
                         "per-rank batches",
                         [](TrainConfig& c) -> bool& { return c.train.sync_batchnorm; }));
  f.push_back(bool_field("train.deterministic", "deterministic",
                         "parameters bitwise equal at any world size (1 to train.shards ranks), backend and restart: "
                         "the global batch in train.shards fixed micro-batches summed in one fixed order; one thread "
                         "per rank (docs/usage.md)",
                         [](TrainConfig& c) -> bool& { return c.train.deterministic; }));
  f.push_back(int_field("train.shards", "shards",
                        "with deterministic: micro-batches per global batch, a power of two that the world size "
                        "divides; it must divide the global batch",
                        [](TrainConfig& c) -> int64_t& { return c.train.shards; }, 1, 4096));
  f.push_back(float_field("train.peak_tflops", "peak-tflops",
                          "one device's peak TFLOP/s at the run's precision: epoch records then carry the model "
                          "FLOPs utilisation (mfu); 0 = unknown",
                          [](TrainConfig& c) -> double& { return c.train.peak_tflops; }, 0.0, true, 1e6));
  f.push_back(enum_field<NonFinitePolicy>(
      "train.on_nonfinite", "on-nonfinite",
      "on a NaN/inf loss or gradient: stop the run (exit 4), or skip that optimizer step on every rank",
      [](TrainConfig& c) -> NonFinitePolicy& { return c.train.on_nonfinite; },
      {NonFinitePolicy::kStop, NonFinitePolicy::kSkipStep}));

  f.push_back(string_field("data.dir", "data-dir", "directory with the dataset files (empty = workload default)",
                           [](TrainConfig& c) -> std::string& { return c.data.dir; }, true));
  f.push_back(bool_field("data.synthetic", "synthetic", "train on deterministic generated data of the same shape",
                         [](TrainConfig& c) -> bool& { return c.data.synthetic; }));
  f.push_back(int_field("data.image_size", "image-size",
                        "image models: side of the square images the model sees (0 = the workload's own size)",
                        [](TrainConfig& c) -> int64_t& { return c.data.image_size; }, 0, 4096));
  f.push_back(int_field("data.workers", "data-workers",
                        "threads per rank that decode and augment image files ahead of the step",
                        [](TrainConfig& c) -> int64_t& { return c.data.workers; }, 1, 256));
  f.push_back(float_field("data.val_fraction", "val-fraction",
                          "image folders without a val/ folder: seeded share of each class held out for testing",
                          [](TrainConfig& c) -> double& { return c.data.val_fraction; }, 0.0, false, 0.9));
  f.push_back(bool_field("data.skip_bad_images", "skip-bad-images",
                         "image files that the start-up check finds bad (empty, unreadable, not a JPEG or PNG, a "
                         "size no decoder takes) are left out, and ones that fail to decode later are stood in for "
                         "(training: by another image of the batch; evaluation: by none), counted in the run log, "
                         "instead of stopping the run",
                         [](TrainConfig& c) -> bool& { return c.data.skip_bad_images; }));

  f.push_back(enum_field<BootstrapKind>("comm.bootstrap", "bootstrap",
                                        "how the ranks find each other (mpi: mpirun or srun; env: RANK, WORLD_SIZE, "
                                        "MASTER_ADDR, MASTER_PORT from torchrun or a PyTorchJob; auto: whichever "
                                        "started this process, else one process)",
                                        [](TrainConfig& c) -> BootstrapKind& { return c.comm.bootstrap; },
                                        {BootstrapKind::kAuto, BootstrapKind::kMpi, BootstrapKind::kEnv}));
  f.push_back(enum_field<BackendKind>("comm.backend", "backend",
                                      "gradient communication backend (auto: nccl on GPUs, else mpi under an MPI "
                                      "launcher and gloo under torchrun; gloo: CPU tensors over LibTorch's Gloo)",
                                      [](TrainConfig& c) -> BackendKind& { return c.comm.backend; },
                                      {BackendKind::kAuto, BackendKind::kMpi, BackendKind::kNccl, BackendKind::kGloo}));
  f.push_back(enum_field<DeviceKind>("comm.device", "device", "compute device",
                                     [](TrainConfig& c) -> DeviceKind& { return c.comm.device; },
                                     {DeviceKind::kAuto, DeviceKind::kCpu, DeviceKind::kCuda}));
  f.push_back(float_field("comm.bucket_mb", "bucket-mb", "gradient bucket size in MiB",
                          [](TrainConfig& c) -> double& { return c.comm.bucket_mb; }, 0.0, false, 4096.0));
  f.push_back(float_field("comm.first_bucket_mb", "first-bucket-mb", "size of the first (earliest) bucket in MiB",
                          [](TrainConfig& c) -> double& { return c.comm.first_bucket_mb; }, 0.0, false, 4096.0));
  f.push_back(enum_field<BucketSizing>("comm.bucket_sizing", "bucket-sizing",
                                       "fixed (bucket-mb, first-bucket-mb) or network: a probe at start-up fits the "
                                       "allreduce's latency and bandwidth, and buckets are made as small as the "
                                       "latency allows, at most those sizes (run_start's bucket_probe)",
                                       [](TrainConfig& c) -> BucketSizing& { return c.comm.bucket_sizing; },
                                       {BucketSizing::kFixed, BucketSizing::kNetwork}));
  f.push_back(float_field("comm.timeout_s", "comm-timeout-s",
                          "seconds a collective may take before the run fails instead of hanging (stuck ranks are "
                          "named; a warning comes after a fifth of it)",
                          // Below a second a busy node's ordinary collective would count as a failure, and a
                          // restart policy would retry a configuration that can never succeed.
                          [](TrainConfig& c) -> double& { return c.comm.timeout_s; }, 1.0, true, 1e6));
  f.push_back(enum_field<Compression>("comm.compress", "compress", "send fp32 gradient buckets as bf16 (half the bytes)",
                                      [](TrainConfig& c) -> Compression& { return c.comm.compress; },
                                      {Compression::kNone, Compression::kBf16}));
  f.push_back(enum_field<WaitPolicy>("comm.wait", "comm-wait",
                                     "how MPI collectives are waited for: passive (tested with short pauses, by a "
                                     "progress thread for the gradients; waits block, the CPU stays with the "
                                     "computation) or active (polled without pause: lowest latency, costs a core "
                                     "while communicating); Gloo and NCCL waits always block",
                                     [](TrainConfig& c) -> WaitPolicy& { return c.comm.wait; },
                                     {WaitPolicy::kPassive, WaitPolicy::kActive}));

  f.push_back(string_field("log.dir", "log-dir", "directory that holds the run directories",
                           [](TrainConfig& c) -> std::string& { return c.log.dir; }, false));
  f.back().per_node = true;
  f.push_back(string_field("log.run_name", "run-name",
                           "the run's directory under log.dir (run log, config, checkpoints); a run of that name "
                           "continues only with --resume (empty = a new <UTC time>-<workload>, or with --resume "
                           "the newest run of the workload)",
                           [](TrainConfig& c) -> std::string& { return c.log.run_name; }, true, "NAME"));
  f.push_back(enum_field<LogFormat>("log.format", "log-format", "console format of per-epoch metrics",
                                    [](TrainConfig& c) -> LogFormat& { return c.log.format; },
                                    {LogFormat::kKatib, LogFormat::kPytorch}));
  f.push_back(int_field("log.interval", "log-interval", "steps between the Train Epoch lines of training metrics (0 = none)",
                        [](TrainConfig& c) -> int64_t& { return c.log.interval; }, 0, kMaxCount));
  f.push_back(enum_field<ProgressMode>("log.progress", "progress",
                                       "rank 0's live progress with rate and time left, on stderr: a bar, a line "
                                       "every progress-interval-s, or none; auto: the bar where a terminal shows "
                                       "it (also under mpirun), else lines",
                                       [](TrainConfig& c) -> ProgressMode& { return c.log.progress; },
                                       {ProgressMode::kAuto, ProgressMode::kBar, ProgressMode::kLines,
                                        ProgressMode::kOff}));
  f.push_back(float_field("log.progress_interval_s", "progress-interval-s",
                          "seconds between two lines of --progress lines",
                          [](TrainConfig& c) -> double& { return c.log.progress_interval_s; }, 0.0, false, 86400.0));
  f.push_back(float_field("log.sample_interval_s", "sample-interval-s",
                          "seconds between samples of each rank's CPU, memory, GPU and network use, written to the "
                          "run log as `sample` events (0 = none)",
                          [](TrainConfig& c) -> double& { return c.log.sample_interval_s; }, 0.0, true, 3600.0));
  f.push_back(step_range_field("log.profile_steps", "profile-steps",
                               "profile training steps FIRST:LAST (counted from 1 across epochs) with LibTorch's "
                               "profiler: a Chrome trace and a table of the top operations in the run directory",
                               [](TrainConfig& c) -> StepRange& { return c.log.profile_steps; }));
  f.push_back(int_field("log.profile_rank", "profile-rank", "the rank that runs the profiler of log.profile_steps",
                        [](TrainConfig& c) -> int64_t& { return c.log.profile_rank; }, 0, kMaxCount));
  f.push_back(bool_field("log.tensorboard", "tensorboard",
                         "write TensorBoard event files of the run's curves and resource samples to tensorboard/ "
                         "in the run directory (tensorboard --logdir <run directory>)",
                         [](TrainConfig& c) -> bool& { return c.log.tensorboard; }));
  f.push_back(bool_field("log.allow_shared_dirs", "allow-shared-dirs",
                         "use a run directory or checkpoint.dir that another user owns or that other users can "
                         "write without the sticky bit (a group's project directory), trusting them not to "
                         "replace what dtrain writes there (without it such a directory is refused; links named "
                         "like dtrain's files are never followed either way)",
                         [](TrainConfig& c) -> bool& { return c.log.allow_shared_dirs; }));

  f.push_back(string_field("checkpoint.dir", "checkpoint-dir",
                           "directory for checkpoints, locked while a run uses it (empty = checkpoints/ in the "
                           "run's directory)",
                           [](TrainConfig& c) -> std::string& { return c.checkpoint.dir; }, true));
  f.back().per_node = true;
  f.push_back(bool_field("checkpoint.resume", "resume",
                         "continue the run from its newest checkpoint (the run of log.run_name, else the newest "
                         "run of the workload in log.dir, or checkpoint.dir when set)",
                         [](TrainConfig& c) -> bool& { return c.checkpoint.resume; }));
  f.push_back(int_field("checkpoint.keep", "checkpoint-keep", "newest checkpoints to keep (0 = all)",
                        [](TrainConfig& c) -> int64_t& { return c.checkpoint.keep; }, 0, kMaxCount));
  f.push_back(bool_field("checkpoint.enabled", "checkpoint", "write a checkpoint at the end of each epoch",
                         [](TrainConfig& c) -> bool& { return c.checkpoint.enabled; }));
  f.push_back(int_field("checkpoint.every_steps", "checkpoint-every-steps",
                        "also checkpoint inside an epoch every this many optimizer steps (0 = only at epoch ends)",
                        [](TrainConfig& c) -> int64_t& { return c.checkpoint.every_steps; }, 0, kMaxCount));
  f.push_back(float_field("checkpoint.every_s", "checkpoint-every-s",
                          "also checkpoint inside an epoch once this many seconds have passed since the last one "
                          "(0 = only at epoch ends)",
                          [](TrainConfig& c) -> double& { return c.checkpoint.every_s; }, 0.0, true, 1e9));
  f.push_back(bool_field("checkpoint.async", "checkpoint-async",
                         "copy the state to host memory at the step and write the checkpoint from a thread of its "
                         "own while training goes on (false: write it on the training thread)",
                         [](TrainConfig& c) -> bool& { return c.checkpoint.async; }));
  f.push_back(string_field("checkpoint.memory_dir", "checkpoint-memory-dir",
                           "rank 0 also keeps the newest checkpoint in a private directory of the user under this "
                           "memory-backed directory of its node, and a restart on that node resumes from it without "
                           "reading the disk (auto = $XDG_RUNTIME_DIR where it is the user's, else /dev/shm; empty = "
                           "not)",
                           [](TrainConfig& c) -> std::string& { return c.checkpoint.memory_dir; }, true));
  f.back().per_node = true;
  f.push_back(string_field("checkpoint.init_from", "init-from",
                           "start a new run from the weights in this safetensors file: what PyTorch's "
                           "safetensors.torch.save_file(model.state_dict()) writes, or a dtrain checkpoint (names "
                           "mapped as docs/usage.md says; a run resuming from its own checkpoint ignores it)",
                           [](TrainConfig& c) -> std::string& { return c.checkpoint.init_from; }, true));
  f.push_back(bool_field("checkpoint.on_usr1", "checkpoint-on-usr1",
                         "SIGUSR1 also stops the run with a checkpoint, as SIGTERM does (Slurm's "
                         "--signal=USR1@<seconds> before the time limit); exit status 138",
                         [](TrainConfig& c) -> bool& { return c.checkpoint.on_usr1; }));
  f.push_back(float_field("checkpoint.stop_timeout_s", "stop-timeout-s",
                          "after SIGTERM, SIGINT, SIGHUP or SIGUSR2 the ranks finish their step, save a checkpoint "
                          "and exit 128+signal; past this many seconds they exit at once, keeping the previous "
                          "checkpoint (keep it below the launcher's grace: Kubernetes 30 s, Slurm KillWait, torchrun 30 s)",
                          [](TrainConfig& c) -> double& { return c.checkpoint.stop_timeout_s; }, 1.0, true, 86400.0));
  return f;
}

}  // namespace

ConfigSchema::ConfigSchema(std::vector<ConfigField> workload_fields, std::string default_workload)
    : fields_(build_fields()) {
  defaults_.workload = std::move(default_workload);
  for (ConfigField& field : workload_fields) {
    if (field.workload.empty() || field.key.rfind(field.workload + ".", 0) != 0) {
      throw Error("configuration key '" + field.key + "' must be under its workload's name ('" + field.workload +
                  ".')");
    }
    fields_.push_back(std::move(field));
  }
  for (size_t i = 0; i < fields_.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (fields_[i].key == fields_[j].key || fields_[i].flag == fields_[j].flag) {
        throw Error("configuration keys '" + fields_[j].key + "' and '" + fields_[i].key + "' share " +
                    (fields_[i].key == fields_[j].key ? "their key" : "the flag --" + fields_[i].flag));
      }
    }
  }
}

const ConfigField* ConfigSchema::find(const std::string& key) const {
  for (const ConfigField& field : fields_) {
    if (field.key == key) return &field;
  }
  return nullptr;
}

TrainConfig overlay_keys(TrainConfig base, const TrainConfig& user, const ConfigSources& sources,
                         const ConfigSchema& schema) {
  for (const auto& [key, origin] : sources) {
    const ConfigField* field = schema.find(key);
    if (field == nullptr) throw Error("configuration key '" + key + "' (from " + origin + ") has no field");
    field->copy(base, user);
  }
  return base;
}

}  // namespace dtrain
