#include "runtime/train/memory_copy.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>
#include <utility>

#include "runtime/util/error.h"
#include "runtime/util/file_io.h"

namespace dtrain {
namespace fs = std::filesystem;
namespace {

constexpr const char* kRunIdFile = "run_id";
constexpr const char* kOwnerFile = "owner";
// The owner file holds a magic line and a path (PATH_MAX is 4096).
constexpr size_t kOwnerFileMaxBytes = 8192;
// A run id file holds 32 hex digits and a newline; anything longer was not written by dtrain.
constexpr size_t kRunIdFileMaxBytes = 64;
constexpr size_t kRunIdDigits = 32;
constexpr size_t kPathHashDigits = 16;
// A sweep holds a copy's lock for as long as it takes to unlink a few files; a run that meets it waits.
constexpr auto kLockWait = std::chrono::seconds(5);

bool is_hex(const std::string& text, size_t digits) {
  return text.size() == digits &&
         std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string user_dir_name() { return "dtrain-" + std::to_string(::geteuid()); }

// Opens `name` in `parent_fd` as a directory only if it is a real directory (no link followed) owned by
// this user with mode 0700; with `create`, makes it so where it is missing. nullopt with `problem` set
// when it exists otherwise or cannot be made; nullopt with `problem` empty when it is merely absent.
std::optional<Directory> open_private_dir(int parent_fd, const std::string& name, const std::string& shown, bool create,
                                          std::string& problem) {
  problem.clear();
  bool created = false;
  if (create) {
    created = ::mkdirat(parent_fd, name.c_str(), 0700) == 0;
    if (!created && errno != EEXIST) {
      problem = "cannot create '" + shown + "': " + errno_text(errno);
      return std::nullopt;
    }
  }
  const int opened = ::openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (opened < 0) {
    const int code = errno;
    if (code == ENOENT) return std::nullopt;
    problem = code == ELOOP || code == ENOTDIR
                  ? "'" + shown + "' is a symbolic link or not a directory, which dtrain does not follow"
                  : "cannot open '" + shown + "': " + errno_text(code);
    return std::nullopt;
  }
  Directory dir = Directory::adopt(opened, shown);
  struct stat st {};
  if (::fstat(dir.fd(), &st) != 0) {
    problem = "cannot inspect '" + shown + "': " + errno_text(errno);
    return std::nullopt;
  }
  // A umask can only take bits away from 0700; where it did, the directory made here gets them back.
  if (created && (st.st_mode & 07777) != 0700 && ::fchmod(dir.fd(), 0700) == 0) st.st_mode = (st.st_mode & ~07777) | 0700;
  if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 07777) != 0700) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    problem = "'" + shown + "' is not a private directory of this user (owner uid " + std::to_string(st.st_uid) +
              ", mode " + mode + "; expected uid " + std::to_string(::geteuid()) +
              ", mode 0700): another user may have made it, so dtrain does not use it";
    return std::nullopt;
  }
  return dir;
}

// The names in the directory open as `dir_fd` (its descriptor stays open and positioned as it was).
std::vector<std::string> entries_of(int dir_fd) {
  std::vector<std::string> names;
  const int copy = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return names;
  DIR* dir = ::fdopendir(copy);
  if (dir == nullptr) {
    ::close(copy);
    return names;
  }
  ::rewinddir(dir);
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(dir);
  return names;
}

// A regular file of this user in `dir_fd` (not a link): its size, or -1.
int64_t own_file_size(int dir_fd, const std::string& name) {
  struct stat st {};
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
    return -1;
  }
  return static_cast<int64_t>(st.st_size);
}

// The content of a small regular file of this user in `dir`, or "" (missing, a link, another's, too big).
std::string read_own_small_file(const Directory& dir, const std::string& name) {
  if (own_file_size(dir.fd(), name) < 0) return "";
  try {
    return read_small_file(dir, name, kOwnerFileMaxBytes);
  } catch (const IoError&) {
    return "";
  }
}

