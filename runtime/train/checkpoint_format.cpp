#include "runtime/train/checkpoint_format.h"

#include <ATen/ATen.h>
#include <torch/serialize/archive.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "runtime/train/checkpoint_archive.h"
#include "runtime/train/zip_integrity.h"
#include "runtime/util/error.h"

namespace dtrain {
namespace fs = std::filesystem;
namespace {

// Formats before 4 (dtrain before 0.1.0): 1 held one model and optimizer with epoch, seed, workload,
// optimizer name and world size; 2 added the epoch's metrics under fixed names; 3 named modules,
// optimizers and metrics. 4 added the position inside an epoch, its partial training metrics, the global
// batch, the time written and the data's labels.

// An empty tensor's data pointer is null, which memcpy and std::string must not be given even for no
// bytes (UBSan stopped every run at its first checkpoint on an empty string).
at::Tensor string_tensor(const std::string& text) {
  at::Tensor t = at::empty({static_cast<int64_t>(text.size())}, at::kByte);
  if (!text.empty()) std::memcpy(t.data_ptr(), text.data(), text.size());
  return t;
}

std::string tensor_string(const at::Tensor& t) {
  const at::Tensor bytes = t.to(at::kCPU).contiguous();
  if (bytes.numel() == 0) return "";
  return std::string(reinterpret_cast<const char*>(bytes.data_ptr()), static_cast<size_t>(bytes.numel()));
}

at::Tensor read_tensor(torch::serialize::InputArchive& archive, const char* key) {
  at::Tensor t;
  archive.read(key, t);
  return t.to(at::kCPU);
}

int64_t read_int(torch::serialize::InputArchive& archive, const char* key) { return read_tensor(archive, key).item<int64_t>(); }
double read_double(torch::serialize::InputArchive& archive, const char* key) { return read_tensor(archive, key).item<double>(); }
std::string read_string(torch::serialize::InputArchive& archive, const char* key) { return tensor_string(read_tensor(archive, key)); }

// A metric set as a nested archive: one [value, sum, weight] tensor per metric, and the names in order.
void write_metric_values(torch::serialize::OutputArchive& archive, const char* key, const MetricValues& values) {
  torch::serialize::OutputArchive nested;
  std::string names;
  for (const MetricValue& m : values.all()) {
    names += (names.empty() ? "" : "\n") + m.name;
    nested.write(m.name, at::tensor(std::vector<double>{m.value, m.sum, m.weight}, at::kDouble));
  }
  nested.write("names", string_tensor(names));
  archive.write(key, nested);
}

MetricValues read_metric_values(torch::serialize::InputArchive& archive, const char* key) {
  torch::serialize::InputArchive nested;
  archive.read(key, nested);
  std::vector<MetricValue> values;
  const std::string names = read_string(nested, "names");
  size_t begin = 0;
  while (begin < names.size()) {
    size_t end = names.find('\n', begin);
    if (end == std::string::npos) end = names.size();
    const std::string name = names.substr(begin, end - begin);
    const at::Tensor v = read_tensor(nested, name.c_str()).to(at::kDouble).contiguous();
    if (v.numel() != 3) throw DataError("metric '" + name + "' holds " + std::to_string(v.numel()) + " values, expected 3");
    values.push_back(MetricValue{name, v[0].item<double>(), v[1].item<double>(), v[2].item<double>()});
    begin = end + 1;
  }
  return MetricValues(std::move(values));
}

void write_metrics(torch::serialize::OutputArchive& archive, const EpochStats& s) {
  archive.write("epoch", at::tensor(s.epoch));
  archive.write("epochs", at::tensor(s.epochs));
  archive.write("lr", at::tensor(s.lr, at::kDouble));
  archive.write("train_samples", at::tensor(s.train_samples));
  archive.write("test_samples", at::tensor(s.test_samples));
  write_metric_values(archive, "train", s.train);
  write_metric_values(archive, "test", s.test);
}

EpochStats read_metrics(torch::serialize::InputArchive& archive) {
  EpochStats s;
  s.epoch = read_int(archive, "epoch");
  s.epochs = read_int(archive, "epochs");
  s.lr = read_double(archive, "lr");
  s.train_samples = read_int(archive, "train_samples");
  s.test_samples = read_int(archive, "test_samples");
  s.train = read_metric_values(archive, "train");
  s.test = read_metric_values(archive, "test");
  return s;
}

std::string shape_text(const at::Tensor& t) {
  std::ostringstream os;
  os << t.sizes() << " " << t.scalar_type();
  return os.str();
}

template <class T>
bool all_finite_values(const at::Tensor& t) {
  const T* data = t.data_ptr<T>();
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(static_cast<double>(data[i]))) return false;
  }
  return true;
}

}  // namespace

