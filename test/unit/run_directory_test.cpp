// Run directories as users meet them: runs side by side in one log.dir, a second run of a name, a
// resume with and without a name, a shared checkpoint directory, and a run still in progress.
#include "test/support/catch.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/train/run_directory.h"
#include "runtime/util/error.h"
#include "runtime/util/file_io.h"
#include "runtime/util/file_lock.h"
#include "runtime/util/timer.h"
#include "test/support/skip.h"
#include "test/support/temp_dir.h"
#include "test/support/tiny_workload.h"
#include "test/support/train_run.h"

using namespace dtrain;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// The checkpoint directory of a run "r" made once in `config`'s log.dir, which then resumes it.
std::string made_run_checkpoints(TrainConfig& config) {
  config.log.run_name = "r";
  const std::string checkpoints = RunDirectory::open(config, 0)->checkpoint_dir();
  config.checkpoint.resume = true;
  return checkpoints;
}

// The tiny test config with checkpoints in the run's directory, as dtrain's defaults have them.
TrainConfig run_config(const test::TempDir& dir) {
  TrainConfig config = test::tiny_config(dir.path());
  config.checkpoint.dir.clear();
  config.train.epochs = 1;
  return config;
}

}  // namespace

TEST_CASE("each run gets its own directory, with its checkpoints inside", "[run_dir]") {
  test::TempDir dir;
  const TrainConfig config = run_config(dir);
  const auto first = RunDirectory::open(config, 0);
  const auto second = RunDirectory::open(config, 0);  // the same second: the name gets a suffix
  CHECK(first->path() != second->path());
  CHECK(fs::path(first->path()).parent_path() == fs::path(config.log.dir));
  CHECK_THAT(first->name(), Contains("-tiny"));
  CHECK(first->checkpoint_dir() == first->path() + "/checkpoints");
  CHECK(fs::is_directory(second->checkpoint_dir()));
  CHECK(first->note().empty());

  TrainConfig no_checkpoints = config;
  no_checkpoints.checkpoint.enabled = false;
  CHECK(RunDirectory::open(no_checkpoints, 0)->checkpoint_dir().empty());
}

TEST_CASE("a second run in the same log.dir does not touch the first run's checkpoints", "[run_dir][checkpoint]") {
  test::TempDir dir;
  auto workload = test::make_tiny_workload();
  TrainConfig config = run_config(dir);
  const test::TrainRun first = test::train_alone(config, *workload);
  const std::string checkpoint = first.result.epochs.at(0).checkpoint_path;
  REQUIRE(fs::exists(checkpoint));
  const std::string bytes = read_file(checkpoint);
  const fs::file_time_type written = fs::last_write_time(checkpoint);

  config.train.seed = 2;  // another model: an overwrite would change the file
  const test::TrainRun second = test::train_alone(config, *workload);
  CHECK(second.result.epochs.at(0).checkpoint_path != checkpoint);
  CHECK(read_file(checkpoint) == bytes);
  CHECK(fs::last_write_time(checkpoint) == written);
}

TEST_CASE("a run directory in use by another dtrain is refused, naming the holder", "[run_dir]") {
  test::TempDir dir;
  TrainConfig config = run_config(dir);
  config.log.run_name = "study-n4";
  config.checkpoint.resume = true;
  {
    const auto running = RunDirectory::open(config, 0);
    CHECK_THROWS_AS(RunDirectory::open(config, 0.3), ConfigError);
    CHECK_THROWS_WITH(RunDirectory::open(config, 0.3),
                      Contains("run 'study-n4' in '" + config.log.dir + "' is in use by another dtrain (pid ") &&
                          Contains("; wait for it to end, or give this run another --run-name"));
  }
  // Its end (or its death: the kernel drops the lock of a dead process) releases it.
  CHECK(RunDirectory::open(config, 0)->path() == config.log.dir + "/study-n4");
}

TEST_CASE("a lock held by another program names that program, not the dead pid the lock file names", "[run_dir]") {
  test::TempDir dir;
  TrainConfig config = run_config(dir);
  config.log.run_name = "taken";
  const std::string run = config.log.dir + "/taken";
  fs::create_directories(run);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  // What a dtrain that died long ago left in the file; the kernel dropped its lock with it.
  std::ofstream(run + "/.dtrain.lock") << "pid 999999 on " << host << " since 2026-01-01T00:00:00Z\n";
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // another program takes the lock, as `flock DIR/.dtrain.lock sleep 60` would
    const int fd = ::open((run + "/.dtrain.lock").c_str(), O_RDONLY);
    if (fd < 0 || ::flock(fd, LOCK_EX) != 0) ::_exit(1);
    const char byte = 1;
    if (::write(ready[1], &byte, 1) != 1) ::_exit(1);
    ::pause();
    ::_exit(0);
  }
  char byte = 0;
  REQUIRE(::read(ready[0], &byte, 1) == 1);
  const std::string error = [&] {
    try {
      RunDirectory::open(config, 0.2);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  }();
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  CHECK_THAT(error, Contains("run 'taken' in '" + config.log.dir + "' is in use by another program (pid " +
                             std::to_string(child) + ", ") &&
                        Contains("; the lock file names pid 999999 on " + std::string(host) +
                                 " since 2026-01-01T00:00:00Z, no longer running)"));
}

