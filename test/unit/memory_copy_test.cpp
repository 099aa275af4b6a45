// The checkpoint's copy in memory (memory_copy.h) as another user of the node, a deleted and restarted
// run, a killed run and a full memory meet it: private, tied to its run, cleaned up, never trusted.
#include "test/support/catch.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "runtime/comm/local_communicator.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/memory_copy.h"
#include "runtime/train/optimizer_factory.h"
#include "runtime/util/file_io.h"
#include "test/support/temp_dir.h"
#include "test/support/tiny_workload.h"
#include "test/support/train_run.h"
#include "test/support/skip.h"

using namespace dtrain;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
namespace fs = std::filesystem;

namespace {

std::string text_of(const std::string& path) { return read_file(path); }

unsigned mode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

// A node's shared memory directory as /dev/shm is: everyone may create in it, only owners delete.
std::string shared_root(const test::TempDir& dir) {
  const std::string root = dir.file("shm");
  fs::create_directory(root);
  fs::permissions(root, static_cast<fs::perms>(01777));
  return root;
}

// `text` ended as a zip archive with no records is (22 bytes of end record pointing at an empty central
// directory right after it): what read() takes for an archive's end before returning the bytes.
std::string archive_like(const std::string& text) {
  // The layout's 8-byte header length (2, little-endian) and an empty header, then `text`: what the
  // copy's reader checks before it reads a file whole.
  return std::string("\x02\0\0\0\0\0\0\0{}", 10) + text;
}

constexpr uint64_t kAnySize = uint64_t{1} << 30;

std::string user_dir(const std::string& root) { return root + "/dtrain-" + std::to_string(::geteuid()); }

// A checkpoint directory with a run id, as RunDirectory leaves it.
std::string checkpoint_dir(const test::TempDir& dir, const std::string& name = "checkpoints") {
  const std::string path = dir.file(name);
  fs::create_directories(path);
  new_checkpoint_run_id(path);
  return path;
}

std::unique_ptr<MemoryCopy> open_copy(const std::string& root, const std::string& checkpoints, bool create = true) {
  std::string problem;
  std::unique_ptr<MemoryCopy> copy = MemoryCopy::open(root, checkpoints, create, problem);
  INFO(problem);
  return copy;
}

std::vector<TrainedModule> tiny_modules(const TrainConfig& config) {
  auto model = test::make_tiny_workload()->make_model({});
  std::vector<TrainedModule> modules;
  modules.push_back({"model", model, make_optimizer(config.train, *model), nullptr});
  return modules;
}

// A checkpoint of the tiny model at the end of `epoch`, as the bytes persist() writes.
std::string checkpoint_bytes(const TrainConfig& config, int64_t epoch, const std::string& workload = "tiny") {
  test::TempDir scratch;
  CheckpointOptions options = config.checkpoint;
  options.dir = scratch.path();
  options.memory_dir.clear();
  LocalCommunicator comm;
  CheckpointMeta meta;
  meta.epoch = epoch;
  meta.workload = workload;
  meta.optimizer = "sgd";
  meta.world_size = 1;
  return read_file(Checkpointer(options, comm).save(meta, tiny_modules(config)));
}

}  // namespace

TEST_CASE("the copy in memory lives in directories and files only its user can open", "[memory]") {
  test::TempDir dir;
  const std::string root = shared_root(dir);
  const std::string checkpoints = checkpoint_dir(dir);
  const auto copy = open_copy(root, checkpoints);
  REQUIRE(copy);
  copy->replace("checkpoint-epoch-000001.safetensors", archive_like("bytes"));
  CHECK(mode_of(user_dir(root)) == 0700);
  CHECK(mode_of(copy->path()) == 0700);
  CHECK(mode_of(copy->path() + "/checkpoint-epoch-000001.safetensors") == 0600);
  CHECK(fs::path(copy->path()).parent_path() == fs::path(user_dir(root)));
  // Named after the checkpoint directory and its run id: the run's, and no other's.
  CHECK_THAT(fs::path(copy->path()).filename().string(), Contains("-" + checkpoint_run_id(checkpoints)));
  REQUIRE(copy->list().size() == 1);
  CHECK(copy->read("checkpoint-epoch-000001.safetensors", kAnySize) == archive_like("bytes"));
  CHECK_THROWS_WITH(copy->read("checkpoint-epoch-000001.safetensors", 8), Contains("more than the 8 that this run's model"));
  copy->replace("checkpoint-epoch-000002.safetensors", "newer");
  REQUIRE(copy->list().size() == 1);  // only the newest is kept
  CHECK(copy->list().front().position == CheckpointPosition{2, kEpochEndSteps});
  copy->remove();
  CHECK_FALSE(fs::exists(copy->path()));
}