// A contiguous host tensor is scanned on the calling thread: the check runs on the checkpoint writer's
// thread too, where an ATen reduction would start a second pool of threads beside training's.
bool holds_only_finite(const at::Tensor& t) {
  if (!t.is_floating_point()) return true;
  if (t.is_cpu() && t.is_non_overlapping_and_dense()) {
    switch (t.scalar_type()) {
      case at::kFloat: return all_finite_values<float>(t);
      case at::kDouble: return all_finite_values<double>(t);
      case at::kHalf: return all_finite_values<at::Half>(t);
      case at::kBFloat16: return all_finite_values<at::BFloat16>(t);
      default: break;
    }
  }
  return at::isfinite(t).all().item<bool>();
}

namespace {

// write_module_state, for the submodule at `prefix` ("layer1.0.").
void write_module(const torch::nn::Module& module, torch::serialize::OutputArchive& archive, const TensorCopy& take,
                  const std::string& prefix, const std::string& suffix,
                  CheckedTensors& checked) {
  for (const auto& p : module.named_parameters(/*recurse=*/false)) {
    at::Tensor t = take(p.value());
    archive.write(p.key(), t);
    checked.emplace_back("parameter " + prefix + p.key() + suffix, std::move(t));
  }
  for (const auto& b : module.named_buffers(/*recurse=*/false)) {
    at::Tensor t = take(b.value());
    archive.write(b.key(), t, /*is_buffer=*/true);
    checked.emplace_back("buffer " + prefix + b.key() + suffix, std::move(t));
  }
  for (const auto& child : module.named_children()) {
    if (!child.value()->is_serializable()) continue;
    torch::serialize::OutputArchive child_archive(archive.compilation_unit());
    write_module(*child.value(), child_archive, take, prefix + child.key() + ".", suffix, checked);
    archive.write(child.key(), child_archive);
  }
}

}  // namespace

void write_module_state(const torch::nn::Module& module, torch::serialize::OutputArchive& archive,
                        const TensorCopy& take, const std::string& suffix, CheckedTensors& checked) {
  write_module(module, archive, take, "", suffix, checked);
}

void write_checkpoint_meta(torch::serialize::OutputArchive& archive, const CheckpointMeta& meta) {
  archive.write("format_version", at::tensor(kCheckpointFormatVersion));
  archive.write("epoch", at::tensor(meta.epoch));
  archive.write("seed", at::tensor(meta.seed));
  archive.write("world_size", at::tensor(meta.world_size));
  archive.write("workload", string_tensor(meta.workload));
  archive.write("optimizer_name", string_tensor(meta.optimizer));
  archive.write("epoch_samples", at::tensor(meta.epoch_samples));
  archive.write("epoch_steps", at::tensor(meta.epoch_steps));
  archive.write("global_batch", at::tensor(meta.global_batch));
  archive.write("saved_unix_s", at::tensor(meta.saved_unix_s, at::kDouble));
  write_metric_values(archive, "partial_train", meta.partial_train);
  archive.write("partial_samples", at::tensor(meta.partial_samples));
  if (!meta.labels.empty()) archive.write("data_labels", string_tensor(meta.labels));
  if (meta.metrics) {
    torch::serialize::OutputArchive metrics_archive;
    write_metrics(metrics_archive, *meta.metrics);
    archive.write("metrics", metrics_archive);
  }
}