TEST_CASE("a named run continues only with --resume", "[run_dir]") {
  test::TempDir dir;
  auto workload = test::make_tiny_workload();
  TrainConfig config = run_config(dir);
  config.log.run_name = "pod-job-7";
  test::train_alone(config, *workload);
  CHECK_THROWS_AS(RunDirectory::open(config, 0), ConfigError);
  CHECK_THROWS_WITH(RunDirectory::open(config, 0),
                    Contains("log.run_name 'pod-job-7': a run of that name is already in '" + config.log.dir +
                             "'; continue it with --resume, or give this run another --run-name"));

  // A restarted pod runs the same command with --resume: the run continues in its directory.
  config.train.epochs = 2;
  config.checkpoint.resume = true;
  const test::TrainRun resumed = test::train_alone(config, *workload);
  REQUIRE(resumed.result.epochs.size() == 1);
  CHECK(resumed.result.epochs[0].epoch == 2);
  CHECK(fs::path(resumed.result.epochs[0].checkpoint_path).parent_path() == fs::path(config.log.dir) / "pod-job-7/checkpoints");
  // Both starts in one run log, the resumed one after the first.
  std::ifstream events(config.log.dir + "/pod-job-7/events.jsonl");
  std::stringstream text;
  text << events.rdbuf();
  const std::string log = text.str();
  CHECK(log.find("\"event\":\"run_start\"") != log.rfind("\"event\":\"run_start\""));
  CHECK(log.find("\"event\":\"resume\"") > log.rfind("\"event\":\"run_start\""));

  // A name no run has yet starts that run, even with --resume (the first start of a pod).
  config.log.run_name = "pod-job-8";
  const test::TrainRun fresh = test::train_alone(config, *workload);
  CHECK(fresh.result.epochs.at(0).epoch == 1);
}

TEST_CASE("--resume without a name continues the run of the workload with the newest checkpoint", "[run_dir]") {
  test::TempDir dir;
  auto workload = test::make_tiny_workload();
  TrainConfig config = run_config(dir);
  test::train_alone(config, *workload);
  config.log.run_name = "later";
  test::train_alone(config, *workload);
  // A run of another workload, newer still, is not this workload's.
  TrainConfig other = config;
  other.log.run_name = "other-workload";
  other.workload = "other";
  fs::create_directories(other.log.dir + "/other-workload/checkpoints");
  write_file_atomically(other.log.dir + "/other-workload/config.yaml", "workload: other\n");
  write_file_atomically(other.log.dir + "/other-workload/checkpoints/checkpoint-epoch-000001.safetensors", "x");

  config.log.run_name.clear();
  config.checkpoint.resume = true;
  const auto run = RunDirectory::open(config, 0);
  CHECK(run->name() == "later");
  CHECK(run->note() == "resuming run 'later', the run of tiny in '" + config.log.dir +
                           "' with the newest checkpoint (--run-name chooses another)");

  // Without any run of the workload to resume, a new run starts.
  TrainConfig fresh = run_config(dir);
  fresh.log.dir = dir.path() + "/empty-logs";
  fresh.checkpoint.resume = true;
  const auto started = RunDirectory::open(fresh, 0);
  CHECK_THAT(started->name(), Contains("-tiny"));
  CHECK(started->note().empty());
}

