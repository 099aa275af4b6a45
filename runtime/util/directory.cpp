#include "runtime/util/directory.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <vector>

#include "runtime/util/error.h"
#include "runtime/util/file_io.h"

namespace dtrain {
namespace {

[[noreturn]] void throw_directory_io(const std::string& what, const std::string& path, int code) {
  throw IoError("cannot " + what + " '" + path + "': " + errno_text(code));
}

// getpwuid_r/getgrgid_r need a buffer whose size the system suggests; 16 KiB holds any real entry.
constexpr size_t kNameBufferBytes = 16384;

std::string user_name(uid_t uid) {
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buffer(kNameBufferBytes);
  if (::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr) return "";
  return entry.pw_name;
}

// The user's primary group, or (gid_t)-1.
gid_t primary_group(uid_t uid) {
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buffer(kNameBufferBytes);
  if (::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr) return static_cast<gid_t>(-1);
  return entry.pw_gid;
}

// The group's name, and whether it is `uid`'s private group: named like the user, the user's primary
// group, and listing no member but the user (Debian's user private groups; umask 002 then makes every
// directory group-writable without sharing it with anyone).
std::string group_name(gid_t gid, uid_t uid, bool& private_to_user) {
  private_to_user = false;
  group entry{};
  group* found = nullptr;
  std::vector<char> buffer(kNameBufferBytes);
  if (::getgrgid_r(gid, &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr) return "";
  const std::string name = entry.gr_name;
  const std::string user = user_name(uid);
  bool others_listed = false;
  for (char** member = entry.gr_mem; member != nullptr && *member != nullptr; ++member) {
    if (*member != user) others_listed = true;
  }
  private_to_user = !user.empty() && name == user && primary_group(uid) == gid && !others_listed;
  return name;
}

std::string mode_text(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// mkdir -p with mode 0755: each missing directory of `path`, from the root down.
void make_directories(const std::string& path) {
  for (size_t end = path.find('/', 1);; end = path.find('/', end + 1)) {
    const std::string prefix = path.substr(0, end);
    if (!prefix.empty() && ::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      const int code = errno;
      struct stat st {};
      // An existing component that mkdir cannot report as such (a read-only mount says EROFS).
      if (::stat(prefix.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) throw_directory_io("create the directory", prefix, code);
    }
    if (end == std::string::npos) return;
  }
}

}  // namespace

Directory Directory::open(const std::string& path, bool create) {
  const std::string where = path.empty() ? "." : path;
  if (create) make_directories(where);
  const int fd = ::open(where.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    const int code = errno;
    if (code == ENOTDIR) throw IoError("'" + where + "' is not a directory");
    throw_directory_io("open the directory", where, code);
  }
  return Directory(fd, where);
}

Directory Directory::sub(const std::string& name, bool create) const {
  const std::string shown_path = shown(name);
  if (create && ::mkdirat(fd_, name.c_str(), 0755) != 0 && errno != EEXIST) throw_directory_io("create the directory", shown_path, errno);
  const int fd = ::openat(fd_, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int code = errno;
    // With O_DIRECTORY, Linux answers a link with ENOTDIR rather than ELOOP: ask what it is.
    struct stat st {};
    const bool link = code == ELOOP || (::fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode));
    if (link) throw IoError("'" + shown_path + "' is a symbolic link, which dtrain does not follow; remove it");
    if (code == ENOTDIR) throw IoError("'" + shown_path + "' is not a directory");
    throw_directory_io("open the directory", shown_path, code);
  }
  return Directory(fd, shown_path);
}

Directory::~Directory() {
  if (fd_ >= 0) ::close(fd_);
}

Directory::Directory(const Directory& other) : fd_(::fcntl(other.fd_, F_DUPFD_CLOEXEC, 0)), path_(other.path_) {
  if (fd_ < 0) throw_directory_io("duplicate the descriptor of", path_, errno);
}

Directory& Directory::operator=(const Directory& other) {
  if (this != &other) *this = Directory(other);
  return *this;
}

Directory::Directory(Directory&& other) noexcept : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

Directory& Directory::operator=(Directory&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

std::string Directory::shown(const std::string& name) const {
  return !path_.empty() && path_.back() == '/' ? path_ + name : path_ + "/" + name;
}

std::string Directory::shared_by() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) throw_directory_io("inspect", path_, errno);
  const uid_t me = ::geteuid();
  if (st.st_uid != me) {
    const std::string owner = user_name(st.st_uid);
    const std::string self = user_name(me);
    return "is owned by uid " + std::to_string(st.st_uid) + (owner.empty() ? "" : " (" + owner + ")") +
           ", not by this user (uid " + std::to_string(me) + (self.empty() ? "" : ", " + self) + ")";
  }
  if ((st.st_mode & S_ISVTX) != 0) return "";
  if ((st.st_mode & S_IWOTH) != 0) {
    return "can be written by every user (mode " + mode_text(st.st_mode) + ") and has no sticky bit";
  }
  if ((st.st_mode & S_IWGRP) != 0) {
    bool private_group = false;
    const std::string name = group_name(st.st_gid, me, private_group);
    if (private_group) return "";
    return "can be written by group " + std::to_string(st.st_gid) + (name.empty() ? "" : " (" + name + ")") + " (mode " +
           mode_text(st.st_mode) + ") and has no sticky bit";
  }
  return "";
}

}  // namespace dtrain
