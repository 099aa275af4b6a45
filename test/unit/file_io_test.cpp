// Checked output: a full disk is an IoError naming the file and the system's reason, an atomic write
// that fails leaves neither a partial file nor its temporary, and nothing planted under a name dtrain
// writes or reads (a link, a FIFO, a hard link, a huge file) is written through, waited on or read whole.
#include "test/support/catch.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "runtime/util/error.h"
#include "runtime/util/file_io.h"
#include "runtime/util/stop_signals.h"
#include "test/support/temp_dir.h"

using namespace dtrain;
using Catch::Matchers::Contains;

namespace {

std::string contents(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The names in `dir`, sorted.
std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Files in this process grow no larger than `bytes` while the object lives: writes past it fail with
// EFBIG, as they fail with ENOSPC on a full disk (SIGXFSZ, which would end the process, is ignored).
class FileSizeLimit final {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &before_) == 0);
    previous_ = ::signal(SIGXFSZ, SIG_IGN);
    rlimit limited = before_;
    limited.rlim_cur = bytes;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &limited) == 0);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &before_);
    ::signal(SIGXFSZ, previous_);
  }

 private:
  rlimit before_{};
  void (*previous_)(int) = nullptr;
};

}  // namespace

TEST_CASE("atomic writes replace the file whole and leave no temporary", "[io]") {
  test::TempDir dir;
  const std::string path = dir.file("config.yaml");
  write_file_atomically(path, "first\n");
  write_file_atomically(path, "second\n");
  CHECK(contents(path) == "second\n");
  CHECK(names_in(dir.path()) == std::vector<std::string>{"config.yaml"});
}

TEST_CASE("a write that fails (a full disk) is an IoError and leaves nothing behind", "[io]") {
  test::TempDir dir;
  const std::string path = dir.file("checkpoint.pt");
  write_file_atomically(path, "the good one");
  {
    const FileSizeLimit limit(4096);
    CHECK_THROWS_MATCHES(write_file_atomically(path, std::string(1 << 20, 'x')), IoError,
                         Catch::Matchers::Message("cannot write '" + path + "': File too large"));
  }
  CHECK(names_in(dir.path()) == std::vector<std::string>{"checkpoint.pt"});
  CHECK(contents(path) == "the good one");

  AppendFile log(dir.file("events.jsonl"));
  {
    const FileSizeLimit limit(4096);
    CHECK_THROWS_WITH(log.append(std::string(8192, 'x')), "cannot write '" + dir.file("events.jsonl") + "': File too large");
  }
  CHECK_THROWS_WITH(AppendFile(dir.file("missing/events.jsonl")),
                    Contains("'" + dir.file("missing") + "': No such file or directory"));
}

TEST_CASE("appends reach the file at once", "[io]") {
  test::TempDir dir;
  AppendFile log(dir.file("events.jsonl"));
  log.append("one\n");
  CHECK(contents(dir.file("events.jsonl")) == "one\n");  // no buffer between the call and the file
  log.append("two\n");
  log.sync();
  CHECK(contents(dir.file("events.jsonl")) == "one\ntwo\n");
}