TEST_CASE("a shared checkpoint.dir is locked, and kept from overwrites without --resume", "[run_dir]") {
  test::TempDir dir;
  auto workload = test::make_tiny_workload();
  TrainConfig config = run_config(dir);
  config.checkpoint.dir = dir.path() + "/shared";
  {
    const auto running = RunDirectory::open(config, 0);
    CHECK(running->checkpoint_dir() == config.checkpoint.dir);
    CHECK_THROWS_AS(RunDirectory::open(config, 0), ConfigError);
    CHECK_THROWS_WITH(RunDirectory::open(config, 0),
                      Contains("checkpoint.dir '" + config.checkpoint.dir + "' is in use by another dtrain (pid ") &&
                          Contains("give this run its own --checkpoint-dir, or leave checkpoint.dir unset"));
  }
  test::train_alone(config, *workload);
  CHECK_THROWS_AS(RunDirectory::open(config, 0), ConfigError);
  CHECK_THROWS_WITH(RunDirectory::open(config, 0),
                    Contains("checkpoint.dir '" + config.checkpoint.dir + "' holds checkpoints of an earlier run (") &&
                        Contains("checkpoint-epoch-000001.safetensors), which this run would overwrite; continue that run with "
                                 "--resume, or give this run another --checkpoint-dir"));
  config.checkpoint.resume = true;
  config.train.epochs = 2;
  CHECK(test::train_alone(config, *workload).result.epochs.at(0).epoch == 2);
}

TEST_CASE("a directory lock waits for its holder, then names it", "[run_dir]") {
  test::TempDir dir;
  std::string holder;
  auto first = DirectoryLock::try_lock(Directory::open(dir.path(), false), 0, holder);
  REQUIRE(first);
  Stopwatch watch;
  CHECK_FALSE(DirectoryLock::try_lock(Directory::open(dir.path(), false), 0.5, holder));
  CHECK(watch.elapsed_s() >= 0.5);
  CHECK_THAT(holder, Contains("pid " + std::to_string(::getpid()) + " on ") && Contains(" since 20"));
  first.reset();
  CHECK(DirectoryLock::try_lock(Directory::open(dir.path(), false), 0, holder));
}

TEST_CASE("a resumed run removes the partial checkpoint a killed write left, and keeps the whole ones", "[run_dir][checkpoint]") {
  test::TempDir dir;
  TrainConfig config = run_config(dir);
  config.log.run_name = "job";
  std::string checkpoints;
  {
    const auto first = RunDirectory::open(config, 0);
    checkpoints = first->checkpoint_dir();
  }
  std::ofstream(checkpoints + "/checkpoint-epoch-000001.safetensors") << "a whole checkpoint";
  std::ofstream(checkpoints + "/checkpoint-epoch-000002-step-00000040.safetensors.0123456789ab.tmp") << "half a check";
  std::ofstream(checkpoints + "/checkpoint-epoch-000002-step-00000030.pt.tmp") << "an older version's";
  std::ofstream(checkpoints + "/notes.tmp") << "not dtrain's";
  config.checkpoint.resume = true;
  const auto resumed = RunDirectory::open(config, 0);
  REQUIRE(resumed->checkpoint_dir() == checkpoints);
  CHECK(fs::exists(checkpoints + "/checkpoint-epoch-000001.safetensors"));
  CHECK_FALSE(fs::exists(checkpoints + "/checkpoint-epoch-000002-step-00000040.safetensors.0123456789ab.tmp"));
  CHECK_FALSE(fs::exists(checkpoints + "/checkpoint-epoch-000002-step-00000030.pt.tmp"));
  CHECK(fs::exists(checkpoints + "/notes.tmp"));
  CHECK_THAT(resumed->note(), Contains("removed 2 partial checkpoint file(s) (*.tmp) from " + checkpoints));
}

TEST_CASE("under torchrun, restarts of a job resume its run and a new job starts its own", "[run_dir]") {
  test::TempDir dir;
  TrainConfig config = run_config(dir);
  config.checkpoint.resume = true;  // as under torchrun's agent, unasked
  std::string first;
  {
    const auto run = RunDirectory::open(config, 0, "job-a");
    first = run->name();
    write_file_atomically(run->path() + "/config.yaml", "workload: tiny\n");
    write_file_atomically(run->checkpoint_dir() + "/checkpoint-epoch-000002.safetensors", "x");
  }
  const auto restarted = RunDirectory::open(config, 0, "job-a");
  CHECK(restarted->name() == first);
  CHECK_THAT(restarted->note(), Contains("the run of tiny of torchrun job 'job-a'"));
  {
    const auto other = RunDirectory::open(config, 0, "job-b");
    CHECK(other->name() != first);
    CHECK_THAT(other->note(), Contains("are other jobs'; torchrun job 'job-b' starts a run of its own"));
  }

  // A shared checkpoint.dir holding another job's checkpoints is refused, not continued.
  TrainConfig shared = config;
  shared.checkpoint.dir = dir.file("shared");
  {
    const auto run = RunDirectory::open(shared, 0, "job-a");
    write_file_atomically(shared.checkpoint.dir + "/checkpoint-epoch-000001.safetensors", "x");
  }
  shared.log.run_name = "later";
  CHECK_THROWS_WITH(RunDirectory::open(shared, 0, "job-b"),
                    Contains("checkpoint.dir '" + shared.checkpoint.dir + "' holds checkpoints of torchrun job 'job-a'"));
  shared.log.run_name = "again";
  CHECK_NOTHROW(RunDirectory::open(shared, 0, "job-a"));
  shared.log.run_name = "asked";
  CHECK_NOTHROW(RunDirectory::open(shared, 0, ""));  // --resume given: what it says
}

