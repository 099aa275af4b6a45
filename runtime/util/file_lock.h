// An exclusive lock on a directory that only one dtrain may use at a time (a run's directory, a shared
// checkpoint directory), so that two runs never write into one. flock(2) on a file in it: the kernel
// releases the lock when its holder exits, however it dies, so a crashed run never leaves a stale lock
// behind. The file also names its holder, for the message another run gets.
#pragma once

#include <memory>
#include <string>

#include "runtime/util/directory.h"

namespace dtrain {

class DirectoryLock final {
 public:
  // Locks `dir` through <dir>/.dtrain.lock, trying for up to `wait_s` seconds when
  // another process holds it. Returns nullptr when it is still held then, with `holder` saying who does:
  // "another dtrain (pid 4242 on node-1 since 2026-11-24T10:00:00Z)" as the lock file names it; where the
  // kernel's lock table (/proc/locks) shows another process of this host holding it, that one,
  // "another program (pid 777, flock; the lock file names pid 4242 on node-1 since ..., no longer
  // running)", since any process can take the lock (a copy of the directory's tools, a leftover child);
  // "another process" when nothing names it. The lock file is opened without following a link or
  // blocking on a FIFO, and used only while it is a regular file with one name; it is written (the
  // holder's text) only when it is this user's: in a shared directory, another user's lock file is
  // locked as it is. Throws IoError when the lock file cannot be created, used or locked at all.
  static std::unique_ptr<DirectoryLock> try_lock(const Directory& dir, double wait_s, std::string& holder);

  ~DirectoryLock();  // releases the lock
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

  static constexpr const char* kFileName = ".dtrain.lock";

 private:
  explicit DirectoryLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace dtrain
