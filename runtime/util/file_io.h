// Checked file input and output for everything a run leaves behind (run logs, configs, results,
// checkpoints) and the small files it reads back: every failure throws IoError naming the path and the
// system's reason, nothing half-written is left under a final name, and, since the directories written
// to may be shared with other users, no file is created, written or read through a link or a name
// planted in advance (temporaries have random names and are created exclusively), and a small file is
// read only when it is a regular file of a bounded size. Also the start-up check that an output
// directory is usable.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>

#include "runtime/util/directory.h"

namespace dtrain {

// The system's text for an errno value, e.g. "No space left on device".
std::string errno_text(int code);

// The whole content of `path` (a dataset's or a config's, the user's own files). Throws IoError naming
// the path and the reason.
std::string read_file(const std::string& path);
// The rest of the file open as `fd` (which stays open), at most `max_bytes` (IoError beyond); `shown` is
// the path messages name.
std::string read_fd(int fd, const std::string& shown, size_t max_bytes = static_cast<size_t>(-1));

// `name` in `dir`, a small file dtrain wrote itself (a run id, a job's name, a progress mark): opened
// without following a link or blocking (a FIFO), and read only when it is a regular file of at most
// `max_bytes`. Throws IoError saying which it is not: "'<path>' is a symbolic link, which dtrain does not
// follow", "'<path>' is a FIFO, not a regular file", "'<path>' holds 1073741824 bytes, more than the 64
// that such a file holds"; or the system's reason ("No such file or directory").
std::string read_small_file(const Directory& dir, const std::string& name, size_t max_bytes);

// The kind of a file that is not a regular one, for messages: "a directory", "a symbolic link", "a FIFO",
// "a character device", "a block device", "a socket"; "a regular file" for one.
std::string file_kind(mode_t mode);

// kSynced: on disk when the call returns (fsync of the file and its directory), for what a run must not
// lose; kReplaced: only atomically replaced, for small notes rewritten often and for memory-backed
// directories, which a power loss may take back to an older version.
enum class Durability { kSynced, kReplaced };

// Writes `bytes` as `name` in `dir` through a temporary `<name>.<12 random hex digits>.tmp` created
// exclusively (mode `mode`, no link followed) beside it: write, fsync, rename over `name`, fsync of the
// directory (the fsyncs only when kSynced). A crash leaves the old file or the new one, never a mix; a
// link or a FIFO planted as `name` is replaced, never written through. On failure the temporary is
// removed and IoError says what failed ("cannot write '<dir>/<name>': No space left on device").
void write_file_atomically(const Directory& dir, const std::string& name, const std::string& bytes,
                           Durability durability = Durability::kSynced, mode_t mode = 0644);
// The same for a path: its directory opened once (links on the way to it followed: the caller's path).
void write_file_atomically(const std::string& path, const std::string& bytes,
                           Durability durability = Durability::kSynced);

// Whether `name` is the temporary of a write_file_atomically() of `target` (any target with "").
bool is_temporary_of(const std::string& name, const std::string& target = "");

// Async-signal-safe: removes the temporary files of the write_file_atomically() calls in progress, so
// that a process ending at once (a second stop signal, the stop timeout) leaves no partial `.tmp` beside
// the files of record. Writes that start afterwards are not its concern: the process is about to _exit.
void unlink_files_being_written() noexcept;

// A file that unlink_files_being_written() removes while the object lives: what write_file_atomically()
// holds for its temporary, and what tests use to stand in for a write that cannot finish.
class PendingFile final {
 public:
  PendingFile(int dir_fd, const std::string& name);  // `dir_fd` must outlive the object
  ~PendingFile();
  PendingFile(const PendingFile&) = delete;
  PendingFile& operator=(const PendingFile&) = delete;

 private:
  void* slot_ = nullptr;
};

// An append-only file written with write(2). No user-space buffer: each append() reaches the kernel
// whole or throws, so a killed process loses nothing already appended and a full disk is noticed at
// the append that hit it, not at exit.
class AppendFile final {
 public:
  // Opens `name` in `dir` for appending, creating it (0644), never through a link, and only when it is a
  // regular file of this user with one name (not a hard link to another file). Throws IoError.
  AppendFile(const Directory& dir, const std::string& name);
  // The same for a path, its directory opened once.
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