TEST_CASE("a torchrun job id with a newline is the same job on restart", "[run_dir]") {
  // torchrun takes any --rdzv_id; the record of it once kept only its first line, so a restart of the
  // job did not know its own run.
  test::TempDir dir;
  TrainConfig config = run_config(dir);
  config.checkpoint.resume = true;
  const std::string job = "study\nrep-2";
  std::string first;
  {
    const auto run = RunDirectory::open(config, 0, job);
    first = run->name();
    write_file_atomically(run->path() + "/config.yaml", "workload: tiny\n");
    write_file_atomically(run->checkpoint_dir() + "/checkpoint-epoch-000001.safetensors", "x");
  }
  CHECK(RunDirectory::open(config, 0, job)->name() == first);
  CHECK(RunDirectory::open(config, 0, "study")->name() != first);
}

TEST_CASE("a run or checkpoint directory that others can write is refused unless shared directories are allowed",
          "[run_dir][shared]") {
  test::TempDir dir;
  TrainConfig config = run_config(dir);
  config.log.run_name = "team";
  const std::string run = config.log.dir + "/team";
  fs::create_directories(run);
  SECTION("writable by every user, without the sticky bit") {
    fs::permissions(run, static_cast<fs::perms>(0777));
    CHECK_THROWS_MATCHES(RunDirectory::open(config, 0), ConfigError,
                         Catch::Matchers::Predicate<ConfigError>([&](const ConfigError& e) {
                           const std::string m = e.what();
                           return m.find("the run directory '" + run + "' can be written by every user (mode 0777) and has no "
                                         "sticky bit") != std::string::npos &&
                                  m.find("--allow-shared-dirs (log.allow_shared_dirs)") != std::string::npos;
                         }, "names the directory, who can write it and the option"));
    CHECK_FALSE(fs::exists(run + "/.dtrain.lock"));  // refused before anything is written there
    config.log.allow_shared_dirs = true;
    CHECK_NOTHROW(RunDirectory::open(config, 0));
  }
  SECTION("writable by every user with the sticky bit, as /tmp is: nobody can replace another's entries") {
    fs::permissions(run, static_cast<fs::perms>(01777));
    CHECK_NOTHROW(RunDirectory::open(config, 0));
  }
  SECTION("a shared checkpoint.dir writable by a group") {
    config.checkpoint.dir = dir.file("shared-checkpoints");
    fs::create_directories(config.checkpoint.dir);
    fs::permissions(config.checkpoint.dir, static_cast<fs::perms>(02775));
    ::chown(config.checkpoint.dir.c_str(), static_cast<uid_t>(-1), 65534);  // a group that is not the user's own
    CHECK_THROWS_WITH(RunDirectory::open(config, 0),
                      Contains("checkpoint.dir '" + config.checkpoint.dir + "' can be written by group 65534") &&
                          Contains("(mode 2775) and has no sticky bit") && Contains("--allow-shared-dirs"));
  }
  SECTION("owned by another user") {
    if (::geteuid() != 0) {
      DTRAIN_SKIP("making a directory another user owns needs root");
    }
    REQUIRE(::chown(run.c_str(), 65534, 65534) == 0);
    CHECK_THROWS_WITH(RunDirectory::open(config, 0),
                      Contains("the run directory '" + run + "' is owned by uid 65534") &&
                          Contains("not by this user (uid 0") && Contains("--allow-shared-dirs"));
  }
}