TEST_CASE("nothing planted under a name dtrain writes is written through", "[io][shared]") {
  // As another user of a shared directory would plant them: links to the victim's file, a FIFO, a hard
  // link, under the names of a run's files and of the temporaries of older versions.
  test::TempDir dir;
  const std::string victim = dir.file("victim");
  std::ofstream(victim) << "precious";
  const auto victim_intact = [&] { CHECK(contents(victim) == "precious"); };

  SECTION("a link as the file itself is replaced, never followed") {
    std::filesystem::create_symlink(victim, dir.file("run_id"));
    std::filesystem::create_symlink(victim, dir.file("run_id.tmp"));
    write_file_atomically(dir.file("run_id"), "0123\n");
    victim_intact();
    CHECK_FALSE(std::filesystem::is_symlink(dir.file("run_id")));
    CHECK(contents(dir.file("run_id")) == "0123\n");
    CHECK(std::filesystem::is_symlink(dir.file("run_id.tmp")));  // not ours: left alone
  }
  SECTION("temporaries have names nobody can plant in advance") {
    // The name older versions used, planted as a FIFO (a write through it would block) and as a link.
    REQUIRE(::mkfifo(dir.file("config.yaml.tmp").c_str(), 0600) == 0);
    std::filesystem::create_symlink(victim, dir.file("events.jsonl.tmp"));
    const Directory d = Directory::open(dir.path(), false);
    write_file_atomically(d, "config.yaml", "x");
    write_file_atomically(d, "events.jsonl", "y");
    victim_intact();
    CHECK(contents(dir.file("config.yaml")) == "x");
    CHECK(names_in(dir.path()) ==
          std::vector<std::string>{"config.yaml", "config.yaml.tmp", "events.jsonl", "events.jsonl.tmp", "victim"});
    CHECK(is_temporary_of("config.yaml.0123456789ab.tmp", "config.yaml"));
    CHECK_FALSE(is_temporary_of("config.yaml.tmp", "config.yaml"));
    CHECK_FALSE(is_temporary_of("config.yaml.0123456789ab.tmp", "events.jsonl"));
    CHECK_FALSE(is_temporary_of("config.yaml.0123456789AB.tmp"));
  }
  SECTION("the run log is not appended through a link, to a FIFO or to a file with two names") {
    std::filesystem::create_symlink(victim, dir.file("events.jsonl"));
    CHECK_THROWS_WITH(AppendFile(dir.file("events.jsonl")),
                      "'" + dir.file("events.jsonl") + "' is a symbolic link, which dtrain does not follow; remove it");
    REQUIRE(::mkfifo(dir.file("fifo.jsonl").c_str(), 0600) == 0);
    CHECK_THROWS_WITH(AppendFile(dir.file("fifo.jsonl")), Contains("is a FIFO, not a regular file"));
    REQUIRE(::link(victim.c_str(), dir.file("hard.jsonl").c_str()) == 0);
    CHECK_THROWS_WITH(AppendFile(dir.file("hard.jsonl")), Contains("has 2 names (a hard link to another file)"));
    victim_intact();
  }
  SECTION("small files are read only when they are small regular files") {
    const Directory d = Directory::open(dir.path(), false);
    REQUIRE(::mkfifo(dir.file("fifo").c_str(), 0600) == 0);
    std::filesystem::create_symlink("/dev/zero", dir.file("zero"));
    {
      std::ofstream big(dir.file("big"));
      big.seekp((int64_t{1} << 30) - 1);  // 1 GiB, sparse
      big << 'x';
    }
    const auto started = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH(read_small_file(d, "fifo", 64), "'" + dir.file("fifo") + "' is a FIFO, not a regular file");
    CHECK_THROWS_WITH(read_small_file(d, "zero", 64), "'" + dir.file("zero") + "' is a symbolic link, which dtrain does not follow");
    CHECK_THROWS_WITH(read_small_file(d, "big", 64),
                      "'" + dir.file("big") + "' holds 1073741824 bytes, more than the 64 that such a file holds");
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(1));
    std::ofstream(dir.file("id")) << "0123\n";
    CHECK(read_small_file(d, "id", 64) == "0123\n");
  }
}

TEST_CASE("a stop that cannot finish ends the process at its timeout and removes the write in progress", "[io][signals]") {
  // The pending file is a FIFO that this test reads only 4 KiB of: the child's write blocks in the middle,
  // as a checkpoint write to a slow disk would, when the stop signal comes.
  test::TempDir dir;
  const std::string temp = dir.file("checkpoint.pt.0123456789ab.tmp");
  REQUIRE(::mkfifo(temp.c_str(), 0600) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    install_stop_signals(StopSignalOptions{false, 1.0, true});
    const Directory d = Directory::open(dir.path(), false);
    const PendingFile pending(d.fd(), "checkpoint.pt.0123456789ab.tmp");
    const int fd = ::open(temp.c_str(), O_WRONLY);
    const std::string bytes(1 << 20, 'x');
    // As write_file_atomically writes: a write a signal interrupts goes on with the rest.
    for (size_t written = 0; written < bytes.size();) {
      const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
      if (n > 0) written += static_cast<size_t>(n);
      if (n < 0 && errno != EINTR) break;
    }
    ::_exit(0);  // the write finished: the test fails below
  }
  const int fd = ::open(temp.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  char buffer[4096];
  REQUIRE(::read(fd, buffer, sizeof buffer) > 0);
  ::kill(child, SIGTERM);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  ::close(fd);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 128 + SIGTERM);
  CHECK_FALSE(std::filesystem::exists(std::filesystem::symlink_status(temp)));
}

TEST_CASE("stop signals arrive even when the process was started with them blocked", "[signals]") {
  // A launcher or container runtime may leave signals blocked in the mask it execs dtrain with.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    sigset_t blocked;
    sigemptyset(&blocked);
    sigaddset(&blocked, SIGTERM);
    sigaddset(&blocked, SIGUSR1);
    ::sigprocmask(SIG_BLOCK, &blocked, nullptr);
    install_stop_signals(StopSignalOptions{true, 25.0, true});
    ::raise(SIGUSR1);
    ::_exit(stop_signal() == SIGUSR1 ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
