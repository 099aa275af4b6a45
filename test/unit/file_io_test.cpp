// Checked output: a full disk is an IoError naming the file and the system's reason, and an atomic
// write that fails leaves neither a partial file nor its temporary.
#include "test/support/catch.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

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

}  // namespace

TEST_CASE("atomic writes replace the file whole and leave no temporary", "[io]") {
  test::TempDir dir;
  const std::string path = dir.file("config.yaml");
  write_file_atomically(path, "first\n");
  write_file_atomically(path, "second\n");
  CHECK(contents(path) == "second\n");
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST_CASE("a full disk is an IoError and an atomic write leaves nothing behind", "[io]") {
  test::TempDir dir;
  const std::string path = dir.file("checkpoint.pt");
  write_file_atomically(path, "the good one");
  // /dev/full answers every write with ENOSPC, as a full filesystem does.
  REQUIRE(::symlink("/dev/full", (path + ".tmp").c_str()) == 0);
  CHECK_THROWS_MATCHES(write_file_atomically(path, std::string(1 << 20, 'x')), IoError,
                       Catch::Matchers::Message("cannot write '" + path + ".tmp': No space left on device"));
  CHECK_FALSE(std::filesystem::exists(std::filesystem::symlink_status(path + ".tmp")));
  CHECK(contents(path) == "the good one");

  AppendFile full("/dev/full");
  CHECK_THROWS_WITH(full.append("{\"event\":\"epoch_end\"}\n"), "cannot write '/dev/full': No space left on device");
  CHECK_THROWS_WITH(AppendFile(dir.file("missing/events.jsonl")),
                    Contains("cannot open '" + dir.file("missing/events.jsonl") + "': No such file or directory"));
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

TEST_CASE("a stop that cannot finish ends the process at its timeout and removes the write in progress", "[io][signals]") {
  // The temporary is a FIFO that this test reads only 4 KiB of: the child's write blocks in the middle,
  // as a checkpoint write to a slow disk would, when the stop signal comes.
  test::TempDir dir;
  const std::string path = dir.file("checkpoint.pt");
  const std::string temp = path + ".tmp";
  REQUIRE(::mkfifo(temp.c_str(), 0600) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    install_stop_signals(StopSignalOptions{false, 1.0, true});
    try {
      write_file_atomically(path, std::string(1 << 20, 'x'));
    } catch (...) {
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
  CHECK_FALSE(std::filesystem::exists(path));
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
