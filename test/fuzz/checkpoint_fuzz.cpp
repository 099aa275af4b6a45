// Checkpoints: the input is a checkpoint file, restored as a resume would into a small model with its
// SGD optimizer, after its tensor records' CRC-32s are recomputed so that mutations of their bytes and
// of the zip's fields reach dtrain's checks of what LibTorch read (the metadata's ranges, names and
// shapes, storages that must hold their tensors). The same bytes are also read as the progress mark
// beside the checkpoints.
#include <ATen/ATen.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include "runtime/comm/local_communicator.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/optimizer_factory.h"
#include "runtime/util/error.h"
#include "test/fuzz/fuzz_target.h"
#include "test/support/tiny_workload.h"
#include "test/support/zip_edit.h"

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


using namespace dtrain;
using namespace dtrain::fuzz;

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
  std::filesystem::copy_file(checkpointer.save(meta, modules_for(config)), dir + "/epoch-end.pt", kReplace);
  meta.epoch_samples = 640;
  meta.epoch_steps = 10;
  meta.global_batch = 64;
  meta.partial_samples = 640;
  std::filesystem::copy_file(checkpointer.save(meta, modules_for(config)), dir + "/mid-epoch.pt", kReplace);
  checkpointer.write_progress(ProgressMark{2, 1280, 1.7e9});
  std::filesystem::copy_file(work + "/progress", dir + "/progress", kReplace);
}


// The records of the seeds, other than the tensors' bytes: name -> the contents seen.
const std::map<std::string, std::set<std::string>>& seed_records() {
  static const std::map<std::string, std::set<std::string>> records = [] {
    const std::string dir = dtrain::fuzz::scratch_dir() + "/known";
    std::filesystem::create_directories(dir);
    write_seeds(dir);
    std::map<std::string, std::set<std::string>> found;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      std::ifstream in(entry.path(), std::ios::binary);
      const std::string zip((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      dtrain::test::zip_detail::for_each_entry(zip, [&](size_t, size_t, size_t at, uint32_t length, const std::string& name) {
        if (name.find("/data/") == std::string::npos && at + length <= zip.size()) found[name].insert(zip.substr(at, length));
      });
    }
    return found;
  }();
  return records;
}

int test_one_input(const uint8_t* data, size_t size) {
  const std::string dir = dtrain::fuzz::scratch_dir() + "/checkpoints";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string bytes(reinterpret_cast<const char*>(data), size);
  // LibTorch 1.13's unpickler and TorchScript parser crash on crafted input (segfaults in
  // ScriptTypeParser::parseClassConstant, reached from a changed data.pkl or code/*.py, found here), which
  // dtrain cannot guard (docs/fuzzing.md); and libFuzzer learns CRC-32s from the zip check's comparisons,
  // so CRCs do not keep its mutations out. Inputs whose records other than the tensors' bytes (data/N)
  // differ from every seed's are therefore passed over; the tensors' bytes get valid CRCs, so that
  // changes to them and to any record's size reach dtrain's own checks.
  bool foreign = false;
  dtrain::test::zip_detail::for_each_entry(bytes, [&](size_t, size_t, size_t at, uint32_t length, const std::string& name) {
    if (name.find("/data/") != std::string::npos) return;
    const auto known = seed_records().find(name);
    foreign = foreign || at + length > bytes.size() || known == seed_records().end() ||
              known->second.count(bytes.substr(at, length)) == 0;
  });
  if (foreign) return 0;
  dtrain::test::recompute_zip_crcs(bytes, [](const std::string& name) { return name.find("/data/") != std::string::npos; });
  dtrain::fuzz::write_bytes(dir + "/checkpoint-epoch-000001.pt", bytes);
  const dtrain::TrainConfig config = config_in(dir);
  std::vector<dtrain::TrainedModule> modules = modules_for(config);
  dtrain::LocalCommunicator comm;
  try {
    const auto meta = dtrain::Checkpointer(config.checkpoint, comm).restore(modules, "tiny", "sgd");
    // What a resume does next with it: the model's parameters are used and saved again.
    for (const auto& p : modules.front().module->parameters()) (void)p.sum().item<float>();
    if (meta && meta->epoch < 0) std::abort();
  } catch (const dtrain::DataError& e) {
    dtrain::fuzz::refused(e);
  }
  dtrain::fuzz::write_bytes(dir + "/progress", data, size);
  (void)dtrain::Checkpointer::read_progress(dir);
  return 0;
}

}  // namespace

DTRAIN_FUZZ_TARGET(checkpoint, write_seeds, test_one_input)
