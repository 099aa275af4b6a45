#include "runtime/train/checkpoint.h"

#include <ATen/ATen.h>
#include <torch/serialize/archive.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <vector>

#include <unistd.h>

#include "runtime/train/checkpoint_archive.h"
#include "runtime/train/optimizer_copy.h"
#include "runtime/train/zip_integrity.h"
#include "runtime/util/error.h"
#include "runtime/util/file_io.h"

namespace dtrain {
namespace fs = std::filesystem;
namespace {

// 1: model, optimizer, epoch, seed, workload, optimizer name, world size. 2 adds the epoch's metrics.
// 3: named modules and optimizers ("modules"/"optimizers", one entry per module) and named metrics.
// 4: the position inside an epoch, its partial training metrics, the global batch and the time written.
constexpr int64_t kFormatVersion = 4;

// The largest epoch, step, sample count or world size a checkpoint or progress mark may record: 2^40.
constexpr int64_t kMaxCheckpointCount = int64_t{1} << 40;

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

EpochStats read_metrics(torch::serialize::InputArchive& archive, int64_t version) {
  EpochStats s;
  s.epoch = read_int(archive, "epoch");
  s.epochs = read_int(archive, "epochs");
  s.lr = read_double(archive, "lr");
  s.train_samples = read_int(archive, "train_samples");
  s.test_samples = read_int(archive, "test_samples");
  if (version >= 3) {
    s.train = read_metric_values(archive, "train");
    s.test = read_metric_values(archive, "test");
  } else {
    // Format 2 stored a classifier's figures under fixed names.
    const double train_loss = read_double(archive, "train_loss");
    const double train_samples = static_cast<double>(s.train_samples);
    const double test_samples = static_cast<double>(s.test_samples);
    s.train = MetricValues({{"loss", train_loss, train_loss * train_samples, train_samples}});
    const double test_loss = read_double(archive, "test_loss");
    s.test = MetricValues({{"accuracy", read_double(archive, "test_accuracy"),
                            static_cast<double>(read_int(archive, "test_correct")), test_samples},
                           {"loss", test_loss, test_loss * test_samples, test_samples}});
  }
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

// A contiguous host tensor is scanned on the calling thread: the check runs on the checkpoint writer's
// thread too, where an ATen reduction would start a second pool of threads beside training's.
bool all_finite(const at::Tensor& t) {
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

// Writes `module` as Module::save does (parameters, buffers, then each serialisable child as a nested
// archive), each tensor through `take`, and lists what it wrote in `checked` for the finiteness check:
// "parameter conv1.weight" plus `suffix` (" of generator" where a workload trains several modules).
void write_module(const torch::nn::Module& module, torch::serialize::OutputArchive& archive, const TensorCopy& take,
                  const std::string& prefix, const std::string& suffix,
                  std::vector<std::pair<std::string, at::Tensor>>& checked) {
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

void write_meta(torch::serialize::OutputArchive& archive, const CheckpointMeta& meta) {
  archive.write("format_version", at::tensor(kFormatVersion));
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
    if (!all_finite(theirs)) return kind + prefix + name + " holds NaN or infinite values in the file";
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

// The first difference between two WorkloadData::labels texts, for a message: the first label whose
// class differs, else the first line that does.
std::string labels_difference(const std::string& then, const std::string& now) {
  const auto lines = [](const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  };
  const auto items = [](const std::string& list) {
    std::vector<std::string> out;
    for (size_t start = 0;;) {
      const size_t comma = list.find(", ", start);
      out.push_back(list.substr(start, comma - start));
      if (comma == std::string::npos) return out;
      start = comma + 2;
    }
  };
  const auto clip = [](const std::string& text) { return text.size() > 120 ? text.substr(0, 117) + "..." : text; };
  const std::vector<std::string> a = lines(then);
  const std::vector<std::string> b = lines(now);
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string x = i < a.size() ? a[i] : "";
    const std::string y = i < b.size() ? b[i] : "";
    if (x == y) continue;
    const std::string key = "classes: ";
    if (x.rfind(key, 0) == 0 && y.rfind(key, 0) == 0) {
      const std::vector<std::string> p = items(x.substr(key.size()));
      const std::vector<std::string> q = items(y.substr(key.size()));
      for (size_t k = 0; k < std::min(p.size(), q.size()); ++k) {
        if (p[k] != q[k]) {
          return "label " + std::to_string(k) + " is class '" + p[k] + "' in the checkpoint but '" + q[k] +
                 "' in this data (" + std::to_string(p.size()) + " classes then, " + std::to_string(q.size()) + " now)";
        }
      }
      return std::to_string(p.size()) + " classes then, " + std::to_string(q.size()) + " now";
    }
    return "'" + clip(x) + "' in the checkpoint, '" + clip(y) + "' in this data";
  }
  return "they differ";
}

}  // namespace

Checkpointer::Checkpointer(CheckpointOptions options, Communicator& comm)
    : options_(std::move(options)), comm_(comm), memory_root_(memory_root(options_.memory_dir)) {}

Checkpointer::~Checkpointer() = default;

void Checkpointer::write_progress(const ProgressMark& mark) const {
  if (!comm_.is_root()) return;
  std::ostringstream text;
  text.precision(17);
  text << "dtrain-progress 1\n" << mark.epoch << " " << mark.epoch_samples << " " << mark.unix_s << "\n";
  try {
    std::error_code ec;
    fs::create_directories(options_.dir, ec);
    // Rewritten at every progress line: replaced atomically, not synced (it costs microseconds, an fsync
    // milliseconds); a power loss can only make it older.
    write_file_atomically((fs::path(options_.dir) / "progress").string(), text.str(), Durability::kReplaced);
  } catch (const IoError&) {
  }
}

std::optional<ProgressMark> Checkpointer::read_progress(const std::string& dir) {
  std::ifstream in(fs::path(dir) / "progress");
  std::string magic;
  int version = 0;
  ProgressMark mark;
  if (!(in >> magic >> version >> mark.epoch >> mark.epoch_samples >> mark.unix_s) || magic != "dtrain-progress" ||
      version != 1) {
    return std::nullopt;
  }
  // Only a cost report reads it: a mark out of any run's range is ignored, not trusted.
  if (mark.epoch < 1 || mark.epoch > kMaxCheckpointCount || mark.epoch_samples < 0 ||
      mark.epoch_samples > kMaxCheckpointCount || !std::isfinite(mark.unix_s)) {
    return std::nullopt;
  }
  return mark;
}

std::optional<std::string> Checkpointer::latest(const std::string& dir) { return latest_checkpoint(dir); }

void Checkpointer::prepare_host_copies(const std::vector<TrainedModule>& modules) {
  if (!comm_.is_root()) return;
  // Memory is mapped at its first touch: touching it here, once, spares the first snapshot its page
  // faults (ResNet-50's 183 MiB: 0.23 s of training blocked at the first checkpoint, 0.027 s at the
  // later ones). memset rather than an ATen fill, which would start a second pool of threads.
  const auto allocate = [](const at::Tensor& like) {
    at::Tensor t = at::empty_strided(like.sizes(), like.strides(),
                                     like.options().device(at::kCPU).pinned_memory(!like.is_cpu()));
    if (t.numel() > 0) std::memset(t.data_ptr(), 0, t.storage().nbytes());
    return t;
  };
  for (const TrainedModule& m : modules) {
    for (const at::Tensor& p : m.module->parameters()) {
      at::Tensor& kept = host_copies_[p.unsafeGetTensorImpl()];
      if (!kept.defined()) kept = allocate(p);
      // The optimizer's state tensors do not exist before its first step; they take the parameter's
      // shape, so copies of that shape wait for them.
      const int spares = m.optimizer ? optimizer_state_tensors(*m.optimizer) : 0;
      for (int i = 0; i < spares; ++i) spare_copies_.push_back(allocate(p));
    }
    for (const at::Tensor& b : m.module->buffers()) {
      at::Tensor& kept = host_copies_[b.unsafeGetTensorImpl()];
      if (!kept.defined()) kept = allocate(b);
    }
  }
}

CheckpointSnapshot Checkpointer::snapshot(const CheckpointMeta& meta, const std::vector<TrainedModule>& modules,
                                          SnapshotCopy copy) {
  CheckpointSnapshot snapshot;
  if (!comm_.is_root()) return snapshot;
  // From a GPU the copies go to pinned memory without waiting; the one wait comes after the last.
  at::Tensor device_source;
  at::NoGradGuard no_grad;  // the kept copies are flagged as the live tensors are, and written in place
  const TensorCopy host_copy = [this, &device_source](const at::Tensor& t) {
    const at::Tensor source = t.detach();
    at::Tensor& kept = host_copies_[t.unsafeGetTensorImpl()];  // the live tensor: `source` is a temporary
    const auto fits = [&source](const at::Tensor& c) {
      return c.defined() && c.sizes() == source.sizes() && c.strides() == source.strides() &&
             c.scalar_type() == source.scalar_type();
    };
    if (!fits(kept)) {
      const auto spare = std::find_if(spare_copies_.begin(), spare_copies_.end(), fits);
      if (spare != spare_copies_.end()) {
        kept = std::move(*spare);
        spare_copies_.erase(spare);
      } else {
        kept = at::empty_strided(source.sizes(), source.strides(),
                                 source.options().device(at::kCPU).pinned_memory(!source.is_cpu()));
      }
    }
    kept.copy_(source, /*non_blocking=*/!source.is_cpu());
    if (!source.is_cpu() && source.numel() > 0) device_source = source;
    // As the live tensor is flagged, so that the file is the one a save of the live state writes.
    kept.set_requires_grad(t.requires_grad());
    return kept;
  };
  const TensorCopy live = [](const at::Tensor& t) { return t; };
  // Every optimizer's copy first: one that copy_optimizer does not know makes the whole snapshot refer to
  // the live state, to be written before training goes on.
  std::vector<std::unique_ptr<torch::optim::Optimizer>> optimizer_copies(modules.size());
  for (size_t i = 0; copy == SnapshotCopy::kHostCopy && i < modules.size(); ++i) {
    if (!modules[i].optimizer) continue;
    optimizer_copies[i] = copy_optimizer(*modules[i].optimizer, host_copy);
    if (!optimizer_copies[i]) copy = SnapshotCopy::kLive;
  }
  const TensorCopy& take = copy == SnapshotCopy::kHostCopy ? host_copy : live;

  auto archive = std::make_unique<torch::serialize::OutputArchive>();
  torch::serialize::OutputArchive modules_archive;
  torch::serialize::OutputArchive optimizers_archive;
  for (const TrainedModule& m : modules) {
    torch::serialize::OutputArchive module_archive;
    write_module(*m.module, module_archive, take, "", modules.size() > 1 ? " of " + m.name : "", snapshot.checked_);
    modules_archive.write(m.name, module_archive);
    if (!m.optimizer) continue;  // a module the step updates itself (a moving average)
    torch::serialize::OutputArchive optimizer_archive;
    if (copy == SnapshotCopy::kHostCopy) {
      optimizer_copies[&m - modules.data()]->save(optimizer_archive);
    } else {
      m.optimizer->save(optimizer_archive);
    }
    optimizers_archive.write(m.name, optimizer_archive);
  }
  archive->write("modules", modules_archive);
  archive->write("optimizers", optimizers_archive);
  if (device_source.defined()) {
    // Reading a value waits for the device's stream, and with it for every copy queued on it above.
    (void)device_source.reshape({-1})[0].item();
  }
  snapshot.archive_ = std::move(archive);
  snapshot.dir_ = options_.dir;
  snapshot.live_ = copy == SnapshotCopy::kLive;
  snapshot.set_meta(meta);
  return snapshot;
}

void CheckpointSnapshot::set_meta(CheckpointMeta meta) {
  meta_ = std::move(meta);
  path_ = (fs::path(dir_) / checkpoint_file_name(checkpoint_position_of(meta_))).string();
}

std::string Checkpointer::persist(CheckpointSnapshot snapshot) {
  if (snapshot.empty()) return "";
  // A checkpoint is what a run falls back to; a non-finite one would replace a good one under pruning.
  for (const auto& [name, tensor] : snapshot.checked_) {
    if (!all_finite(tensor)) {
      throw NonFiniteError("epoch " + std::to_string(snapshot.meta_.epoch) + ": " + name +
                           " is NaN or infinite; no checkpoint was written for this epoch");
    }
  }
  write_meta(*snapshot.archive_, snapshot.meta_);
  std::string bytes;
  snapshot.archive_->save_to([&bytes](const void* data, size_t size) {
    bytes.append(static_cast<const char*>(data), size);
    return size;
  });
  snapshot.archive_.reset();  // the copies are no longer needed while the file is written
  const CheckpointPosition position = checkpoint_position_of(snapshot.meta_);
  const std::string name = checkpoint_file_name(position);
  // Before the disk: a restart on this node finds the newest state here even while the disk write is
  // under way. Only the newest is kept; the older copy goes once the new one is whole. Best effort.
  if (memory_problem_.empty() && !memory_root_.empty()) {
    try {
      open_memory_copy();
      if (memory_) memory_->replace(name, bytes);
    } catch (const IoError& e) {
      memory_problem_ = e.what();
    }
    if (!memory_problem_.empty() && memory_) {
      memory_->remove();
      memory_.reset();
    }
  }

  std::error_code ec;
  fs::create_directories(options_.dir, ec);
  if (ec) throw IoError("cannot create checkpoint directory '" + options_.dir + "': " + ec.message());
  write_file_atomically(snapshot.path_, bytes);

  if (options_.keep > 0) {
    // Only earlier positions are candidates, so the file just written always survives, and checkpoints
    // of a later one (another run's, in a shared directory) are not this run's to delete.
    std::vector<std::string> older;
    for (const CheckpointFile& file : list_checkpoints(options_.dir)) {
      if (file.position < position) older.push_back(file.path);
    }
    const size_t keep_older = static_cast<size_t>(options_.keep - 1);
    for (size_t i = 0; i + keep_older < older.size(); ++i) fs::remove(older[i], ec);
  }
  return snapshot.path_;
}

void Checkpointer::open_memory_copy() {
  if (!comm_.is_root() || memory_ || !memory_problem_.empty() || memory_root_.empty()) return;
  memory_ = MemoryCopy::open(memory_root_, options_.dir, /*create=*/true, memory_problem_);
}

void Checkpointer::remove_memory_copy() {
  if (!comm_.is_root() || memory_root_.empty()) return;
  if (!memory_) memory_ = MemoryCopy::open(memory_root_, options_.dir, /*create=*/false, memory_problem_);
  if (memory_) memory_->remove();
  memory_.reset();
}

std::string Checkpointer::save(const CheckpointMeta& meta, const std::vector<TrainedModule>& modules) {
  return persist(snapshot(meta, modules, SnapshotCopy::kLive));
}

CheckpointPosition checkpoint_position_of(const CheckpointMeta& meta) {
  return meta.epoch_samples > 0 ? CheckpointPosition{meta.epoch + 1, meta.epoch_steps}
                                : CheckpointPosition{meta.epoch, kEpochEndSteps};
}

namespace {

// A checkpoint read and parsed: its archive and what it records, to be checked against this run.
struct DecodedCheckpoint {
  torch::serialize::InputArchive archive;
  CheckpointMeta meta;
  int64_t version = 0;
};

// Reads the records of a checkpoint other than its modules: the format, the position, the metrics.
void read_meta(torch::serialize::InputArchive& archive, CheckpointMeta& meta, int64_t& version) {
  version = read_int(archive, "format_version");
  if (version < 1 || version > kFormatVersion) {
    throw DataError("format version " + std::to_string(version) + ", expected 1 to " + std::to_string(kFormatVersion) +
                    " (written by a newer dtrain?)");
  }
  meta.epoch = read_int(archive, "epoch");
  meta.seed = read_int(archive, "seed");
  meta.world_size = read_int(archive, "world_size");
  meta.workload = read_string(archive, "workload");
  meta.optimizer = read_string(archive, "optimizer_name");
  torch::serialize::InputArchive metrics_archive;
  if (version >= 2 && archive.try_read("metrics", metrics_archive)) meta.metrics = read_metrics(metrics_archive, version);
  if (version >= 4) {
    meta.epoch_samples = read_int(archive, "epoch_samples");
    meta.epoch_steps = read_int(archive, "epoch_steps");
    meta.global_batch = read_int(archive, "global_batch");
    meta.saved_unix_s = read_double(archive, "saved_unix_s");
    meta.partial_train = read_metric_values(archive, "partial_train");
    meta.partial_samples = read_int(archive, "partial_samples");
    at::Tensor recorded_labels;
    if (archive.try_read("data_labels", recorded_labels)) meta.labels = tensor_string(recorded_labels);
  }
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

// Parses a checkpoint's bytes, read from `path`: what dtrain checks before LibTorch reads it (a whole zip,
// only what a dtrain checkpoint holds), LibTorch's reader (tensors land on `device`), the records and
// their ranges, and that its name (when it has one of a checkpoint's) says the position it records.
// Throws DataError saying what is wrong (without the path); the same bytes give the same verdict
// everywhere.
DecodedCheckpoint decode(const std::string& path, const std::string& bytes, c10::Device device) {
  DecodedCheckpoint decoded;
  decoded.meta.path = path;
  std::string problem = zip_damage(bytes);
  if (problem.empty()) problem = checkpoint_archive_problem(bytes);
  if (!problem.empty()) throw DataError(problem);
  try {
    decoded.archive.load_from(bytes.data(), bytes.size(), device);
    read_meta(decoded.archive, decoded.meta, decoded.version);
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

// Whether a decoded checkpoint belongs to this run's workload, optimizer and data. Throws DataError.
void check_owner(const CheckpointMeta& meta, const std::string& workload, const std::string& optimizer_name,
                 const std::string& labels) {
  const std::string where = "checkpoint '" + meta.path + "'";
  if (meta.workload != workload) {
    throw DataError(where + " is for workload '" + meta.workload + "', this run trains '" + workload +
                    "'; use another checkpoint.dir");
  }
  if (meta.optimizer != optimizer_name) {
    throw DataError(where + " holds " + meta.optimizer + " optimizer state, this run uses " + optimizer_name +
                    "; use another checkpoint.dir");
  }
  if (!meta.labels.empty() && !labels.empty() && meta.labels != labels) {
    throw DataError(where + " was trained on data whose labels mean other things: " + labels_difference(meta.labels, labels) +
                    ". Resume it on the data it was trained on, or start afresh in another checkpoint.dir");
  }
}

// Loads a decoded checkpoint's modules and optimizer state into `modules`, after checking every module
// against it (so a bad file changes nothing). Throws DataError.
void load_modules(DecodedCheckpoint& decoded, std::vector<TrainedModule>& modules, const std::string& workload) {
  const CheckpointMeta& meta = decoded.meta;
  torch::serialize::InputArchive& archive = decoded.archive;
  const std::string where = "checkpoint '" + meta.path + "'";
  try {
    // Formats 1 and 2 held one module and its optimizer at the top level; they load as "model".
    const bool named = decoded.version >= 3;
    torch::serialize::InputArchive modules_archive;
    torch::serialize::InputArchive optimizers_archive;
    if (named && (!archive.try_read("modules", modules_archive) || !archive.try_read("optimizers", optimizers_archive))) {
      throw DataError(where + " holds no modules");
    }
    std::vector<std::string> names;
    for (const TrainedModule& m : modules) names.push_back(m.name);
    if (named) {
      for (const std::string& key : modules_archive.keys()) {
        if (std::find(names.begin(), names.end(), key) == names.end()) {
          throw DataError(where + " (workload " + meta.workload + ") holds a module '" + key + "', which this " + workload +
                          " run does not train");
        }
      }
    } else if (modules.size() != 1 || modules.front().name != "model") {
      throw DataError(where + " (format " + std::to_string(decoded.version) + ") holds one module, 'model'; this " +
                      workload + " run trains others");
    }
    std::vector<torch::serialize::InputArchive> module_archives(modules.size());
    for (size_t i = 0; i < modules.size(); ++i) {
      const TrainedModule& m = modules[i];
      const bool found = named ? modules_archive.try_read(m.name, module_archives[i]) : archive.try_read("model", module_archives[i]);
      if (!found) throw DataError(where + " holds no module '" + m.name + "'");
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
      if (named) {
        optimizers_archive.read(m.name, optimizer_archive);
      } else {
        archive.read("optimizer", optimizer_archive);
      }
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

// Tensors land on this rank's device whatever device wrote them: a checkpoint from a CPU run resumes on
// GPUs and the reverse, and rank 3's state never ends up on rank 0's GPU.
c10::Device device_of(const std::vector<TrainedModule>& modules) {
  for (const TrainedModule& m : modules) {
    if (!m.module->parameters().empty()) return m.module->parameters().front().device();
  }
  return c10::Device(c10::DeviceType::CPU);
}

// Rank 0's choice: the newest checkpoint that reads whole and is this run's, from the disk or this
// node's copy in memory.
struct Choice {
  enum class Status { kNone, kChosen, kUnusable };
  Status status = Status::kNone;
  std::string path;
  std::string bytes;  // the file's, or the error's message (kUnusable)
  bool from_memory = false;
  std::vector<std::string> passed_over;  // "<path>: <what is wrong>"
  std::unique_ptr<DecodedCheckpoint> decoded;  // rank 0's parse of the chosen file
};

Choice choose(const CheckpointOptions& options, const std::string& memory_root, const std::string& workload,
              const std::string& optimizer_name, const std::string& labels, c10::Device device) {
  Choice choice;
  std::error_code ec;
  if (fs::exists(options.dir, ec) && !fs::is_directory(options.dir, ec)) {
    throw DataError("checkpoint.dir '" + options.dir + "' is not a directory");
  }
  // The disk's checkpoints and this node's copy in memory, newest first; the copy first where they are
  // the same position (it is read without touching the disk). A copy that cannot be opened safely is
  // not read (the run directory's start-up check warns about it).
  struct Candidate {
    CheckpointFile file;
    bool memory;
  };
  std::vector<Candidate> candidates;
  for (const CheckpointFile& file : list_checkpoints(options.dir)) candidates.push_back({file, false});
  std::string memory_problem;
  const std::unique_ptr<MemoryCopy> memory = MemoryCopy::open(memory_root, options.dir, /*create=*/false, memory_problem);
  if (memory) {
    for (const CheckpointFile& file : memory->list()) candidates.push_back({file, true});
  }
  std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return a.file.position != b.file.position ? b.file.position < a.file.position : a.memory && !b.memory;
  });
  size_t disk_passed_over = 0;
  for (const Candidate& candidate : candidates) {
    const std::string& path = candidate.file.path;
    try {
      std::string bytes = candidate.memory ? memory->read(fs::path(path).filename().string()) : read_file(path);
      DecodedCheckpoint decoded = decode(path, bytes, device);
      // A copy in memory that is not this run's state is passed over like a damaged file; a file on disk
      // of another workload or data means the wrong checkpoint.dir (restore's check).
      if (candidate.memory) check_owner(decoded.meta, workload, optimizer_name, labels);
      choice.status = Choice::Status::kChosen;
      choice.path = path;
      choice.bytes = std::move(bytes);
      choice.from_memory = candidate.memory;
      choice.decoded = std::make_unique<DecodedCheckpoint>(std::move(decoded));
      return choice;
    } catch (const Error& e) {  // IoError or DataError
      choice.passed_over.push_back(path + ": " + e.message());
    }
    if (!candidate.memory) ++disk_passed_over;
  }
  if (disk_passed_over > 0) {
    std::string list;
    for (const std::string& d : choice.passed_over) list += "\n  " + d;
    throw DataError("every checkpoint in checkpoint.dir '" + options.dir + "' is damaged:" + list +
                    "\nmove them away to start afresh (without --resume), or restore one from a copy");
  }
  return choice;
}

}  // namespace

Restored Checkpointer::restore(std::vector<TrainedModule>& modules, const std::string& workload,
                               const std::string& optimizer_name, const std::string& labels) const {
  // Rank 0 chooses and reads, then broadcasts the status, the path and the file's bytes (or the error's
  // message), so every rank loads identical state and reaches the same verdict.
  const c10::Device device = device_of(modules);
  Choice choice;
  if (comm_.is_root()) {
    try {
      choice = choose(options_, memory_root_, workload, optimizer_name, labels, device);
    } catch (const DataError& e) {
      choice.status = Choice::Status::kUnusable;
      choice.bytes = e.what();
    }
  }
  std::string passed_over;
  for (const std::string& d : choice.passed_over) passed_over += d + '\n';
  std::vector<std::string> parts{std::to_string(static_cast<int>(choice.status)), choice.path, std::move(choice.bytes),
                                 choice.from_memory ? "1" : "0", std::move(passed_over)};
  comm_.broadcast_bytes(parts, 0);
  Restored restored;
  for (size_t start = 0, end; (end = parts[4].find('\n', start)) != std::string::npos; start = end + 1) {
    restored.passed_over.push_back(parts[4].substr(start, end - start));
  }
  const auto status = static_cast<Choice::Status>(std::stoi(parts[0]));
  if (status == Choice::Status::kNone) return restored;
  if (status == Choice::Status::kUnusable) throw DataError(parts[2]);
  // Rank 0 parsed the file while choosing it; the others parse the same bytes.
  std::unique_ptr<DecodedCheckpoint> decoded = std::move(choice.decoded);
  if (!decoded) {
    try {
      decoded = std::make_unique<DecodedCheckpoint>(decode(parts[1], parts[2], device));
    } catch (const DataError& e) {
      throw DataError("checkpoint '" + parts[1] + "' is unusable: " + e.message());
    }
  }
  decoded->meta.from_memory = parts[3] == "1";
  check_owner(decoded->meta, workload, optimizer_name, labels);
  load_modules(*decoded, modules, workload);
  restored.checkpoint = std::move(decoded->meta);
  return restored;
}

}  // namespace dtrain