namespace {

// Compares the parameters and buffers of `module` with those saved in `archive` by Module::save, before
// anything is loaded (Module::load would silently take the file's shapes). Returns the first difference,
// or "", with names as the model spells them.
std::string first_mismatch(const torch::nn::Module& module, torch::serialize::InputArchive& archive,
                           const std::string& prefix) {
  std::vector<std::string> expected;
  auto compare = [&](const std::string& name, const at::Tensor& mine, bool is_buffer) -> std::string {
    expected.push_back(name);
    const std::string kind = is_buffer ? "buffer " : "parameter ";
    at::Tensor theirs;
    bool found = false;
    try {
      found = archive.try_read(name, theirs, is_buffer);
    } catch (const c10::Error&) {
      return "the file holds " + prefix + name + " as a " + (is_buffer ? "parameter" : "buffer") + ", the model as a " +
             (is_buffer ? "buffer" : "parameter");
    }
    if (!found) return "the model's " + kind + prefix + name + " is not in the file";
    if (theirs.sizes() != mine.sizes() || theirs.scalar_type() != mine.scalar_type()) {
      return kind + prefix + name + " is " + shape_text(theirs) + " in the file but " + shape_text(mine) + " in the model";
    }
    if (!holds_only_finite(theirs)) return kind + prefix + name + " holds NaN or infinite values in the file";
    return "";
  };
  for (const auto& p : module.named_parameters(/*recurse=*/false)) {
    const std::string problem = compare(p.key(), p.value(), false);
    if (!problem.empty()) return problem;
  }
  for (const auto& b : module.named_buffers(/*recurse=*/false)) {
    const std::string problem = compare(b.key(), b.value(), true);
    if (!problem.empty()) return problem;
  }
  for (const auto& child : module.named_children()) {
    expected.push_back(child.key());
    torch::serialize::InputArchive child_archive;
    if (!archive.try_read(child.key(), child_archive)) {
      return "the model's submodule " + prefix + child.key() + " is not in the file";
    }
    const std::string problem = first_mismatch(*child.value(), child_archive, prefix + child.key() + ".");
    if (!problem.empty()) return problem;
  }
  for (const std::string& key : archive.keys()) {
    if (std::find(expected.begin(), expected.end(), key) == expected.end()) {
      return "the file holds " + prefix + key + ", which the model does not have";
    }
  }
  return "";
}

// The first line of a message, for errors whose text runs on (TorchScript's quote the source).
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// Reads the records of a checkpoint other than its modules: the format, the position, the metrics.
void read_meta(torch::serialize::InputArchive& archive, CheckpointMeta& meta) {
  const int64_t version = read_int(archive, "format_version");
  if (version != kCheckpointFormatVersion) {
    throw DataError("format version " + std::to_string(version) + ", expected " + std::to_string(kCheckpointFormatVersion) +
                    (version < kCheckpointFormatVersion ? " (an older format, written before dtrain 0.1.0, is not read)"
                                                        : " (written by a newer dtrain?)"));
  }
  meta.epoch = read_int(archive, "epoch");
  meta.seed = read_int(archive, "seed");
  meta.world_size = read_int(archive, "world_size");
  meta.workload = read_string(archive, "workload");
  meta.optimizer = read_string(archive, "optimizer_name");
  torch::serialize::InputArchive metrics_archive;
  if (archive.try_read("metrics", metrics_archive)) meta.metrics = read_metrics(metrics_archive);
  meta.epoch_samples = read_int(archive, "epoch_samples");
  meta.epoch_steps = read_int(archive, "epoch_steps");
  meta.global_batch = read_int(archive, "global_batch");
  meta.saved_unix_s = read_double(archive, "saved_unix_s");
  meta.partial_train = read_metric_values(archive, "partial_train");
  meta.partial_samples = read_int(archive, "partial_samples");
  at::Tensor recorded_labels;
  if (archive.try_read("data_labels", recorded_labels)) meta.labels = tensor_string(recorded_labels);
}

// Far beyond any run, and far enough below INT64_MAX that the position arithmetic of a resume
// (epoch + 1, epochs x samples per epoch) cannot overflow.
void check_meta_ranges(const CheckpointMeta& meta) {
  const auto check_range = [](const char* field, int64_t value, int64_t low, int64_t high) {
    if (value < low || value > high) {
      throw DataError(std::string("it records ") + field + " " + std::to_string(value) + ", expected " + std::to_string(low) +
                      " to " + std::to_string(high) + " (a damaged or foreign file)");
    }
  };
  check_range("epoch", meta.epoch, 0, kMaxCheckpointCount);
  check_range("epoch_samples", meta.epoch_samples, 0, kMaxCheckpointCount);
  check_range("epoch_steps", meta.epoch_steps, 0, kMaxCheckpointCount);
  check_range("global_batch", meta.global_batch, 0, kMaxCheckpointCount);
  check_range("partial_samples", meta.partial_samples, 0, kMaxCheckpointCount);
  check_range("world_size", meta.world_size, 1, kMaxCheckpointCount);
}

}  // namespace

