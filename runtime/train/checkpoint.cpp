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
constexpr const char* kPrefix = "checkpoint-epoch-";
constexpr const char* kStep = "-step-";
constexpr const char* kSuffix = ".pt";

// Where a checkpoint is in training, for ordering: (epoch, optimizer steps into it); an epoch's end
// comes after every step of it.
using Position = std::pair<int64_t, int64_t>;
// The largest epoch, step, sample count or world size a checkpoint or progress mark may record: 2^40.
constexpr int64_t kMaxCheckpointCount = int64_t{1} << 40;
constexpr int64_t kEpochEnd = std::numeric_limits<int64_t>::max();

Position position_of(const CheckpointMeta& meta) {
  return meta.epoch_samples > 0 ? Position{meta.epoch + 1, meta.epoch_steps} : Position{meta.epoch, kEpochEnd};
}

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

// checkpoint-epoch-NNNNNN.pt at an epoch's end, checkpoint-epoch-NNNNNN-step-SSSSSSSS.pt inside one.
std::string checkpoint_name(const Position& position) {
  char name[96];
  if (position.second == kEpochEnd) {
    std::snprintf(name, sizeof name, "%s%06lld%s", kPrefix, static_cast<long long>(position.first), kSuffix);
  } else {
    std::snprintf(name, sizeof name, "%s%06lld%s%08lld%s", kPrefix, static_cast<long long>(position.first), kStep,
                  static_cast<long long>(position.second), kSuffix);
  }
  return name;
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

// Every tensor's storage checked against the bytes its record holds, before any tensor is used. LibTorch
// 1.13 sizes a storage by the element count in the archive's pickle but fills it from the record: a
// record cut short (its CRC-32 recomputed, so the zip check passes) gives a storage whose tail lies past
// its buffer, read when the tensor is loaded into the model or saved again. The writer numbers storages
// in the order the pickle first meets them (records <archive>/data/0, 1, ...), which is the order of this
// walk over the archive's attributes; a tensor whose shape needs more than its storage is refused too.
class StorageCheck {
 public:
  explicit StorageCheck(std::string_view bytes) {
    for (ZipRecord& r : zip_records(bytes)) {
      constexpr std::string_view kPickle = "data.pkl";
      if (r.name.size() >= kPickle.size() && r.name.compare(r.name.size() - kPickle.size(), kPickle.size(), kPickle) == 0 &&
          folder_.empty()) {
        folder_ = r.name.substr(0, r.name.size() - kPickle.size());
      }
      sizes_.emplace(std::move(r.name), r.size);
    }
  }

  // Throws DataError naming the first tensor (by its path in the archive) whose bytes are not all there.
  void check(torch::serialize::InputArchive& archive, const std::string& prefix) {
    for (const std::string& key : archive.keys()) {
      c10::IValue value;
      if (!archive.try_read(key, value)) continue;
      if (value.isObject()) {
        torch::serialize::InputArchive inner;
        if (archive.try_read(key, inner)) check(inner, prefix + key + "/");
      } else if (value.isTensor()) {
        check(value.toTensor(), prefix + key);
      } else if (value.isTensorList()) {
        for (const at::Tensor& t : value.toTensorVector()) check(t, prefix + key);
      }
    }
  }

 private:
  void check(const at::Tensor& t, const std::string& name) {
    if (!t.defined() || !t.has_storage()) return;
    const void* storage = t.storage().unsafeGetStorageImpl();
    if (std::find(seen_.begin(), seen_.end(), storage) == seen_.end()) {
      const std::string record = folder_ + "data/" + std::to_string(seen_.size());
      seen_.push_back(storage);
      const auto found = sizes_.find(record);
      const auto claimed = static_cast<uint64_t>(t.storage().nbytes());
      if (found == sizes_.end() || found->second != claimed) {
        throw DataError("tensor '" + name + "' " + shape_text(t) + " has a storage of " + std::to_string(claimed) +
                        " bytes, its record '" + record + "' " +
                        (found == sizes_.end() ? std::string("is missing") : "holds " + std::to_string(found->second)) +
                        " (a damaged or crafted file)");
      }
    }
    if (t.numel() == 0) return;
    // The last element's offset, every product checked: a crafted shape may overflow int64.
    int64_t last = t.storage_offset();
    bool overflow = last < 0;
    for (int64_t d = 0; d < t.dim() && !overflow; ++d) {
      int64_t extent = 0;
      overflow = t.stride(d) < 0 || __builtin_mul_overflow(t.size(d) - 1, t.stride(d), &extent) ||
                 __builtin_add_overflow(last, extent, &last);
    }
    int64_t needed = 0;
    overflow = overflow || __builtin_add_overflow(last, int64_t{1}, &needed) ||
               __builtin_mul_overflow(needed, static_cast<int64_t>(t.dtype().itemsize()), &needed);
    if (overflow || static_cast<uint64_t>(needed) > t.storage().nbytes()) {
      throw DataError("tensor '" + name + "' " + shape_text(t) + " needs " +
                      (overflow ? std::string("more than 2^63") : std::to_string(needed)) + " bytes, its storage holds " +
                      std::to_string(t.storage().nbytes()) + " (a damaged or crafted file)");
    }
  }

  std::map<std::string, uint64_t> sizes_;
  std::string folder_;
  std::vector<const void*> seen_;
};

// The first line of a message, for errors whose text runs on (TorchScript's quote the source).
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// A decimal number filling [first, last), or nullopt; throws DataError when it overflows.
std::optional<int64_t> parse_number(const char* first, const char* last, const fs::path& file, const char* what) {
  if (first == last || !std::all_of(first, last, [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  int64_t value = 0;
  const auto [ptr, err] = std::from_chars(first, last, value);
  if (err != std::errc() || ptr != last) {
    throw DataError("checkpoint file '" + file.string() + "' has " + what + " too large for any run; rename or remove it");
  }
  return value;
}

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

std::vector<std::pair<Position, fs::path>> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<Position, fs::path>> found;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return found;
  const size_t prefix = std::strlen(kPrefix);
  const size_t suffix = std::strlen(kSuffix);
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= prefix + suffix || name.compare(0, prefix, kPrefix) != 0 ||
        name.compare(name.size() - suffix, suffix, kSuffix) != 0 || !entry.is_regular_file(ec)) {
      continue;
    }
    const char* first = name.data() + prefix;
    const char* last = name.data() + name.size() - suffix;
    const char* step = std::search(first, last, kStep, kStep + std::strlen(kStep));
    const std::optional<int64_t> epoch = parse_number(first, step, entry.path(), "an epoch number");
    if (!epoch) continue;
    if (step == last) {
      found.emplace_back(Position{*epoch, kEpochEnd}, entry.path());
    } else if (const std::optional<int64_t> steps = parse_number(step + std::strlen(kStep), last, entry.path(), "a step number")) {
      found.emplace_back(Position{*epoch, *steps}, entry.path());
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

Checkpointer::Checkpointer(CheckpointOptions options, Communicator& comm) : options_(std::move(options)), comm_(comm) {}

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

std::optional<std::string> Checkpointer::latest(const std::string& dir) {
  auto found = list_checkpoints(dir);
  if (found.empty()) return std::nullopt;
  return found.back().second.string();
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
    if (!kept.defined() || kept.sizes() != source.sizes() || kept.strides() != source.strides() ||
        kept.scalar_type() != source.scalar_type()) {
      kept = at::empty_strided(source.sizes(), source.strides(),
                               source.options().device(at::kCPU).pinned_memory(!source.is_cpu()));
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
  write_meta(*archive, meta);
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
  snapshot.position_ = position_of(meta);
  snapshot.completed_epoch_ = meta.epoch;
  snapshot.live_ = copy == SnapshotCopy::kLive;
  snapshot.path_ = (fs::path(options_.dir) / checkpoint_name(snapshot.position_)).string();
  return snapshot;
}

std::string Checkpointer::persist(CheckpointSnapshot snapshot) {
  if (snapshot.empty()) return "";
  // A checkpoint is what a run falls back to; a non-finite one would replace a good one under pruning.
  for (const auto& [name, tensor] : snapshot.checked_) {
    if (!all_finite(tensor)) {
      throw NonFiniteError("epoch " + std::to_string(snapshot.completed_epoch_) + ": " + name +
                           " is NaN or infinite; no checkpoint was written for this epoch");
    }
  }
  std::string bytes;
  snapshot.archive_->save_to([&bytes](const void* data, size_t size) {
    bytes.append(static_cast<const char*>(data), size);
    return size;
  });
  snapshot.archive_.reset();  // the copies are no longer needed while the file is written

  const std::string memory = memory_problem_.empty() ? memory_checkpoint_dir(options_) : "";
  if (!memory.empty()) {
    // Before the disk: a restart on this node finds the newest state here even while the disk write
    // is under way. Only the newest is kept; the older copy goes once the new one is whole.
    try {
      std::error_code dir_ec;
      fs::create_directories(memory, dir_ec);
      if (dir_ec) throw IoError("cannot create '" + memory + "': " + dir_ec.message());
      const fs::path copy = fs::path(memory) / fs::path(snapshot.path_).filename();
      write_file_atomically(copy.string(), bytes, Durability::kReplaced);
      for (const auto& [where, file] : list_checkpoints(memory)) {
        if (file != copy) fs::remove(file, dir_ec);
      }
    } catch (const std::exception& e) {
      memory_problem_ = e.what();
      remove_memory_checkpoints(options_);
    }
  }

  std::error_code ec;
  fs::create_directories(options_.dir, ec);
  if (ec) throw IoError("cannot create checkpoint directory '" + options_.dir + "': " + ec.message());
  write_file_atomically(snapshot.path_, bytes);

  if (options_.keep > 0) {
    // Only earlier positions are candidates, so the file just written always survives, and checkpoints
    // of a later one (another run's, in a shared directory) are not this run's to delete.
    std::vector<fs::path> older;
    for (const auto& [where, file] : list_checkpoints(options_.dir)) {
      if (where < snapshot.position_) older.push_back(file);
    }
    const size_t keep_older = static_cast<size_t>(options_.keep - 1);
    for (size_t i = 0; i + keep_older < older.size(); ++i) fs::remove(older[i], ec);
  }
  return snapshot.path_;
}

int remove_partial_checkpoints(const std::string& dir) {
  int removed = 0;
  std::error_code ec;
  const std::string temp_suffix = std::string(kSuffix) + ".tmp";
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kPrefix, 0) != 0 || name.size() <= temp_suffix.size() ||
        name.compare(name.size() - temp_suffix.size(), temp_suffix.size(), temp_suffix) != 0) {
      continue;
    }
    std::error_code remove_ec;
    if (fs::remove(entry.path(), remove_ec)) ++removed;
  }
  return removed;
}

std::string memory_checkpoint_dir(const CheckpointOptions& options) {
  if (options.memory_dir.empty() || options.dir.empty()) return "";
  std::error_code ec;
  fs::path dir = fs::weakly_canonical(fs::absolute(options.dir, ec), ec);
  if (ec) dir = fs::absolute(options.dir).lexically_normal();
  // FNV-1a: a name that any build of dtrain derives alike from the same directory (std::hash need not).
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const char c : dir.string()) hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  char name[64];
  std::snprintf(name, sizeof name, "dtrain-%u-%016llx", static_cast<unsigned>(geteuid()),
                static_cast<unsigned long long>(hash));
  return (fs::path(options.memory_dir) / name).string();
}

void remove_memory_checkpoints(const CheckpointOptions& options) {
  const std::string dir = memory_checkpoint_dir(options);
  std::error_code ec;
  if (!dir.empty()) fs::remove_all(dir, ec);
}

std::string Checkpointer::save(const CheckpointMeta& meta, const std::vector<TrainedModule>& modules) {
  return persist(snapshot(meta, modules, SnapshotCopy::kLive));
}

std::optional<CheckpointMeta> Checkpointer::restore(std::vector<TrainedModule>& modules, const std::string& workload,
                                                    const std::string& optimizer_name, const std::string& labels) const {
  // Rank 0 decides and reads, then broadcasts the status, the path and the payload: the file's bytes, or
  // the error message. Status -1: no checkpoint; -2: unusable.
  std::string path;
  std::string payload;
  int64_t status = -1;
  int from_memory = 0;
  std::vector<std::string> damaged;
  if (comm_.is_root()) {
    try {
      std::error_code ec;
      if (fs::exists(options_.dir, ec) && !fs::is_directory(options_.dir, ec)) {
        throw DataError("checkpoint.dir '" + options_.dir + "' is not a directory");
      }
      // The disk's checkpoints and this node's copies in memory, newest first; the copy in memory first
      // where they are the same position (it is read without touching the disk). The newest whole one
      // is used; damaged ones newer than it are named and passed over.
      struct Candidate {
        Position where;
        fs::path file;
        bool memory;
      };
      std::vector<Candidate> candidates;
      for (const auto& [where, file] : list_checkpoints(options_.dir)) candidates.push_back({where, file, false});
      const std::string memory = memory_checkpoint_dir(options_);
      if (!memory.empty()) {
        for (const auto& [where, file] : list_checkpoints(memory)) candidates.push_back({where, file, true});
      }
      std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
        return a.where != b.where ? b.where < a.where : a.memory && !b.memory;
      });
      for (const Candidate& candidate : candidates) {
        const std::string file = candidate.file.string();
        std::string bytes;
        std::string damage;
        try {
          bytes = read_file(file);
          damage = zip_damage(bytes);
        } catch (const IoError& e) {
          damage = e.what();
        }
        if (!damage.empty()) {
          damaged.push_back(file + ": " + damage);
          continue;
        }
        path = file;
        payload = std::move(bytes);
        from_memory = candidate.memory ? 1 : 0;
        status = 0;
        break;
      }
      if (status != 0 && !damaged.empty()) {
        std::string list;
        for (const std::string& d : damaged) list += "\n  " + d;
        throw DataError("every checkpoint in checkpoint.dir '" + options_.dir + "' is damaged:" + list +
                        "\nmove them away to start afresh (without --resume), or restore one from a copy");
      }
    } catch (const DataError& e) {
      path.clear();
      payload = e.what();
      status = -2;
    }
  }
  std::string damaged_list;
  for (const std::string& d : damaged) damaged_list += d + '\n';
  std::vector<std::string> parts{std::to_string(status), std::move(path), std::move(payload), std::to_string(from_memory),
                                 std::move(damaged_list)};
  comm_.broadcast_bytes(parts, 0);
  status = std::stoll(parts[0]);
  from_memory = std::stoi(parts[3]);
  if (status == -1) return std::nullopt;
  if (status == -2) throw DataError(parts[2]);
  path = std::move(parts[1]);
  const std::string data = std::move(parts[2]);

  // Every rank now holds the same bytes, so every rank reaches the same verdict below.
  const std::string where = "checkpoint '" + path + "'";
  torch::serialize::InputArchive archive;
  CheckpointMeta meta;
  meta.path = path;
  meta.from_memory = from_memory != 0;
  for (size_t start = 0, end; (end = parts[4].find('\n', start)) != std::string::npos; start = end + 1) {
    meta.damaged.push_back(parts[4].substr(start, end - start));
  }
  int64_t version = 0;
  try {
    // Tensors land on this rank's device whatever device wrote them: a checkpoint from a CPU run resumes
    // on GPUs and the reverse, and rank 3's state never ends up on rank 0's GPU.
    c10::Device device(c10::DeviceType::CPU);
    for (const TrainedModule& m : modules) {
      if (!m.module->parameters().empty()) {
        device = m.module->parameters().front().device();
        break;
      }
    }
    archive.load_from(data.data(), data.size(), device);
    StorageCheck(data).check(archive, "");
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
  } catch (const DataError& e) {
    throw DataError(where + " is unusable: " + e.what());
  } catch (const c10::Error& e) {
    throw DataError(where + " is corrupt or not a dtrain checkpoint: " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    // LibTorch's TorchScript reader reports a damaged archive with std::runtime_error (its ErrorReport,
    // several lines quoting the source it could not parse).
    throw DataError(where + " is corrupt or not a dtrain checkpoint: " + first_line(e.what()));
  }
  if (meta.epoch < 0) throw DataError(where + " records epoch " + std::to_string(meta.epoch) + ", expected 0 or more");
  if (meta.epoch_samples < 0 || meta.epoch_steps < 0 || meta.global_batch < 0) {
    throw DataError(where + " records a negative position (" + std::to_string(meta.epoch_samples) + " samples, " +
                    std::to_string(meta.epoch_steps) + " steps into epoch " + std::to_string(meta.epoch + 1) +
                    ", global batch " + std::to_string(meta.global_batch) + ")");
  }
  // Far beyond any run, and far enough below INT64_MAX that the position arithmetic of a resume
  // (epoch + 1, epochs x samples per epoch) cannot overflow.
  const auto check_range = [&where](const char* field, int64_t value, int64_t low, int64_t high) {
    if (value < low || value > high) {
      throw DataError(where + " records " + field + " " + std::to_string(value) + ", expected " + std::to_string(low) +
                      " to " + std::to_string(high) + " (a damaged or foreign file)");
    }
  };
  check_range("epoch", meta.epoch, 0, kMaxCheckpointCount);
  check_range("epoch_samples", meta.epoch_samples, 0, kMaxCheckpointCount);
  check_range("epoch_steps", meta.epoch_steps, 0, kMaxCheckpointCount);
  check_range("global_batch", meta.global_batch, 0, kMaxCheckpointCount);
  check_range("partial_samples", meta.partial_samples, 0, kMaxCheckpointCount);
  check_range("world_size", meta.world_size, 1, kMaxCheckpointCount);
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
  try {
    // Formats 1 and 2 held one module and its optimizer at the top level; they load as "model".
    const bool named = version >= 3;
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
      throw DataError(where + " (format " + std::to_string(version) + ") holds one module, 'model'; this " + workload +
                      " run trains others");
    }
    // Every module is checked before any is loaded, so a bad file changes nothing.
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
  return meta;
}

}  // namespace dtrain
