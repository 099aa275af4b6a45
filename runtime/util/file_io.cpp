#include "runtime/util/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>

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

void sync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;  // the rename is done; a directory that cannot be opened only loses durability
  ::fsync(fd);
  ::close(fd);
}

// The temporary files being written, for unlink_files_being_written() in a signal handler: fixed slots
// of plain memory (a handler may not allocate or lock). A slot is claimed (kClaimed), filled, published
// (kReady) and released; the handler unlinks only published paths. More concurrent writes than slots
// (the checkpoint writer, the memory copy and a few small notes are the most dtrain has at once) go
// unregistered and may leave their `.tmp` on an abrupt exit, as before.
constexpr int kFree = 0;
constexpr int kClaimed = 1;
constexpr int kReady = 2;
struct TempSlot {
  std::atomic<int> state{kFree};
  int dir_fd = AT_FDCWD;  // `path` is relative to it (a private directory's descriptor), or a path
  char path[PATH_MAX];
};
std::array<TempSlot, 8> temp_slots;

// Registers `temp` (in directory `dir_fd`) for the lifetime of the object.
class TempRegistration final {
 public:
  explicit TempRegistration(const std::string& temp, int dir_fd = AT_FDCWD) {
    if (temp.size() >= PATH_MAX) return;
    for (TempSlot& slot : temp_slots) {
      int expected = kFree;
      if (!slot.state.compare_exchange_strong(expected, kClaimed)) continue;
      slot.dir_fd = dir_fd;
      std::memcpy(slot.path, temp.c_str(), temp.size() + 1);
      slot.state.store(kReady);
      slot_ = &slot;
      return;
    }
  }
  ~TempRegistration() {
    if (slot_ != nullptr) slot_->state.store(kFree);
  }
  TempRegistration(const TempRegistration&) = delete;
  TempRegistration& operator=(const TempRegistration&) = delete;

 private:
  TempSlot* slot_ = nullptr;
};

}  // namespace

void unlink_files_being_written() noexcept {
  for (TempSlot& slot : temp_slots) {
    if (slot.state.load() == kReady) ::unlinkat(slot.dir_fd, slot.path, 0);
  }
}

std::string errno_text(int code) { return std::strerror(code); }

std::string read_fd(int fd, const std::string& shown) {
  std::string bytes;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_io("read", shown, errno);
    if (n == 0) break;
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

void write_file_atomically(const std::string& path, const std::string& bytes, Durability durability) {
  const bool sync = durability == Durability::kSynced;
  const std::string temp = path + ".tmp";
  const TempRegistration registration(temp);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_io("create", temp, errno);
  try {
    write_all(fd, bytes, temp);
    // The data must be on disk before the rename makes it the file of record; on filesystems with
    // delayed allocation a full disk shows up only here.
    if (sync && ::fsync(fd) != 0) throw_io("write", temp, errno);
  } catch (...) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    const int code = errno;
    ::unlink(temp.c_str());
    throw_io("write", temp, code);
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int code = errno;
    ::unlink(temp.c_str());
    throw IoError("cannot rename '" + temp + "' to '" + path + "': " + errno_text(code));
  }
  if (sync) sync_directory(fs::path(path).parent_path().empty() ? "." : fs::path(path).parent_path().string());
}

void write_private_file_at(int dir_fd, const std::string& name, const std::string& bytes, const std::string& shown) {
  const std::string temp = name + ".tmp";
  const std::string shown_temp = shown + ".tmp";
  const TempRegistration registration(temp, dir_fd);
  constexpr int kFlags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = ::openat(dir_fd, temp.c_str(), kFlags, 0600);
  if (fd < 0 && errno == EEXIST) {
    // A write killed before its rename: the directory is this process's own, so the file is too.
    ::unlinkat(dir_fd, temp.c_str(), 0);
    fd = ::openat(dir_fd, temp.c_str(), kFlags, 0600);
  }
  if (fd < 0) throw_io("create", shown_temp, errno);
  try {
    write_all(fd, bytes, shown_temp);
  } catch (...) {
    ::close(fd);
    ::unlinkat(dir_fd, temp.c_str(), 0);
    throw;
  }
  if (::close(fd) != 0) {
    const int code = errno;
    ::unlinkat(dir_fd, temp.c_str(), 0);
    throw_io("write", shown_temp, code);
  }
  if (::renameat(dir_fd, temp.c_str(), dir_fd, name.c_str()) != 0) {
    const int code = errno;
    ::unlinkat(dir_fd, temp.c_str(), 0);
    throw IoError("cannot rename '" + shown_temp + "' to '" + shown + "': " + errno_text(code));
  }
}

AppendFile::AppendFile(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw_io("open", path_, errno);
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
  // Permission bits are not the answer for root or on read-only mounts: create a file and remove it.
  const std::string probe = (existing / (".dtrain-write-test-" + std::to_string(::getpid()))).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    const std::string reason = errno_text(errno);
    if (existing == fs::absolute(dir, ec)) throw ConfigError("cannot create files in " + subject + ": " + reason);
    throw ConfigError("cannot create " + subject + " in '" + existing.string() + "': " + reason);
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace dtrain
