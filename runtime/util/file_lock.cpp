#include "runtime/util/file_lock.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>

#include "runtime/util/error.h"
#include "runtime/util/file_io.h"
#include "runtime/util/timer.h"

namespace dtrain {
namespace {

std::string this_host();

std::string holder_text() {
  return "pid " + std::to_string(::getpid()) + " on " + this_host() + " since " + utc_timestamp(std::time(nullptr));
}

std::string read_holder(int fd) {
  char text[512];
  const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  if (n <= 0) return "";
  std::string holder(text, static_cast<size_t>(n));
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\0')) holder.pop_back();
  return holder;
}

// The pid of the process of this host that holds a flock on the file open as `fd`, from the kernel's
// lock table (/proc/locks: "1: FLOCK  ADVISORY  WRITE 4242 08:01:131 0 EOF", devices in hex), or 0.
pid_t flock_holder(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return 0;
  std::ifstream locks("/proc/locks");
  for (std::string line; std::getline(locks, line);) {
    std::istringstream fields(line);
    std::string id, type, mode, access, device;
    long pid = 0;
    if (!(fields >> id >> type) || type == "->" || type != "FLOCK") continue;  // "->": a waiter
    if (!(fields >> mode >> access >> pid >> device)) continue;
    unsigned major_id = 0, minor_id = 0;
    unsigned long long inode = 0;
    if (std::sscanf(device.c_str(), "%x:%x:%llu", &major_id, &minor_id, &inode) != 3) continue;
    if (major_id == major(st.st_dev) && minor_id == minor(st.st_dev) && inode == st.st_ino && pid > 0) {
      return static_cast<pid_t>(pid);
    }
  }
  return 0;
}

std::string this_host() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return host;
}

// The command name of process `pid` ("" when it cannot be read).
std::string command_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

// Who holds the lock of the file open as `fd`: what its text names, checked against this host's lock table.
std::string describe_holder(int fd) {
  const std::string text = read_holder(fd);
  long named = 0;
  char host[256] = {};
  const bool parsed = std::sscanf(text.c_str(), "pid %ld on %255s", &named, host) == 2;
  const bool here = parsed && host == this_host();
  const bool named_alive = here && (::kill(static_cast<pid_t>(named), 0) == 0 || errno == EPERM);
  const pid_t actual = flock_holder(fd);
  if (actual > 0 && !(here && actual == named)) {
    const std::string command = command_of(actual);
    const std::string who = "pid " + std::to_string(actual) + (command.empty() ? "" : ", " + command);
    const std::string claim = text.empty() ? "" : "; the lock file names " + text + (here && !named_alive ? ", no longer running" : "");
    return (command == "dtrain" ? "another dtrain (" : "another program (") + who + claim + ")";
  }
  if (here && !named_alive) {
    return "another process (the lock file names " + text + ", no longer running: another program holds the lock; "
           "`fuser -v` on the lock file names it)";
  }
  return text.empty() ? "another process" : "another dtrain (" + text + ")";
}

}  // namespace

std::unique_ptr<DirectoryLock> DirectoryLock::try_lock(const Directory& dir, double wait_s, std::string& holder) {
  const std::string path = dir.shown(kFileName);
  // O_NOFOLLOW: a link planted under the name is never opened (its target would be truncated to the
  // holder's text); O_NONBLOCK: nor is a FIFO waited on. Another user's lock file in a shared directory
  // is opened read-only: flock needs no more.
  constexpr int kFlags = O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
  int fd = ::openat(dir.fd(), kFileName, O_RDWR | O_CREAT | kFlags, 0644);
  if (fd < 0 && errno == EACCES) fd = ::openat(dir.fd(), kFileName, O_RDONLY | kFlags);
  if (fd < 0) {
    if (errno == ELOOP) throw IoError("the lock file '" + path + "' is a symbolic link, which dtrain does not follow; remove it");
    throw IoError("cannot create the lock file '" + path + "': " + errno_text(errno));
  }
  struct stat st {};
  std::string problem;
  if (::fstat(fd, &st) != 0) {
    problem = "cannot inspect the lock file '" + path + "': " + errno_text(errno);
  } else if (!S_ISREG(st.st_mode)) {
    problem = "the lock file '" + path + "' is " + file_kind(st.st_mode) + ", not a regular file; remove it";
  } else if (st.st_nlink != 1) {
    problem = "the lock file '" + path + "' has " + std::to_string(st.st_nlink) +
              " names (a hard link to another file), so dtrain does not use it; remove it";
  }
  if (!problem.empty()) {
    ::close(fd);
    throw IoError(problem);
  }
  const bool own = st.st_uid == ::geteuid();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  for (;;) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) break;
    const int code = errno;
    if (code == EINTR) continue;
    if (code != EWOULDBLOCK) {
      ::close(fd);
      throw IoError("cannot lock '" + path + "': " + errno_text(code));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      holder = describe_holder(fd);
      ::close(fd);
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  // Best effort: on a full disk the lock holds all the same, only its holder goes unnamed. Another
  // user's lock file keeps the text it has.
  const std::string text = holder_text() + "\n";
  if (own && ::ftruncate(fd, 0) == 0) {
    [[maybe_unused]] const ssize_t written = ::pwrite(fd, text.data(), text.size(), 0);
  }
  return std::unique_ptr<DirectoryLock>(new DirectoryLock(fd));
}

DirectoryLock::~DirectoryLock() { ::close(fd_); }  // closing the last descriptor releases the flock

}  // namespace dtrain