// Removes the files of the run directory `name` in `user_fd`, then the directory. Adds what it freed.
void remove_run_dir(int user_fd, const std::string& name, int dir_fd, MemorySweep& sweep) {
  for (const std::string& file : entries_of(dir_fd)) {
    const int64_t size = own_file_size(dir_fd, file);
    if (size >= 0 && ::unlinkat(dir_fd, file.c_str(), 0) == 0) sweep.bytes_freed += static_cast<uint64_t>(size);
  }
  if (::unlinkat(user_fd, name.c_str(), AT_REMOVEDIR) == 0) ++sweep.copies_removed;
}

// The checkpoint directory as the copy's name and owner file spell it: absolute, links resolved.
std::string canonical_dir(const std::string& dir) {
  std::error_code ec;
  fs::path path = fs::weakly_canonical(fs::absolute(dir, ec), ec);
  if (ec) path = fs::absolute(dir).lexically_normal();
  return path.string();
}

// <16 hex digits naming the checkpoint directory>-<run id>.
std::string run_dir_name(const std::string& canonical_checkpoint_dir, const std::string& run_id) {
  // FNV-1a: a name that any build of dtrain derives alike from the same directory (std::hash need not).
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const char c : canonical_checkpoint_dir) hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  char name[kPathHashDigits + 1];
  std::snprintf(name, sizeof name, "%016llx", static_cast<unsigned long long>(hash));
  return std::string(name) + "-" + run_id;
}

// The run id of a run directory's name, or "".
std::string run_id_of_name(const std::string& name) {
  if (name.size() != kPathHashDigits + 1 + kRunIdDigits || name[kPathHashDigits] != '-' ||
      !is_hex(name.substr(0, kPathHashDigits), kPathHashDigits)) {
    return "";
  }
  const std::string id = name.substr(kPathHashDigits + 1);
  return is_hex(id, kRunIdDigits) ? id : "";
}

std::string owner_text(const std::string& canonical_checkpoint_dir) {
  return "dtrain-memory-copy 1\n" + canonical_checkpoint_dir + "\n";
}

// The checkpoint directory an owner file names, or "".
std::string owner_dir(const std::string& text) {
  const std::string magic = "dtrain-memory-copy 1\n";
  if (text.rfind(magic, 0) != 0 || text.size() <= magic.size() || text.back() != '\n') return "";
  return text.substr(magic.size(), text.size() - magic.size() - 1);
}

}  // namespace

