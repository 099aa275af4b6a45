// Checkpoints: the input is a checkpoint file, restored as a resume would into a small model with its
// SGD optimizer, after every record's CRC-32 is recomputed so that mutations of any record reach the
// whole load path: the archive check before LibTorch, LibTorch's reader, then dtrain's checks of what it
// read (the metadata's ranges, names and shapes). The same bytes are also read as the progress mark
// beside the checkpoints.
#include <ATen/ATen.h>

#include <cstdlib>
#include <filesystem>

#include "runtime/comm/local_communicator.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/optimizer_factory.h"
#include "runtime/util/error.h"
#include "runtime/util/file_io.h"
#include "test/fuzz/fuzz_target.h"
#include "test/support/tiny_workload.h"
#include "test/support/zip_edit.h"

namespace dtrain::fuzz::checkpoint_target {
namespace {

dtrain::TrainConfig config_in(const std::string& dir) {
  dtrain::TrainConfig config = dtrain::test::tiny_config(dir);
  config.checkpoint.dir = dir;
  config.checkpoint.resume = true;
  config.checkpoint.keep = 0;
  config.checkpoint.memory_dir.clear();
  return config;
}

std::vector<dtrain::TrainedModule> modules_for(const dtrain::TrainConfig& config) {
  static const auto workload = dtrain::test::make_tiny_workload();
  auto model = workload->make_model({});
  std::vector<dtrain::TrainedModule> modules;
  modules.push_back({"model", model, dtrain::make_optimizer(config.train, *model), nullptr});
  return modules;
}

// Seeds are written over those of an earlier run in the same corpus.
constexpr auto kReplace = std::filesystem::copy_options::overwrite_existing;

void write_seeds(const std::string& dir) {
  const std::string work = scratch_dir() + "/seeds";
  std::filesystem::create_directories(work);
  const TrainConfig config = config_in(work);
  LocalCommunicator comm;
  Checkpointer checkpointer(config.checkpoint, comm);
  CheckpointMeta meta;
  meta.epoch = 1;
  meta.seed = 7;
  meta.workload = "tiny";
  meta.optimizer = "sgd";
  meta.world_size = 2;
  meta.labels = "0 zero\n1 one\n";
  const std::string epoch_end = checkpointer.save(meta, modules_for(config));
  std::filesystem::copy_file(epoch_end, dir + "/epoch-end.pt", kReplace);
  // The same with every record stored as it is: LibTorch deflates some code records, whose mutations
  // would otherwise only ever fail to inflate, never reach the code's check and LibTorch's parser.
  write_bytes(dir + "/epoch-end-stored.pt", dtrain::test::stored_zip(dtrain::test::zip_contents_of(read_file(epoch_end))));
  meta.epoch_samples = 640;
  meta.epoch_steps = 10;
  meta.global_batch = 64;
  meta.partial_samples = 640;
  std::filesystem::copy_file(checkpointer.save(meta, modules_for(config)), dir + "/mid-epoch.pt", kReplace);
  write_progress_mark(config.checkpoint.dir, ProgressMark{2, 1280, 1.7e9});
  std::filesystem::copy_file(work + "/progress", dir + "/progress", kReplace);
}

int test_one_input(const uint8_t* data, size_t size) {
  const std::string dir = dtrain::fuzz::scratch_dir() + "/checkpoints";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string bytes(reinterpret_cast<const char*>(data), size);
  // Every record's CRC-32 is made valid again, so that every mutation of a record's content (the pickle,
  // the TorchScript code, the tensors' bytes) and of its size reaches what a crafted file would reach:
  // dtrain's archive check (checkpoint_archive.h) and, for what it accepts, LibTorch's reader. LibTorch
  // 1.13 crashes on crafted pickles and code; the check must refuse all of those first.
  dtrain::test::recompute_zip_crcs(bytes);
  dtrain::fuzz::write_bytes(dir + "/checkpoint-epoch-000001.pt", bytes);
  const dtrain::TrainConfig config = config_in(dir);
  std::vector<dtrain::TrainedModule> modules = modules_for(config);
  dtrain::LocalCommunicator comm;
  try {
    const auto meta = dtrain::Checkpointer(config.checkpoint, comm).restore(modules, "tiny", "sgd").checkpoint;
    // What a resume does next with it: the model's parameters are used and saved again.
    for (const auto& p : modules.front().module->parameters()) (void)p.sum().item<float>();
    if (meta && meta->epoch < 0) std::abort();
  } catch (const dtrain::DataError& e) {
    dtrain::fuzz::refused(e);
  }
  dtrain::fuzz::write_bytes(dir + "/progress", data, size);
  (void)dtrain::read_progress_mark(dir);
  return 0;
}

}  // namespace
}  // namespace dtrain::fuzz::checkpoint_target

DTRAIN_FUZZ_TARGET(checkpoint, dtrain::fuzz::checkpoint_target::write_seeds, dtrain::fuzz::checkpoint_target::test_one_input)