CheckpointPosition checkpoint_position_of(const CheckpointMeta& meta) {
  return meta.epoch_samples > 0 ? CheckpointPosition{meta.epoch + 1, meta.epoch_steps}
                                : CheckpointPosition{meta.epoch, kEpochEndSteps};
}

DecodedCheckpoint decode_checkpoint(const std::string& path, const std::string& bytes, c10::Device device) {
  DecodedCheckpoint decoded;
  decoded.meta.path = path;
  std::string problem = zip_damage(bytes);
  if (problem.empty()) problem = checkpoint_archive_problem(bytes);
  if (!problem.empty()) throw DataError(problem);
  try {
    decoded.archive.load_from(bytes.data(), bytes.size(), device);
    read_meta(decoded.archive, decoded.meta);
  } catch (const DataError&) {
    throw;
  } catch (const c10::Error& e) {
    throw DataError("LibTorch cannot read it: " + first_line(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    // LibTorch's TorchScript reader reports a damaged archive with std::runtime_error (its ErrorReport,
    // several lines quoting the source it could not parse).
    throw DataError("LibTorch cannot read it: " + first_line(e.what()));
  }
  check_meta_ranges(decoded.meta);
  const std::optional<CheckpointPosition> named = checkpoint_position(fs::path(path).filename().string(), path);
  const CheckpointPosition recorded = checkpoint_position_of(decoded.meta);
  if (named && *named != recorded) {
    throw DataError("its name says " + position_text(*named) + " but it records " + position_text(recorded) +
                    " (renamed, or another run's)");
  }
  return decoded;
}

void load_checkpoint_modules(DecodedCheckpoint& decoded, std::vector<TrainedModule>& modules, const std::string& workload) {
  const CheckpointMeta& meta = decoded.meta;
  torch::serialize::InputArchive& archive = decoded.archive;
  const std::string where = "checkpoint '" + meta.path + "'";
  try {
    torch::serialize::InputArchive modules_archive;
    torch::serialize::InputArchive optimizers_archive;
    if (!archive.try_read("modules", modules_archive) || !archive.try_read("optimizers", optimizers_archive)) {
      throw DataError(where + " holds no modules");
    }
    std::vector<std::string> names;
    for (const TrainedModule& m : modules) names.push_back(m.name);
    for (const std::string& key : modules_archive.keys()) {
      if (std::find(names.begin(), names.end(), key) == names.end()) {
        throw DataError(where + " (workload " + meta.workload + ") holds a module '" + key + "', which this " + workload +
                        " run does not train");
      }
    }
    std::vector<torch::serialize::InputArchive> module_archives(modules.size());
    for (size_t i = 0; i < modules.size(); ++i) {
      const TrainedModule& m = modules[i];
      if (!modules_archive.try_read(m.name, module_archives[i])) throw DataError(where + " holds no module '" + m.name + "'");
      const std::string mismatch = first_mismatch(*m.module, module_archives[i], modules.size() > 1 ? m.name + "." : "");
      if (!mismatch.empty()) {
        throw DataError(where + " (workload " + meta.workload + ", world size " + std::to_string(meta.world_size) +
                        ") does not match this " + workload + " model: " + mismatch);
      }
    }
    for (size_t i = 0; i < modules.size(); ++i) {
      TrainedModule& m = modules[i];
      m.module->load(module_archives[i]);
      if (!m.optimizer) continue;
      torch::serialize::InputArchive optimizer_archive;
      optimizers_archive.read(m.name, optimizer_archive);
      m.optimizer->load(optimizer_archive);
    }
  } catch (const DataError&) {
    throw;
  } catch (const c10::Error& e) {
    throw DataError(where + " does not match the " + workload + " model: " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw DataError(where + " does not match the " + workload + " model: " + first_line(e.what()));
  }
}

}  // namespace dtrain
