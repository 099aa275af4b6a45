#include "runtime/util/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

#include "runtime/util/error.h"

namespace dtrain {
namespace fs = std::filesystem;
namespace {

[[noreturn]] void throw_io(const std::string& what, const std::string& path, int code) {
  throw IoError("cannot " + what + " '" + path + "': " + errno_text(code));
}

// write(2) until everything is written; a short write is retried, a failed one reported with errno.
void write_all(int fd, const std::string& bytes, const std::string& path) {
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_io("write", path, errno);
    }
    written += static_cast<size_t>(n);
  }
}

// The temporary files being written, for unlink_files_being_written() in a signal handler: fixed slots
// of plain memory (a handler may not allocate or lock). A slot is claimed (kClaimed), filled, published
// (kReady) and released; the handler unlinks only published names. More concurrent writes than slots
// (the checkpoint writer, the memory copy and a few small notes are the most dtrain has at once) go
// unregistered and may leave their `.tmp` on an abrupt exit.
constexpr int kFree = 0;
constexpr int kClaimed = 1;
constexpr int kReady = 2;
struct TempSlot {
  std::atomic<int> state{kFree};
  int dir_fd = AT_FDCWD;  // `name` is relative to it
  char name[NAME_MAX + 1];
};
std::array<TempSlot, 8> temp_slots;

// The random part of a temporary's name: 12 hex digits, so that nobody can plant a file or a link under
// the name a write will use (the write would fail on it rather than follow it; with O_EXCL it cannot).
std::string random_hex12() {
  thread_local std::mt19937_64 generator{[] {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device();
  }()};
  char text[16];
  std::snprintf(text, sizeof text, "%012llx", static_cast<unsigned long long>(generator() & 0xffffffffffffULL));
  return text;
}

constexpr const char* kTempSuffix = ".tmp";
constexpr size_t kTempRandomDigits = 12;

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Opens `name` in `dir` for appending (see AppendFile). Returns the descriptor.
int open_append(int dir_fd, const std::string& name, const std::string& shown) {
  // O_NONBLOCK: a FIFO planted under the name is refused below instead of blocking the open.
  const int fd = ::openat(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int code = errno;
    if (code == ELOOP) throw IoError("'" + shown + "' is a symbolic link, which dtrain does not follow; remove it");
    if (code == ENXIO) throw IoError("'" + shown + "' is a FIFO, not a regular file; remove it");
    throw_io("open", shown, code);
  }
  struct stat st {};
  std::string problem;
  if (::fstat(fd, &st) != 0) {
    problem = "cannot inspect '" + shown + "': " + errno_text(errno);
  } else if (!S_ISREG(st.st_mode)) {
    problem = "'" + shown + "' is " + file_kind(st.st_mode) + ", not a regular file; remove it";
  } else if (st.st_uid != ::geteuid()) {
    problem = "'" + shown + "' belongs to uid " + std::to_string(st.st_uid) + ", not to this user (uid " +
              std::to_string(::geteuid()) + "): another user made it, so dtrain does not append to it";
  } else if (st.st_nlink != 1) {
    problem = "'" + shown + "' has " + std::to_string(st.st_nlink) +
              " names (a hard link to another file), so dtrain does not append to it; remove it";
  } else if (::fcntl(fd, F_SETFL, O_WRONLY | O_APPEND) != 0) {
    problem = "cannot open '" + shown + "': " + errno_text(errno);
  }
  if (!problem.empty()) {
    ::close(fd);
    throw IoError(problem);
  }
  return fd;
}

}  // namespace

PendingFile::PendingFile(int dir_fd, const std::string& name) {
  if (name.size() > NAME_MAX) return;
  for (TempSlot& slot : temp_slots) {
    int expected = kFree;
    if (!slot.state.compare_exchange_strong(expected, kClaimed)) continue;
    slot.dir_fd = dir_fd;
    std::memcpy(slot.name, name.c_str(), name.size() + 1);
    slot.state.store(kReady);
    slot_ = &slot;
    return;
  }
}

PendingFile::~PendingFile() {
  if (slot_ != nullptr) static_cast<TempSlot*>(slot_)->state.store(kFree);
}

void unlink_files_being_written() noexcept {
  for (TempSlot& slot : temp_slots) {
    if (slot.state.load() == kReady) ::unlinkat(slot.dir_fd, slot.name, 0);
  }
}

std::string errno_text(int code) { return std::strerror(code); }

std::string file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string read_fd(int fd, const std::string& shown, size_t max_bytes) {
  std::string bytes;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_io("read", shown, errno);
    if (n == 0) break;
    if (static_cast<size_t>(n) > max_bytes - bytes.size()) {
      throw IoError("'" + shown + "' holds more than the " + std::to_string(max_bytes) + " bytes expected of it");
    }
    bytes.append(buffer, static_cast<size_t>(n));
  }
  return bytes;
}

std::string read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_io("open", path, errno);
  try {
    std::string bytes = read_fd(fd, path);
    ::close(fd);
    return bytes;
  } catch (...) {
    ::close(fd);
    throw;
  }
}