TEST_CASE("names a run uses in its directories are never followed as links", "[run_dir][shared]") {
  test::TempDir dir;
  TrainConfig config = run_config(dir);
  config.log.run_name = "r";
  config.checkpoint.resume = true;
  const std::string victim = dir.file("victim");
  std::ofstream(victim) << "precious";
  const auto victim_intact = [&] { CHECK(read_file(victim) == "precious"); };
  fs::create_directories(config.log.dir);
  SECTION("the run directory itself") {
    fs::create_directory(dir.file("elsewhere"));
    fs::create_directory_symlink(dir.file("elsewhere"), config.log.dir + "/r");
    CHECK_THROWS_WITH(RunDirectory::open(config, 0),
                      "log.run_name 'r': '" + config.log.dir + "/r' is a symbolic link, which dtrain does not follow; remove it");
    CHECK(fs::is_empty(dir.file("elsewhere")));
  }
  SECTION("the lock") {
    fs::create_directories(config.log.dir + "/r");
    fs::create_symlink(victim, config.log.dir + "/r/.dtrain.lock");
    CHECK_THROWS_WITH(RunDirectory::open(config, 0),
                      "the lock file '" + config.log.dir + "/r/.dtrain.lock' is a symbolic link, which dtrain does not follow; "
                      "remove it");
    victim_intact();
  }
  SECTION("the lock as a hard link") {
    fs::create_directories(config.log.dir + "/r");
    fs::create_hard_link(victim, config.log.dir + "/r/.dtrain.lock");
    CHECK_THROWS_WITH(RunDirectory::open(config, 0), Contains("has 2 names (a hard link to another file)"));
    victim_intact();
  }
  SECTION("checkpoints/") {
    fs::create_directories(config.log.dir + "/r");
    fs::create_directory(dir.file("elsewhere"));
    fs::create_directory_symlink(dir.file("elsewhere"), config.log.dir + "/r/checkpoints");
    CHECK_THROWS_WITH(RunDirectory::open(config, 0), Contains("is a symbolic link, which dtrain does not follow"));
    CHECK(fs::is_empty(dir.file("elsewhere")));
  }
  SECTION("run_id and the torchrun job file are replaced, not written through") {
    const std::string checkpoints = RunDirectory::open(config, 0)->checkpoint_dir();
    fs::remove(checkpoints + "/run_id");
    fs::create_symlink(victim, checkpoints + "/run_id");
    fs::create_symlink(victim, config.log.dir + "/r/torchrun_job");
    CHECK_THROWS_WITH(RunDirectory::open(config, 0), Contains(checkpoints + "/run_id' is a symbolic link"));
    config.checkpoint.resume = false;
    config.log.run_name = "r2";
    fs::create_directories(config.log.dir + "/r2");
    fs::create_symlink(victim, config.log.dir + "/r2/torchrun_job");
    CHECK_NOTHROW(RunDirectory::open(config, 0, "job-1"));
    CHECK_FALSE(fs::is_symlink(config.log.dir + "/r2/torchrun_job"));
    victim_intact();
  }
}

TEST_CASE("a run_id that is a FIFO, a device or a huge file ends a resume's start at once, naming it", "[run_dir][shared]") {
  test::TempDir dir;
  TrainConfig config = run_config(dir);
  const std::string checkpoints = made_run_checkpoints(config);
  fs::remove(checkpoints + "/run_id");
  std::string expected;
  SECTION("a FIFO") {
    REQUIRE(::mkfifo((checkpoints + "/run_id").c_str(), 0600) == 0);
    expected = "run_id' is a FIFO, not a regular file";
  }
  SECTION("a 1 GiB file") {
    std::ofstream big(checkpoints + "/run_id");
    big.seekp((int64_t{1} << 30) - 1);
    big << 'x';
    expected = "run_id' holds 1073741824 bytes, more than the 64 that such a file holds";
  }
  const auto started = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(RunDirectory::open(config, 0),
                    Contains("checkpoint directory '" + checkpoints + "': '" + checkpoints + "/" + expected) &&
                        Contains("remove it, and the resume gives the run a new one"));
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(1));
}

TEST_CASE("a directory named like a checkpoint is named at the start, not met at the epoch's end", "[run_dir][shared]") {
  test::TempDir dir;
  TrainConfig config = run_config(dir);
  const std::string checkpoints = made_run_checkpoints(config);
  fs::create_directory(checkpoints + "/checkpoint-epoch-000002.safetensors");
  CHECK_THROWS_WITH(RunDirectory::open(config, 0),
                    "checkpoint directory '" + checkpoints + "' holds '" + checkpoints +
                        "/checkpoint-epoch-000002.safetensors' (a directory) under a checkpoint's name, which no checkpoint of "
                        "that position could replace: rename or remove it, or give this run another --checkpoint-dir");
  // A link under such a name is passed over and said, never followed.
  fs::remove(checkpoints + "/checkpoint-epoch-000002.safetensors");
  fs::create_symlink(dir.file("elsewhere"), checkpoints + "/checkpoint-epoch-000003.safetensors");
  CHECK_THAT(RunDirectory::open(config, 0)->note(),
             Contains("passed over '" + checkpoints + "/checkpoint-epoch-000003.safetensors' (a symbolic link) in " + checkpoints));
}
