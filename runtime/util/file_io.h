// Checked file output for everything a run leaves behind (run logs, configs, results, checkpoints):
// every failure throws IoError naming the path and the system's reason, and nothing half-written is
// left under a final name. Also the start-up check that an output directory is usable.
#pragma once

#include <string>

namespace dtrain {

// The system's text for an errno value, e.g. "No space left on device".
std::string errno_text(int code);

// The whole content of `path`. Throws IoError naming the path and the reason.
std::string read_file(const std::string& path);
// The rest of the file open as `fd` (which stays open); `shown` is the path messages name.
std::string read_fd(int fd, const std::string& shown);

// kSynced: on disk when the call returns (fsync of the file and its directory), for what a run must not
// lose; kReplaced: only atomically replaced, for small notes rewritten often, which a power loss may take
// back to an older version.
enum class Durability { kSynced, kReplaced };

// Writes `bytes` to `path` through `<path>.tmp`: write, fsync, rename, fsync of the directory (the
// fsyncs only when kSynced). A crash leaves the old file or the new one, never a mix; on failure the
// temporary file is removed and IoError says what failed ("cannot write '<path>.tmp': No space left on
// device").
void write_file_atomically(const std::string& path, const std::string& bytes,
                           Durability durability = Durability::kSynced);

// Writes `bytes` to `name` in the directory open as `dir_fd` through `<name>.tmp`, created exclusively
// with mode 0600 and without following a link (a `.tmp` already there, left by a killed write, is removed
// first), then renamed; no fsync (for memory-backed directories). The directory must be one that no
// other user can write: this process's own. `shown` is the path messages name. Throws IoError as
// write_file_atomically does, leaving no `.tmp`.
void write_private_file_at(int dir_fd, const std::string& name, const std::string& bytes, const std::string& shown);

// Async-signal-safe: removes the temporary files of the write_file_atomically() calls in progress, so
// that a process ending at once (a second stop signal, the stop timeout) leaves no partial `.tmp` beside
// the files of record. Writes that start afterwards are not its concern: the process is about to _exit.
void unlink_files_being_written() noexcept;

// An append-only file written with write(2). No user-space buffer: each append() reaches the kernel
// whole or throws, so a killed process loses nothing already appended and a full disk is noticed at
// the append that hit it, not at exit.
class AppendFile final {
 public:
  // Opens `path` for appending, creating it. Throws IoError.
  explicit AppendFile(std::string path);
  ~AppendFile();
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;

  void append(const std::string& text);  // throws IoError
  void sync();                           // fsync; throws IoError
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

// Start-up check of an output directory, without side effects: `dir` is a directory in which this
// process can create files, or does not exist yet and can be created (its nearest existing ancestor is a
// directory that takes new entries). Checked by creating and removing a file, since permission bits are
// wrong for root and for read-only mounts. Throws ConfigError naming `key` (e.g. "log.dir"), the path
// and the reason.
void check_output_directory(const std::string& dir, const std::string& key);

}  // namespace dtrain