std::string read_small_file(const Directory& dir, const std::string& name, size_t max_bytes) {
  const std::string shown = dir.shown(name);
  const int fd = ::openat(dir.fd(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int code = errno;
    if (code == ELOOP) throw IoError("'" + shown + "' is a symbolic link, which dtrain does not follow");
    throw_io("open", shown, code);
  }
  try {
    struct stat st {};
    if (::fstat(fd, &st) != 0) throw_io("inspect", shown, errno);
    if (!S_ISREG(st.st_mode)) throw IoError("'" + shown + "' is " + file_kind(st.st_mode) + ", not a regular file");
    if (static_cast<uint64_t>(st.st_size) > max_bytes) {
      throw IoError("'" + shown + "' holds " + std::to_string(st.st_size) + " bytes, more than the " +
                    std::to_string(max_bytes) + " that such a file holds");
    }
    std::string bytes = read_fd(fd, shown, max_bytes);  // bounded again: the file may grow meanwhile
    ::close(fd);
    return bytes;
  } catch (...) {
    ::close(fd);
    throw;
  }
}

bool is_temporary_of(const std::string& name, const std::string& target) {
  const size_t tail = 1 + kTempRandomDigits + std::strlen(kTempSuffix);  // ".<hex>.tmp"
  if (name.size() <= tail || !ends_with(name, kTempSuffix) || name[name.size() - tail] != '.') return false;
  for (size_t i = name.size() - tail + 1; i < name.size() - std::strlen(kTempSuffix); ++i) {
    const char c = name[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return target.empty() || name.compare(0, name.size() - tail, target) == 0;
}

void write_file_atomically(const Directory& dir, const std::string& name, const std::string& bytes, Durability durability,
                           mode_t mode) {
  const bool sync = durability == Durability::kSynced;
  const std::string shown = dir.shown(name);
  // Exclusive, no link followed, under a name nobody could guess: nothing planted is written through.
  std::string temp;
  int fd = -1;
  for (int attempt = 0; attempt < 4 && fd < 0; ++attempt) {
    temp = name + "." + random_hex12() + kTempSuffix;
    fd = ::openat(dir.fd(), temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) throw_io("create a file in", dir.path(), errno);
  const PendingFile pending(dir.fd(), temp);
  try {
    write_all(fd, bytes, shown);
    // The data must be on disk before the rename makes it the file of record; on filesystems with
    // delayed allocation a full disk shows up only here.
    if (sync && ::fsync(fd) != 0) throw_io("write", shown, errno);
  } catch (...) {
    ::close(fd);
    ::unlinkat(dir.fd(), temp.c_str(), 0);
    throw;
  }
  if (::close(fd) != 0) {
    const int code = errno;
    ::unlinkat(dir.fd(), temp.c_str(), 0);
    throw_io("write", shown, code);
  }
  // rename(2) replaces whatever `name` is (a link, a FIFO) without following it; a directory refuses.
  if (::renameat(dir.fd(), temp.c_str(), dir.fd(), name.c_str()) != 0) {
    const int code = errno;
    ::unlinkat(dir.fd(), temp.c_str(), 0);
    if (code == EISDIR || code == ENOTEMPTY || code == EEXIST) {
      throw IoError("cannot write '" + shown + "': a directory of that name is in the way; rename or remove it");
    }
    throw_io("write", shown, code);
  }
  // A directory that cannot be synced only loses durability: the rename is done.
  if (sync) ::fsync(dir.fd());
}

void write_file_atomically(const std::string& path, const std::string& bytes, Durability durability) {
  const fs::path p(path);
  const std::string parent = p.parent_path().empty() ? "." : p.parent_path().string();
  write_file_atomically(Directory::open(parent, false), p.filename().string(), bytes, durability);
}

AppendFile::AppendFile(const Directory& dir, const std::string& name) : path_(dir.shown(name)) {
  fd_ = open_append(dir.fd(), name, path_);
}

AppendFile::AppendFile(std::string path) : path_(std::move(path)) {
  const fs::path p(path_);
  const Directory dir = Directory::open(p.parent_path().empty() ? "." : p.parent_path().string(), false);
  fd_ = open_append(dir.fd(), p.filename().string(), path_);
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

void AppendFile::append(const std::string& text) { write_all(fd_, text, path_); }

void AppendFile::sync() {
  if (::fsync(fd_) != 0) throw_io("write", path_, errno);
}

void check_output_directory(const std::string& dir, const std::string& key) {
  const std::string subject = key + " '" + dir + "'";
  std::error_code ec;
  // The directory, or the nearest ancestor that exists (where it would be created).
  fs::path existing = fs::absolute(dir, ec);
  while (!fs::exists(fs::symlink_status(existing, ec)) && existing.has_relative_path()) existing = existing.parent_path();
  if (!fs::is_directory(existing, ec)) {
    if (existing == fs::absolute(dir, ec)) throw ConfigError(subject + " exists but is not a directory; give a directory path");
    throw ConfigError("cannot create " + subject + ": '" + existing.string() + "' is not a directory");
  }
  // Permission bits are not the answer for root or on read-only mounts: create a file and remove it
  // (exclusively, under a random name, so nothing planted is touched).
  const std::string probe = (existing / (".dtrain-write-test-" + random_hex12())).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    const std::string reason = errno_text(errno);
    if (existing == fs::absolute(dir, ec)) throw ConfigError("cannot create files in " + subject + ": " + reason);
    throw ConfigError("cannot create " + subject + " in '" + existing.string() + "': " + reason);
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace dtrain