std::string memory_root(const std::string& memory_dir) {
  if (memory_dir != "auto") return memory_dir;
  if (const char* runtime = std::getenv("XDG_RUNTIME_DIR"); runtime != nullptr && runtime[0] == '/') {
    struct stat st {};
    if (::lstat(runtime, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid() && (st.st_mode & 07777) == 0700) {
      return runtime;
    }
  }
  struct stat st {};
  return ::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "";
}

std::string checkpoint_run_id(const std::string& dir) {
  std::string text;
  try {
    text = read_small_file(Directory::open(dir, false), kRunIdFile, kRunIdFileMaxBytes);
  } catch (const IoError&) {
    // Missing (or the directory is): no run id. Anything else that is there is not dtrain's to take.
    struct stat st {};
    if (::lstat((fs::path(dir) / kRunIdFile).c_str(), &st) != 0 && errno == ENOENT) return "";
    throw;
  }
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return is_hex(text, kRunIdDigits) ? text : "";
}

std::string new_checkpoint_run_id(const std::string& dir) {
  std::random_device random;
  std::string id;
  while (id.size() < kRunIdDigits) {
    char digits[16];
    std::snprintf(digits, sizeof digits, "%08x", static_cast<unsigned>(random()));
    id += digits;
  }
  // Replaced by a rename: whatever was there under the name (a link, a FIFO) is not written through.
  write_file_atomically(Directory::open(dir, false), kRunIdFile, id + "\n");
  return id;
}

std::unique_ptr<MemoryCopy> MemoryCopy::open(const std::string& root, const std::string& checkpoint_dir, bool create,
                                             std::string& problem) {
  problem.clear();
  if (root.empty() || checkpoint_dir.empty()) return nullptr;
  std::string run_id;
  try {
    run_id = checkpoint_run_id(checkpoint_dir);
    if (run_id.empty()) {
      if (!create) return nullptr;
      run_id = new_checkpoint_run_id(checkpoint_dir);
    }
  } catch (const IoError& e) {
    problem = e.message();
    return nullptr;
  }
  const std::string user_path = (fs::path(root) / user_dir_name()).string();
  const std::string canonical = canonical_dir(checkpoint_dir);
  const std::string name = run_dir_name(canonical, run_id);
  const std::string path = user_path + "/" + name;
  if (create) {
    // The root is the user's choice (checkpoint.memory_dir); only what dtrain makes inside it must be private.
    std::error_code ec;
    fs::create_directories(root, ec);
  }
  // A sweep may remove the directory between this open and the lock: then it is opened (made) again.
  for (int attempt = 0; attempt < 3; ++attempt) {
    const std::optional<Directory> user = open_private_dir(AT_FDCWD, user_path, user_path, create, problem);
    if (!user) return nullptr;
    std::optional<Directory> dir = open_private_dir(user->fd(), name, path, create, problem);
    if (!dir) return nullptr;
    const auto deadline = std::chrono::steady_clock::now() + kLockWait;
    while (::flock(dir->fd(), LOCK_SH | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR) {
        problem = "cannot lock '" + path + "': " + errno_text(errno);
        return nullptr;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        problem = "'" + path + "' stayed locked by another dtrain for " + std::to_string(kLockWait.count()) + " s";
        return nullptr;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    struct stat st {};
    if (::fstat(dir->fd(), &st) != 0 || st.st_nlink == 0) continue;  // removed before the lock was taken
    const std::string owner = owner_text(canonical);
    if (read_own_small_file(*dir, kOwnerFile) != owner) {
      if (!create) return nullptr;  // not (yet) a copy of this directory's run
      try {
        write_file_atomically(*dir, kOwnerFile, owner, Durability::kReplaced, 0600);
      } catch (const IoError& e) {
        problem = e.what();
        return nullptr;
      }
    }
    return std::unique_ptr<MemoryCopy>(new MemoryCopy(std::move(*dir)));
  }
  problem = "'" + path + "' was removed while it was opened, three times";
  return nullptr;
}

MemoryCopy::~MemoryCopy() = default;

std::vector<CheckpointFile> MemoryCopy::list() const {
  std::vector<CheckpointFile> found;
  for (const std::string& name : entries_of(dir_.fd())) {
    std::optional<CheckpointPosition> position;
    try {
      position = checkpoint_position(name, dir_.shown(name));
    } catch (const DataError&) {
      continue;  // a name whose numbers no run reaches: not a file dtrain wrote
    }
    if (position && own_file_size(dir_.fd(), name) >= 0) {
      found.push_back({*position, dir_.shown(name), is_format4_checkpoint_name(name)});
    }
  }
  std::sort(found.begin(), found.end(), [](const CheckpointFile& a, const CheckpointFile& b) {
    return a.position != b.position ? a.position < b.position : a.path < b.path;
  });
  return found;
}

std::string MemoryCopy::read(const std::string& name, uint64_t max_bytes) const {
  if (own_file_size(dir_.fd(), name) < 0) throw IoError("'" + dir_.shown(name) + "' is not a file of this user");
  return read_checkpoint_file(dir_, name, max_bytes);
}

void MemoryCopy::replace(const std::string& name, const std::string& bytes) {
  write_file_atomically(dir_, name, bytes, Durability::kReplaced, 0600);
  for (const CheckpointFile& file : list()) {
    const std::string other = fs::path(file.path).filename().string();
    if (other != name) ::unlinkat(dir_.fd(), other.c_str(), 0);
  }
}

void MemoryCopy::remove() {
  for (const std::string& file : entries_of(dir_.fd())) {
    if (own_file_size(dir_.fd(), file) >= 0) ::unlinkat(dir_.fd(), file.c_str(), 0);
  }
  const fs::path path(dir_.path());
  std::string problem;
  const std::optional<Directory> user =
      open_private_dir(AT_FDCWD, path.parent_path().string(), path.parent_path().string(), false, problem);
  if (user) ::unlinkat(user->fd(), path.filename().c_str(), AT_REMOVEDIR);
}

std::string retire_memory_copy(const std::string& root, const std::string& checkpoint_dir) {
  std::string problem;
  const std::unique_ptr<MemoryCopy> copy = MemoryCopy::open(root, checkpoint_dir, false, problem);
  if (!copy) return "";
  const std::vector<CheckpointFile> in_memory = copy->list();
  std::vector<CheckpointFile> on_disk;
  try {
    on_disk = list_checkpoints(checkpoint_dir);
  } catch (const DataError&) {
  }
  if (!in_memory.empty() && (on_disk.empty() || on_disk.back().position < in_memory.back().position)) {
    return "the newest checkpoint (" + position_text(in_memory.back().position) + ") is only in this node's memory, " +
           in_memory.back().path + ", not on disk; it is kept: --resume on this node continues from it";
  }
  copy->remove();
  return "";
}

MemorySweep sweep_memory_copies(const std::string& root, SweepScope scope) {
  MemorySweep sweep;
  if (root.empty()) return sweep;
  const std::string user_path = (fs::path(root) / user_dir_name()).string();
  const std::optional<Directory> user = open_private_dir(AT_FDCWD, user_path, user_path, false, sweep.problem);
  if (!user) return sweep;
  for (const std::string& name : entries_of(user->fd())) {
    const std::string run_id = run_id_of_name(name);
    if (run_id.empty()) continue;  // not a run directory of dtrain's
    std::string problem;
    const std::optional<Directory> dir = open_private_dir(user->fd(), name, user_path + "/" + name, false, problem);
    if (!dir) continue;
    if (::flock(dir->fd(), LOCK_EX | LOCK_NB) != 0) continue;  // a live run holds it
    const std::string checkpoint_dir = owner_dir(read_own_small_file(*dir, kOwnerFile));
    // Gone for good only when the checkpoint directory is missing or holds another run: a directory that
    // cannot be read now (a network filesystem's hiccup) keeps its copy.
    std::error_code ec;
    const bool exists = !checkpoint_dir.empty() && fs::exists(checkpoint_dir, ec);
    const bool missing = checkpoint_dir.empty() || (!exists && !ec);
    // A run id that is not one dtrain wrote (a link, a FIFO, a huge file) is not this copy's run either.
    std::string disk_run_id;
    try {
      if (exists) disk_run_id = checkpoint_run_id(checkpoint_dir);
    } catch (const IoError&) {
    }
    if (missing || (exists && disk_run_id != run_id)) {
      remove_run_dir(user->fd(), name, dir->fd(), sweep);
      continue;
    }
    std::optional<CheckpointPosition> disk_newest;
    try {
      const std::vector<CheckpointFile> on_disk = list_checkpoints(checkpoint_dir);
      if (!on_disk.empty()) disk_newest = on_disk.back().position;
    } catch (const DataError&) {
    }
    int kept = 0;
    for (const std::string& file : entries_of(dir->fd())) {
      std::optional<CheckpointPosition> position;
      try {
        position = checkpoint_position(file, file);
      } catch (const DataError&) {
      }
      // kUnneeded also takes what the disk holds as well (the same position).
      const bool on_disk = position && disk_newest &&
                           (*position < *disk_newest || (scope == SweepScope::kUnneeded && *position == *disk_newest));
      const int64_t size = own_file_size(dir->fd(), file);
      if ((is_partial_checkpoint(file) || on_disk) && size >= 0 && ::unlinkat(dir->fd(), file.c_str(), 0) == 0) {
        ++sweep.files_removed;
        sweep.bytes_freed += static_cast<uint64_t>(size);
      } else if (position) {
        ++kept;
        if (scope == SweepScope::kUnneeded) sweep.kept_ahead.push_back(user_path + "/" + name + "/" + file);
      }
    }
    if (kept == 0) remove_run_dir(user->fd(), name, dir->fd(), sweep);
  }
  return sweep;
}

}  // namespace dtrain