TEST_CASE("a per-user directory that is a link, or not private, is not used and not touched", "[memory]") {
  test::TempDir dir;
  const std::string root = shared_root(dir);
  const std::string checkpoints = checkpoint_dir(dir);
  std::string problem;

  SECTION("a link to another directory (another run's checkpoints, say)") {
    const std::string elsewhere = dir.file("elsewhere");
    fs::create_directory(elsewhere);
    std::ofstream(elsewhere + "/checkpoint-epoch-000001.safetensors") << "someone's";
    fs::create_directory_symlink(elsewhere, user_dir(root));
    CHECK_FALSE(MemoryCopy::open(root, checkpoints, true, problem));
    CHECK_THAT(problem, Contains("is a symbolic link or not a directory, which dtrain does not follow"));
    const MemorySweep sweep = sweep_memory_copies(root, SweepScope::kUnneeded);
    CHECK(sweep.copies_removed == 0);
    CHECK(text_of(elsewhere + "/checkpoint-epoch-000001.safetensors") == "someone's");
    CHECK(fs::is_empty(elsewhere) == false);
  }
  SECTION("open to other users") {
    fs::create_directory(user_dir(root));
    fs::permissions(user_dir(root), static_cast<fs::perms>(0755));
    CHECK_FALSE(MemoryCopy::open(root, checkpoints, true, problem));
    CHECK_THAT(problem, Contains("is not a private directory of this user") && Contains("mode 0755") &&
                            Contains("expected uid " + std::to_string(::geteuid()) + ", mode 0700"));
  }
  SECTION("another user's") {
    if (::geteuid() != 0) {
      DTRAIN_SKIP("making a directory another user owns needs root");
    }
    fs::create_directory(user_dir(root));
    fs::permissions(user_dir(root), static_cast<fs::perms>(0700));
    REQUIRE(::chown(user_dir(root).c_str(), 65534, 65534) == 0);
    CHECK_FALSE(MemoryCopy::open(root, checkpoints, true, problem));
    CHECK_THAT(problem, Contains("owner uid 65534"));
    CHECK(sweep_memory_copies(root, SweepScope::kUnneeded).problem == problem);
  }
}

TEST_CASE("a file planted under a temporary's or a checkpoint's name in the copy is never followed", "[memory]") {
  test::TempDir dir;
  const std::string root = shared_root(dir);
  const auto copy = open_copy(root, checkpoint_dir(dir));
  REQUIRE(copy);
  const std::string victim = dir.file("victim");
  std::ofstream(victim) << "precious";
  fs::create_symlink(victim, copy->path() + "/checkpoint-epoch-000001.pt.tmp");
  // The checkpoint's own name as a link: replaced by the rename, not written through.
  fs::create_symlink(victim, copy->path() + "/checkpoint-epoch-000001.safetensors");
  copy->replace("checkpoint-epoch-000001.safetensors", archive_like("checkpoint"));
  CHECK(text_of(victim) == "precious");
  CHECK(copy->read("checkpoint-epoch-000001.safetensors", kAnySize) == archive_like("checkpoint"));
  CHECK(fs::is_symlink(copy->path() + "/checkpoint-epoch-000001.pt.tmp"));  // not this write's temporary
  // A checkpoint name that is a link is not a checkpoint of the copy.
  fs::create_symlink(victim, copy->path() + "/checkpoint-epoch-000009.safetensors");
  CHECK(copy->list().size() == 1);
  CHECK_THROWS_AS(copy->read("checkpoint-epoch-000009.safetensors", kAnySize), IoError);
  CHECK(text_of(victim) == "precious");
}

