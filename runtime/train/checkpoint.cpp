#include "runtime/train/checkpoint.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <vector>

#include "runtime/train/memory_copy.h"
#include "runtime/train/optimizer_state.h"
#include "runtime/util/error.h"
#include "runtime/util/file_io.h"

namespace dtrain {
namespace fs = std::filesystem;
namespace {

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

// Whether a decoded checkpoint belongs to this run's workload, optimizer and data. Throws CheckpointMismatch.
void check_owner(const CheckpointMeta& meta, const std::string& workload, const std::string& optimizer_name,
                 const std::string& labels) {
  const std::string where = "checkpoint '" + meta.path + "'";
  if (meta.workload != workload) {
    throw CheckpointMismatch(where + " is for workload '" + meta.workload + "', this run trains '" + workload +
                    "'; use another checkpoint.dir");
  }
  if (meta.optimizer != optimizer_name) {
    throw CheckpointMismatch(where + " holds " + meta.optimizer + " optimizer state, this run uses " + optimizer_name +
                    "; use another checkpoint.dir");
  }
  if (!meta.labels.empty() && !labels.empty() && meta.labels != labels) {
    throw CheckpointMismatch(where + " was trained on data whose labels mean other things: " + labels_difference(meta.labels, labels) +
                    ". Resume it on the data it was trained on, or start afresh in another checkpoint.dir");
  }
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
};

// The most bytes a checkpoint of `modules` can take: every parameter with up to three optimizer state
// tensors of its shape (Adam with amsgrad keeps three), every buffer, and for each tensor's records and
// the metadata a generous allowance. A file named like a checkpoint that is larger is not one of this
// run's, and is refused before it is read (a 3 GB sparse file once took 31 s and 4.6 GB to pass over).
uint64_t checkpoint_size_bound(const std::vector<TrainedModule>& modules) {
  constexpr uint64_t kPerTensorBytes = 16 << 10;  // its header entry and CRC record (a few hundred bytes)
  constexpr uint64_t kFixedBytes = 64 << 20;      // the metadata: labels, metrics, options
  uint64_t bound = kFixedBytes;
  for (const TrainedModule& m : modules) {
    for (const at::Tensor& p : m.module->parameters()) bound += 4 * (static_cast<uint64_t>(p.nbytes()) + kPerTensorBytes);
    for (const at::Tensor& b : m.module->buffers()) bound += static_cast<uint64_t>(b.nbytes()) + kPerTensorBytes;
  }
  return bound;
}

// Stops a restore on rank 0's verdict: not a damaged file, but one that says the run is misconfigured.
class Unusable : public DataError {
 public:
  using DataError::DataError;
};

Choice choose(const CheckpointOptions& options, const std::string& memory_root, const std::vector<TrainedModule>& modules,
              const std::string& workload, const std::string& optimizer_name, const std::string& labels, uint64_t max_bytes) {
  Choice choice;
  std::error_code ec;
  if (fs::exists(options.dir, ec) && !fs::is_directory(options.dir, ec)) {
    throw DataError("checkpoint.dir '" + options.dir + "' is not a directory");
  }
  std::optional<Directory> disk;
  if (fs::is_directory(options.dir, ec)) {
    try {
      disk = Directory::open(options.dir, false);
    } catch (const IoError& e) {
      throw DataError(e.message());
    }
  }
  // The disk's checkpoints and this node's copy in memory, newest first; the copy first where they are
  // the same position (it is read without touching the disk). A copy that cannot be opened safely is
  // not read (the run directory's start-up check warns about it).
  struct Candidate {
    CheckpointFile file;
    bool memory;
  };
  std::vector<Candidate> candidates;
  if (disk) {
    for (const CheckpointFile& file : list_checkpoints(options.dir)) candidates.push_back({file, false});
  }
  std::string memory_problem;
  const std::unique_ptr<MemoryCopy> memory = MemoryCopy::open(memory_root, options.dir, /*create=*/false, memory_problem);
  if (memory) {
    for (const CheckpointFile& file : memory->list()) candidates.push_back({file, true});
  }
  std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.file.position != b.file.position) return b.file.position < a.file.position;
    if (a.file.format4 != b.file.format4) return b.file.format4;  // its conversion first
    return a.memory && !b.memory;
  });
  size_t disk_passed_over = 0;
  for (const Candidate& candidate : candidates) {
    const std::string& path = candidate.file.path;
    if (candidate.file.format4 && !candidate.memory) {
      // Not damaged, and newer than anything this dtrain could resume: falling back past it would lose
      // the training since. The run stops, saying how to convert it.
      throw DataError("checkpoint '" + path + "' is of format 4 (a LibTorch archive of dtrain 0.1), which this dtrain does "
                      "not read. Convert it once, if you trust the file (the converter loads it with torch.jit.load): "
                      "/usr/bin/python3 scripts/convert_checkpoint.py " + path + " (writes " +
                      fs::path(path).replace_extension(".safetensors").filename().string() + " beside it), then resume");
    }
    try {
      const std::string name = fs::path(path).filename().string();
      std::string bytes = candidate.memory ? memory->read(name, max_bytes) : read_checkpoint_file(*disk, name, max_bytes);
      DecodedCheckpoint decoded = decode_checkpoint(path, std::move(bytes));
      // A copy in memory that is not this run's state is passed over like a damaged file; a file on disk
      // of another workload, data or model means the wrong checkpoint.dir or configuration, and stops the
      // run. Whatever else is wrong with a file (its optimizer state, say) passes it over.
      try {
        check_owner(decoded.meta, workload, optimizer_name, labels);
        (void)plan_checkpoint_load(decoded, modules, workload);
      } catch (const CheckpointMismatch& e) {
        if (!candidate.memory) throw Unusable(e.message());
        throw;
      }
      choice.status = Choice::Status::kChosen;
      choice.path = path;
      choice.from_memory = candidate.memory;
      choice.bytes = std::move(*decoded.bytes);  // `decoded`, which views them, ends here
      return choice;
    } catch (const Unusable&) {
      throw;
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

Checkpointer::Checkpointer(CheckpointOptions options, Communicator& comm)
    : options_(std::move(options)), comm_(comm), memory_root_(memory_root(options_.memory_dir)) {}

Checkpointer::~Checkpointer() = default;

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
  // Every optimizer must be one whose state a checkpoint can name (optimizer_state.h).
  for (const TrainedModule& m : modules) {
    if (m.optimizer && optimizer_type(*m.optimizer).empty()) (void)optimizer_options(*m.optimizer);  // throws, saying so
  }
  const TensorCopy& take = copy == SnapshotCopy::kHostCopy ? host_copy : live;
  for (const TrainedModule& m : modules) {
    collect_module_state(m, take, modules.size() > 1 ? " of " + m.name : "", snapshot.state_);
  }
  if (device_source.defined()) {
    // Reading a value waits for the device's stream, and with it for every copy queued on it above.
    (void)device_source.reshape({-1})[0].item();
  }
  snapshot.taken_ = true;
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
  for (const auto& [name, tensor] : snapshot.state_.checked) {
    if (!holds_only_finite(tensor)) {
      throw NonFiniteError("epoch " + std::to_string(snapshot.meta_.epoch) + ": " + name +
                           " is NaN or infinite; no checkpoint was written for this epoch");
    }
  }
  if (!run_id_) {
    try {
      run_id_ = checkpoint_run_id(options_.dir);
    } catch (const IoError&) {
      run_id_ = "";  // the start-up check named it; the checkpoint simply records none
    }
  }
  snapshot.meta_.run_id = *run_id_;
  const std::string bytes = encode_checkpoint(snapshot.state_, snapshot.meta_);
  snapshot.state_ = CheckpointState();  // the copies are no longer needed while the file is written
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

  // The directory opened once for the write: its temporary, the rename and the pruning below all go
  // through this descriptor.
  const Directory dir = Directory::open(options_.dir, true);
  write_file_atomically(dir, name, bytes);

  if (options_.keep > 0) {
    // Only earlier positions are candidates, so the file just written always survives, and checkpoints
    // of a later one (another run's, in a shared directory) are not this run's to delete; nor is a file
    // of another user's.
    std::vector<std::string> older;
    for (const CheckpointFile& file : list_checkpoints(options_.dir)) {
      if (file.position < position) older.push_back(fs::path(file.path).filename().string());
    }
    const size_t keep_older = static_cast<size_t>(options_.keep - 1);
    for (size_t i = 0; i + keep_older < older.size(); ++i) {
      struct stat st {};
      if (::fstatat(dir.fd(), older[i].c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
          st.st_uid == ::geteuid()) {
        ::unlinkat(dir.fd(), older[i].c_str(), 0);
      }
    }
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

Restored Checkpointer::restore(std::vector<TrainedModule>& modules, const std::string& workload,
                               const std::string& optimizer_name, const std::string& labels) const {
  // Rank 0 chooses and reads, then broadcasts the status, the path and the file's bytes (or the error's
  // message), so every rank loads identical state and reaches the same verdict.
  Choice choice;
  if (comm_.is_root()) {
    try {
      choice = choose(options_, memory_root_, modules, workload, optimizer_name, labels, checkpoint_size_bound(modules));
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
  // Rank 0 checked the file while choosing it; every rank parses the bytes it was sent (rank 0 again:
  // its parse viewed the bytes it has just sent).
  std::unique_ptr<DecodedCheckpoint> decoded;
  try {
    decoded = std::make_unique<DecodedCheckpoint>(decode_checkpoint(parts[1], std::move(parts[2])));
  } catch (const DataError& e) {
    throw DataError("checkpoint '" + parts[1] + "' is unusable: " + e.message());
  }
  decoded->meta.from_memory = parts[3] == "1";
  check_owner(decoded->meta, workload, optimizer_name, labels);
  load_checkpoint_modules(*decoded, modules, workload);
  restored.checkpoint = std::move(decoded->meta);
  return restored;
}

int64_t Checkpointer::init_from(const std::string& path, std::vector<TrainedModule>& modules) const {
  std::vector<std::string> parts{"", ""};  // the file's bytes, or the error's message
  if (comm_.is_root()) {
    try {
      const fs::path file(path);
      const Directory dir = Directory::open(file.has_parent_path() ? file.parent_path().string() : ".", false);
      parts[0] = read_checkpoint_file(dir, file.filename().string(), checkpoint_size_bound(modules));
    } catch (const Error& e) {
      parts[1] = e.message().empty() ? "it cannot be read" : e.message();
    }
  }
  comm_.broadcast_bytes(parts, 0);
  const std::string where = "checkpoint.init_from '" + path + "': ";
  if (!parts[1].empty()) throw DataError(where + parts[1]);
  try {
    const SafetensorsFile file = parse_safetensors(parts[0]);
    const CheckpointLoad plan = plan_initial_weights(file, modules);
    apply_checkpoint_load(plan, modules);
    return static_cast<int64_t>(plan.tensors.size());
  } catch (const DataError& e) {
    throw DataError(where + e.message());
  }
}

}  // namespace dtrain
