// A directory opened once and used through its descriptor. Everything dtrain creates, replaces, appends
// to or reads in a directory it writes to is named relative to that descriptor, so a directory renamed or
// replaced on its path meanwhile (by another user of a shared parent) cannot redirect it, and no name in
// it is followed as a symbolic link. Also who, besides this user, could change what is in it.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>

namespace dtrain {

class Directory final {
 public:
  // Opens `path`, which must be a directory. Links on the way are followed: where a path given by the
  // user leads is the user's choice. With `create`, makes it and any missing parents first (mode 0755
  // less the umask: never writable by others). Throws IoError naming the path and the reason.
  static Directory open(const std::string& path, bool create);

  // Takes over `fd`, a directory's open descriptor (closed with the object); `path` names it in messages.
  static Directory adopt(int fd, std::string path) { return Directory(fd, std::move(path)); }

  // `name` in this directory as a directory, never through a link; with `create`, made (0755) where
  // missing. Throws IoError ("'<path>/<name>' is a symbolic link, which dtrain does not follow").
  Directory sub(const std::string& name, bool create) const;

  ~Directory();
  Directory(const Directory& other);  // a descriptor of its own (dup)
  Directory& operator=(const Directory& other);
  Directory(Directory&& other) noexcept;
  Directory& operator=(Directory&& other) noexcept;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }       // as given, for messages
  std::string shown(const std::string& name) const;        // <path>/<name>, for messages

  // Who besides this user (and root) can add, replace or remove its entries: "" when nobody can (this
  // user owns it, and neither its group nor others may write it, or only with the sticky bit, which lets
  // nobody remove or rename what another user made); else why not, as the end of a sentence about the
  // directory: "is owned by uid 1000 (alice), not by this user (uid 1001)", "can be written by group 100
  // (users) (mode 2775) and has no sticky bit", "can be written by every user (mode 0777) and has no sticky
  // bit". A group that is the user's own private group (its name, the user's primary group, no other
  // members listed) counts as the user. Throws IoError when it cannot be inspected.
  std::string shared_by() const;

 private:
  Directory(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
};

}  // namespace dtrain