TEST_CASE("a copy belongs to its run: a run that starts afresh in the same place never sees it", "[memory]") {
  test::TempDir dir;
  const std::string root = shared_root(dir);
  const std::string checkpoints = checkpoint_dir(dir);
  open_copy(root, checkpoints)->replace("checkpoint-epoch-000003.safetensors", "old run");
  CHECK(open_copy(root, checkpoints, false));
  new_checkpoint_run_id(checkpoints);  // the run was deleted and started again under its name
  CHECK_FALSE(open_copy(root, checkpoints, false));
  const MemorySweep sweep = sweep_memory_copies(root);
  CHECK(sweep.copies_removed == 1);
  CHECK(sweep.bytes_freed >= 7);
  CHECK(fs::is_empty(user_dir(root)));
}

TEST_CASE("the sweep removes what no run can resume from and leaves live and newer copies", "[memory]") {
  test::TempDir dir;
  const std::string root = shared_root(dir);
  const std::string gone = checkpoint_dir(dir, "gone");
  const std::string behind = checkpoint_dir(dir, "behind");
  const std::string ahead = checkpoint_dir(dir, "ahead");
  const std::string live = checkpoint_dir(dir, "live");
  open_copy(root, gone)->replace("checkpoint-epoch-000001.safetensors", "x");
  fs::remove_all(gone);
  open_copy(root, behind)->replace("checkpoint-epoch-000001.safetensors", "x");
  std::ofstream(behind + "/checkpoint-epoch-000002.safetensors") << "newer on disk";
  std::string ahead_path;
  {
    const auto ahead_copy = open_copy(root, ahead);  // a run that was killed: its lock is gone with it
    ahead_copy->replace("checkpoint-epoch-000002-step-00000010.safetensors", "x");
    std::ofstream(ahead_copy->path() + "/checkpoint-epoch-000002-step-00000020.pt.tmp") << "a killed write";
    ahead_path = ahead_copy->path();
  }
  std::ofstream(ahead + "/checkpoint-epoch-000001.safetensors") << "older on disk";
  const auto live_copy = open_copy(root, live);
  live_copy->replace("checkpoint-epoch-000001.safetensors", "x");
  std::ofstream(live + "/checkpoint-epoch-000005.safetensors") << "newer on disk";
  std::ofstream(live_copy->path() + "/checkpoint-epoch-000006.pt.tmp") << "being written";

  const MemorySweep sweep = sweep_memory_copies(root);
  CHECK(sweep.copies_removed == 2);  // gone's, and behind's (older than its disk)
  CHECK(sweep.files_removed == 2);   // behind's checkpoint, ahead's partial file
  CHECK(sweep.problem.empty());
  CHECK(fs::exists(ahead_path + "/checkpoint-epoch-000002-step-00000010.safetensors"));
  CHECK_FALSE(fs::exists(ahead_path + "/checkpoint-epoch-000002-step-00000020.pt.tmp"));
  CHECK(fs::exists(live_copy->path() + "/checkpoint-epoch-000006.pt.tmp"));  // held by a live run
  CHECK(live_copy->list().size() == 1);

  // --remove-memory-copies: every copy no live run holds whose state is on disk too; one newer than its
  // disk (the only copy of that state) stays, and is named.
  const MemorySweep unneeded = sweep_memory_copies(root, SweepScope::kUnneeded);
  CHECK(unneeded.copies_removed == 0);
  REQUIRE(unneeded.kept_ahead.size() == 1);
  CHECK(unneeded.kept_ahead[0] == ahead_path + "/checkpoint-epoch-000002-step-00000010.safetensors");
  std::ofstream(ahead + "/checkpoint-epoch-000002-step-00000010.safetensors") << "on disk too now";
  CHECK(sweep_memory_copies(root, SweepScope::kUnneeded).copies_removed == 1);
  CHECK_FALSE(fs::exists(ahead_path));
  CHECK(fs::exists(live_copy->path()));
}

