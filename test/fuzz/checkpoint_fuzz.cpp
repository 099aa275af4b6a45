// Checkpoints: the input is a checkpoint file, restored as a resume would into a small model with its
// SGD optimizer, twice: as it is (the layout's reader: header length, JSON, offsets, dtypes, shapes,
// CRCs), and, where the layout reads, rewritten with every tensor's CRC-32 made valid, so that mutations
// of the header, the records and the tensors' bytes reach the whole load path (the metadata's ranges,
// names, shapes, the optimizer state against its parameters). The same bytes are also read as the
// progress mark beside the checkpoints.
#include <ATen/ATen.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include "runtime/checkpoint/safetensors.h"
#include "runtime/comm/local_communicator.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/optimizer_factory.h"
#include "runtime/util/error.h"
#include "runtime/util/file_io.h"
#include "test/fuzz/fuzz_target.h"
#include "test/support/tiny_workload.h"

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
  std::filesystem::copy_file(epoch_end, dir + "/epoch-end.safetensors", kReplace);
  meta.epoch_samples = 640;
  meta.epoch_steps = 10;
  meta.global_batch = 64;
  meta.partial_samples = 640;
  std::filesystem::copy_file(checkpointer.save(meta, modules_for(config)), dir + "/mid-epoch.safetensors", kReplace);
  write_progress_mark(config.checkpoint.dir, ProgressMark{2, 1280, 1.7e9});
  std::filesystem::copy_file(work + "/progress", dir + "/progress", kReplace);
}

// `bytes` with every tensor's CRC-32 recomputed, where they read as the layout; else as they are.
std::string with_valid_crcs(const std::string& bytes) {
  try {
    const dtrain::SafetensorsFile file = dtrain::parse_safetensors(bytes);
    dtrain::NamedTensors tensors;
    nlohmann::json crcs = nlohmann::json::object();
    for (const dtrain::SafetensorsEntry& e : file.entries) {
      const std::string_view data = file.bytes_of(e);
      crcs[e.name] = ::crc32(::crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size()));
      tensors.emplace_back(e.name, file.tensor(e));
    }
    std::map<std::string, std::string> metadata = file.metadata;
    metadata["crc32"] = crcs.dump();
    return dtrain::write_safetensors(tensors, metadata);
  } catch (const dtrain::Error&) {
    return bytes;
  }
}

void restore_from(const std::string& dir, const std::string& bytes) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  dtrain::fuzz::write_bytes(dir + "/checkpoint-epoch-000001.safetensors", bytes);
  const dtrain::TrainConfig config = config_in(dir);
  std::vector<dtrain::TrainedModule> modules = modules_for(config);
  dtrain::LocalCommunicator comm;
  try {
    const auto meta = dtrain::Checkpointer(config.checkpoint, comm).restore(modules, "tiny", "sgd").checkpoint;
    // What a resume does next with it: the model's parameters are used, the optimizer steps.
    for (auto& p : modules.front().module->parameters()) {
      (void)p.sum().item<float>();
      p.mutable_grad() = at::ones_like(p);
    }
    modules.front().optimizer->step();
    if (meta && meta->epoch < 0) std::abort();
  } catch (const dtrain::DataError& e) {
    dtrain::fuzz::refused(e);
  }
}

int test_one_input(const uint8_t* data, size_t size) {
  const std::string dir = dtrain::fuzz::scratch_dir() + "/checkpoints";
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  restore_from(dir, bytes);
  const std::string repaired = with_valid_crcs(bytes);
  if (repaired != bytes) restore_from(dir, repaired);
  dtrain::fuzz::write_bytes(dir + "/progress", data, size);
  (void)dtrain::read_progress_mark(dir);
  return 0;
}

}  // namespace
}  // namespace dtrain::fuzz::checkpoint_target

DTRAIN_FUZZ_TARGET(checkpoint, dtrain::fuzz::checkpoint_target::write_seeds, dtrain::fuzz::checkpoint_target::test_one_input)
