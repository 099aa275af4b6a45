#include "runtime/util/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <thread>

#include "runtime/util/error.h"
#include "runtime/util/file_io.h"
#include "runtime/util/timer.h"

namespace dtrain {
namespace {

std::string holder_text() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return "pid " + std::to_string(::getpid()) + " on " + host + " since " + utc_timestamp(std::time(nullptr));
}

std::string read_holder(int fd) {
  char text[512];
  const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  if (n <= 0) return "";
  std::string holder(text, static_cast<size_t>(n));
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\0')) holder.pop_back();
  return holder;
}

}  // namespace

std::unique_ptr<DirectoryLock> DirectoryLock::try_lock(const std::string& dir, double wait_s, std::string& holder) {
  const std::string path = dir + "/" + kFileName;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError("cannot create the lock file '" + path + "': " + errno_text(errno));
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
      holder = read_holder(fd);
      ::close(fd);
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  // Best effort: on a full disk the lock holds all the same, only its holder goes unnamed.
  const std::string text = holder_text() + "\n";
  if (::ftruncate(fd, 0) == 0) {
    [[maybe_unused]] const ssize_t written = ::pwrite(fd, text.data(), text.size(), 0);
  }
  return std::unique_ptr<DirectoryLock>(new DirectoryLock(fd));
}

DirectoryLock::~DirectoryLock() { ::close(fd_); }  // closing the last descriptor releases the flock

}  // namespace dtrain
