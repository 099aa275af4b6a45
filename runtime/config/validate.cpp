#include "runtime/config/validate.h"

#include "runtime/util/error.h"
#include "runtime/util/file_io.h"

namespace dtrain {
namespace {

std::string described(const std::string& key, const ConfigSources& sources) {
  auto it = sources.find(key);
  return key + (it == sources.end() ? " (default)" : " (from " + it->second + ")");
}

// The combinations train.deterministic cannot make exact, refused rather than run approximately.
void validate_deterministic(const TrainConfig& config, const ConfigSources& sources) {
  const TrainOptions& train = config.train;
  const std::string mode = described("train.deterministic", sources);
  if ((train.shards & (train.shards - 1)) != 0) {
    throw ConfigError(described("train.shards", sources) + " must be a power of two (1, 2, 4, 8, ...) for " + mode +
                      ": the shards' gradients are summed in a binary tree, got " + std::to_string(train.shards));
  }
  if (train.elastic_batch == ElasticBatch::kPerRank) {
    throw ConfigError(mode + " holds the global batch at every world size, but " + described("train.elastic_batch", sources) +
                      " is 'per-rank'");
  }
  if (train.sync_batchnorm) {
    throw ConfigError(mode + " keeps BatchNorm statistics per shard; " + described("train.sync_batchnorm", sources) +
                      " would compute them over each world size's ranks");
  }
  if (train.precision != Precision::kFp32) {
    throw ConfigError(mode + " is verified in fp32 only, but " + described("train.precision", sources) + " is '" +
                      to_string(train.precision) + "'");
  }
  if (train.threads > 1) {
    throw ConfigError(mode + " runs one intra-op thread per rank (a kernel's sums must not depend on the cores), but " +
                      described("train.threads", sources) + " is " + std::to_string(train.threads));
  }
  if (config.comm.compress != Compression::kNone) {
    throw ConfigError(mode + " exchanges gradients in fp32, but " + described("comm.compress", sources) + " is '" +
                      to_string(config.comm.compress) + "'");
  }
  if (config.data.skip_bad_images) {
    throw ConfigError(mode + " needs every sample of a batch: " + described("data.skip_bad_images", sources) +
                      " replaces an unreadable one by another sample of the same rank's batch");
  }
}

}  // namespace

void validate_config(const TrainConfig& config, const ConfigSources& sources) {
  if (config.data.synthetic && !config.data.dir.empty()) {
    throw ConfigError(described("data.synthetic", sources) + " and " + described("data.dir", sources) +
                      " are both set; use one: generated data or the files in '" + config.data.dir + "'");
  }
  if (config.comm.first_bucket_mb > config.comm.bucket_mb) {
    throw ConfigError(described("comm.first_bucket_mb", sources) + " must not exceed " +
                      described("comm.bucket_mb", sources) + ", got " + std::to_string(config.comm.first_bucket_mb) +
                      " > " + std::to_string(config.comm.bucket_mb));
  }
  const TrainOptions& train = config.train;
  if (train.lr_schedule == LrSchedule::kMultiStep && train.lr_milestones.empty()) {
    throw ConfigError(described("train.lr_schedule", sources) +
                      " 'multistep' needs the epochs to decay at in train.lr_milestones, such as --lr-milestones 30,60,80");
  }
  if (train.lr_schedule == LrSchedule::kCosine && train.lr_min > train.lr) {
    throw ConfigError(described("train.lr_min", sources) + " must not exceed " + described("train.lr", sources) +
                      " for the cosine schedule, got " + std::to_string(train.lr_min) + " > " + std::to_string(train.lr));
  }
  if (train.optimizer == OptimizerKind::kSgd && train.nesterov && train.momentum == 0.0) {
    throw ConfigError(described("train.nesterov", sources) + " needs a momentum, but " +
                      described("train.momentum", sources) + " is 0");
  }
  const std::string& run_name = config.log.run_name;
  if (run_name == "." || run_name == ".." || run_name.find('/') != std::string::npos) {
    throw ConfigError(described("log.run_name", sources) + " must name a directory inside log.dir (no '/', not '.' "
                      "or '..'), got '" + run_name + "'");
  }
  if (config.checkpoint.resume && !config.checkpoint.enabled) {
    // Resuming without writing would silently lose every epoch trained after the resume.
    throw ConfigError(described("checkpoint.resume", sources) + " needs checkpoints, but " +
                      described("checkpoint.enabled", sources) + " is false");
  }
  for (const char* key : {"checkpoint.every_steps", "checkpoint.every_s"}) {
    const bool set = std::string(key) == "checkpoint.every_steps" ? config.checkpoint.every_steps > 0 : config.checkpoint.every_s > 0;
    if (set && !config.checkpoint.enabled) {
      throw ConfigError(described(key, sources) + " asks for checkpoints inside epochs, but " +
                        described("checkpoint.enabled", sources) + " is false");
    }
  }
  if (train.deterministic) validate_deterministic(config, sources);
  if (train.global_batch_size > 0 && train.elastic_batch == ElasticBatch::kPerRank) {
    throw ConfigError(described("train.global_batch_size", sources) + " holds the global batch, but " +
                      described("train.elastic_batch", sources) + " is 'per-rank'; use --elastic-batch global");
  }
}

void validate_for_device(const TrainConfig& config, DeviceKind device, const ConfigSources& sources) {
  if (config.train.precision == Precision::kFp16 && device != DeviceKind::kCuda) {
    // CPU kernels for half are slow or missing, and bf16 has fp32's range, so it needs no loss scaling.
    throw ConfigError(described("train.precision", sources) + " 'fp16' needs comm.device 'cuda', but the device is '" +
                      to_string(device) + "'; use --precision bf16 on the CPU");
  }
  if (config.train.deterministic && device == DeviceKind::kCuda) {
    throw ConfigError(described("train.deterministic", sources) + " runs on the CPU: dtrain does not yet select "
                      "bitwise-reproducible CUDA kernels (cuDNN, atomic adds); use --device cpu");
  }
}

void validate_for_backend(const TrainConfig& config, BackendKind backend, const ConfigSources& sources) {
  if (backend == BackendKind::kGloo && config.comm.compress == Compression::kBf16) {
    // This LibTorch's Gloo reduces no bfloat16.
    throw ConfigError(described("comm.compress", sources) + " 'bf16' needs comm.backend 'mpi' or 'nccl'; the gloo " +
                      "backend sends fp32 buckets as they are");
  }
}

void validate_output_dirs(const TrainConfig& config, const ConfigSources& sources) {
  check_output_directory(config.log.dir, described("log.dir", sources));
  if (config.checkpoint.enabled && !config.checkpoint.dir.empty()) {
    check_output_directory(config.checkpoint.dir, described("checkpoint.dir", sources));
  }
}

}  // namespace dtrain
