#include "runtime/train/checkpoint_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "runtime/checkpoint/safetensors.h"
#include "runtime/util/error.h"
#include "runtime/util/file_io.h"

namespace dtrain {
namespace fs = std::filesystem;
namespace {

constexpr const char* kPrefix = "checkpoint-epoch-";
constexpr const char* kStep = "-step-";
constexpr const char* kSuffix = ".safetensors";
constexpr const char* kFormat4Suffix = ".pt";  // dtrain 0.1's LibTorch archives: named, never read
constexpr const char* kPartialSuffix = ".pt.tmp";  // dtrain before 0.9's temporaries
constexpr const char* kProgressFile = "progress";
// "dtrain-progress 1" and three numbers: far less than this.
constexpr size_t kProgressFileMaxBytes = 256;

// A decimal number filling [first, last), or nullopt; throws DataError when it overflows.
std::optional<int64_t> name_number(const char* first, const char* last, const std::string& where, const char* what) {
  if (first == last || !std::all_of(first, last, [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  int64_t value = 0;
  const auto [ptr, err] = std::from_chars(first, last, value);
  if (err != std::errc() || ptr != last) {
    throw DataError("checkpoint file '" + where + "' has " + what + " too large for any run; rename or remove it");
  }
  return value;
}

bool has_suffix(const std::string& name, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return name.size() > n && name.compare(name.size() - n, n, suffix) == 0;
}

}  // namespace

std::string position_text(const CheckpointPosition& position) {
  return "epoch " + std::to_string(position.first) +
         (position.second == kEpochEndSteps ? std::string(" (its end)") : ", step " + std::to_string(position.second));
}

std::string checkpoint_file_name(const CheckpointPosition& position) {
  char name[96];
  if (position.second == kEpochEndSteps) {
    std::snprintf(name, sizeof name, "%s%06lld%s", kPrefix, static_cast<long long>(position.first), kSuffix);
  } else {
    std::snprintf(name, sizeof name, "%s%06lld%s%08lld%s", kPrefix, static_cast<long long>(position.first), kStep,
                  static_cast<long long>(position.second), kSuffix);
  }
  return name;
}

std::optional<CheckpointPosition> checkpoint_position(const std::string& name, const std::string& where) {
  const size_t prefix = std::strlen(kPrefix);
  const char* suffix = has_suffix(name, kSuffix) ? kSuffix : has_suffix(name, kFormat4Suffix) ? kFormat4Suffix : nullptr;
  if (suffix == nullptr || name.size() <= prefix + std::strlen(suffix) || name.compare(0, prefix, kPrefix) != 0) {
    return std::nullopt;
  }
  const char* first = name.data() + prefix;
  const char* last = name.data() + name.size() - std::strlen(suffix);
  const char* step = std::search(first, last, kStep, kStep + std::strlen(kStep));
  const std::optional<int64_t> epoch = name_number(first, step, where, "an epoch number");
  if (!epoch) return std::nullopt;
  if (step == last) return CheckpointPosition{*epoch, kEpochEndSteps};
  const std::optional<int64_t> steps = name_number(step + std::strlen(kStep), last, where, "a step number");
  if (!steps) return std::nullopt;
  return CheckpointPosition{*epoch, *steps};
}

bool is_format4_checkpoint_name(const std::string& name) { return has_suffix(name, kFormat4Suffix); }

bool is_partial_checkpoint(const std::string& name) {
  return name.rfind(kPrefix, 0) == 0 && (has_suffix(name, kPartialSuffix) || is_temporary_of(name));
}

std::vector<CheckpointFile> list_checkpoints(const std::string& dir) {
  std::vector<CheckpointFile> found;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return found;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    // The entry itself, not what a link names: a link is never a checkpoint.
    if (!entry.is_regular_file(ec) || entry.is_symlink(ec)) continue;
    const std::string path = entry.path().string();
    if (const std::optional<CheckpointPosition> position = checkpoint_position(entry.path().filename().string(), path)) {
      found.push_back({*position, path, is_format4_checkpoint_name(path)});
    }
  }
  std::sort(found.begin(), found.end(), [](const CheckpointFile& a, const CheckpointFile& b) {
    // At one position a converted file (format 5) counts as newer than the archive it came from.
    return a.position != b.position ? a.position < b.position
                                    : a.format4 != b.format4 ? a.format4 : a.path < b.path;
  });
  return found;
}

std::optional<std::string> latest_checkpoint(const std::string& dir) {
  const std::vector<CheckpointFile> found = list_checkpoints(dir);
  if (found.empty()) return std::nullopt;
  return found.back().path;
}

std::vector<CheckpointNameClash> checkpoint_name_clashes(const std::string& dir) {
  std::vector<CheckpointNameClash> clashes;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    std::optional<CheckpointPosition> position;
    try {
      position = checkpoint_position(name, entry.path().string());
    } catch (const DataError&) {
    }
    if (!position && !is_partial_checkpoint(name)) continue;
    struct stat st {};
    if (::lstat(entry.path().c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
      clashes.push_back({entry.path().string(), file_kind(st.st_mode), S_ISDIR(st.st_mode)});
    }
  }
  std::sort(clashes.begin(), clashes.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  return clashes;
}

std::string read_checkpoint_file(const Directory& dir, const std::string& name, uint64_t max_bytes) {
  const std::string shown = dir.shown(name);
  const int fd = ::openat(dir.fd(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int code = errno;
    if (code == ELOOP) throw DataError("it is a symbolic link, which dtrain does not follow");
    throw IoError("cannot open '" + shown + "': " + errno_text(code));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw IoError("cannot inspect '" + shown + "': " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) throw DataError("it is " + file_kind(st.st_mode) + ", not a regular file");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    throw DataError("it holds " + std::to_string(size) + " bytes, more than the " + std::to_string(max_bytes) +
                    " that this run's model and optimizer state can take in a checkpoint");
  }
  // The header's length first: a file that is not one (a sparse file of zeros, another format) is
  // refused after reading 8 bytes of it, not all of it.
  std::string head(static_cast<size_t>(std::min<uint64_t>(size, 8)), '\0');
  size_t got = 0;
  while (got < head.size()) {
    const ssize_t n = ::pread(fd, head.data() + got, head.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw IoError("cannot read '" + shown + "': " + errno_text(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  const std::string problem = got == head.size() ? safetensors_size_problem(head, size) : "it was cut short while it was read";
  if (!problem.empty()) throw DataError(problem);
  return read_fd(fd, shown, static_cast<size_t>(max_bytes));
}

int remove_partial_checkpoints(const std::string& dir) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!is_partial_checkpoint(entry.path().filename().string())) continue;
    // Only what this user wrote: in a directory shared with others, their files are theirs.
    struct stat st {};
    if (::lstat(entry.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) continue;
    if (::unlink(entry.path().c_str()) == 0) ++removed;
  }
  return removed;
}

void write_progress_mark(const std::string& dir, const ProgressMark& mark) {
  std::ostringstream text;
  text.precision(17);
  text << "dtrain-progress 1\n" << mark.epoch << " " << mark.epoch_samples << " " << mark.unix_s << "\n";
  try {
    // Rewritten at every progress line: replaced atomically, not synced (it costs microseconds, an fsync
    // milliseconds); a power loss can only make it older.
    write_file_atomically(Directory::open(dir, true), kProgressFile, text.str(), Durability::kReplaced);
  } catch (const IoError&) {
  }
}

std::optional<ProgressMark> read_progress_mark(const std::string& dir) {
  std::istringstream in;
  try {
    in.str(read_small_file(Directory::open(dir, false), kProgressFile, kProgressFileMaxBytes));
  } catch (const IoError&) {
    return std::nullopt;
  }
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

}  // namespace dtrain