TEST_CASE("after a failure the copy stays only while it holds the newest state", "[memory]") {
  test::TempDir dir;
  const std::string root = shared_root(dir);
  const std::string checkpoints = checkpoint_dir(dir);
  open_copy(root, checkpoints)->replace("checkpoint-epoch-000002.safetensors", "x");
  std::ofstream(checkpoints + "/checkpoint-epoch-000001.safetensors") << "older";
  // The disk could not take epoch 2 (full): the copy is the only whole one, and is kept.
  const std::string note = retire_memory_copy(root, checkpoints);
  CHECK_THAT(note, Contains("the newest checkpoint (epoch 2 (its end)) is only in this node's memory") &&
                       Contains("--resume on this node continues from it"));
  CHECK(open_copy(root, checkpoints, false));
  std::ofstream(checkpoints + "/checkpoint-epoch-000002.safetensors") << "on disk now";
  CHECK(retire_memory_copy(root, checkpoints).empty());
  CHECK_FALSE(open_copy(root, checkpoints, false));
}

TEST_CASE("a resume checks the copy in memory like any checkpoint, and against its name", "[memory][checkpoint]") {
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  config.checkpoint.memory_dir = shared_root(dir);
  config.checkpoint.resume = true;
  fs::create_directories(config.checkpoint.dir);
  new_checkpoint_run_id(config.checkpoint.dir);
  write_file_atomically(config.checkpoint.dir + "/checkpoint-epoch-000001.safetensors", checkpoint_bytes(config, 1));
  const auto copy = open_copy(config.checkpoint.memory_dir, config.checkpoint.dir);
  LocalCommunicator comm;
  auto restore = [&] {
    std::vector<TrainedModule> modules = tiny_modules(config);
    return Checkpointer(config.checkpoint, comm).restore(modules, "tiny", "sgd");
  };

  SECTION("a newer whole copy is read instead of the disk") {
    copy->replace("checkpoint-epoch-000002.safetensors", checkpoint_bytes(config, 2));
    const Restored restored = restore();
    REQUIRE(restored.checkpoint);
    CHECK(restored.checkpoint->from_memory);
    CHECK(restored.checkpoint->epoch == 2);
  }
  SECTION("a copy whose name says another position than it records is passed over") {
    copy->replace("checkpoint-epoch-000099.safetensors", checkpoint_bytes(config, 22));
    const Restored restored = restore();
    REQUIRE(restored.checkpoint);
    CHECK_FALSE(restored.checkpoint->from_memory);
    CHECK(restored.checkpoint->epoch == 1);
    REQUIRE(restored.passed_over.size() == 1);
    CHECK_THAT(restored.passed_over[0],
               Contains("checkpoint-epoch-000099.safetensors: its name says epoch 99 (its end) but it records epoch 22 (its end)"));
  }
  SECTION("a copy of another workload is passed over, and the disk's checkpoint resumed") {
    copy->replace("checkpoint-epoch-000002.safetensors", checkpoint_bytes(config, 2, "other"));
    const Restored restored = restore();
    REQUIRE(restored.checkpoint);
    CHECK(restored.checkpoint->epoch == 1);
    REQUIRE(restored.passed_over.size() == 1);
    CHECK_THAT(restored.passed_over[0], Contains("is for workload 'other', this run trains 'tiny'"));
  }
  SECTION("a damaged copy with nothing on disk starts afresh and says so") {
    fs::remove(config.checkpoint.dir + "/checkpoint-epoch-000001.safetensors");
    copy->replace("checkpoint-epoch-000002.safetensors", "not a zip");
    const Restored restored = restore();
    CHECK_FALSE(restored.checkpoint);
    REQUIRE(restored.passed_over.size() == 1);
    CHECK_THAT(restored.passed_over[0], StartsWith(copy->path() + "/checkpoint-epoch-000002.safetensors: "));
  }
}
