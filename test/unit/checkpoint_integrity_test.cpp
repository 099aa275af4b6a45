// Damaged checkpoints as disks, copies and kills leave them: one bit flipped inside a tensor, a file
// cut short, empty or overwritten. Each is found before LibTorch reads it, named, and a resume falls back
// to the newest whole checkpoint; with none whole, the run stops with a data error listing them.
#include "test/support/catch.h"

#include <ATen/ATen.h>
#include <torch/serialize/archive.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "runtime/comm/local_communicator.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/optimizer_factory.h"
#include "runtime/train/zip_integrity.h"
#include "runtime/util/error.h"
#include "runtime/util/file_io.h"
#include "test/support/temp_dir.h"
#include "test/support/tiny_workload.h"
#include "test/support/train_run.h"
#include "test/support/zip_edit.h"

using namespace dtrain;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

// A tiny run of `epochs` epochs with every checkpoint kept on disk (no copy in memory).
TrainConfig trained(const test::TempDir& dir, int64_t epochs) {
  TrainConfig config = test::tiny_config(dir.path());
  config.train.epochs = epochs;
  config.checkpoint.keep = 0;
  config.checkpoint.memory_dir.clear();
  test::train_alone(config, *test::make_tiny_workload());
  return config;
}

std::string checkpoint_of(const TrainConfig& config, int epoch) {
  char name[64];
  std::snprintf(name, sizeof name, "/checkpoint-epoch-%06d.pt", epoch);
  return config.checkpoint.dir + name;
}

// Flips one bit of the stored bytes of the run's fc1.weight: found in the file by its own bytes.
void flip_a_weight_bit(const std::string& path, const at::Tensor& weight) {
  std::string bytes = read_file(path);
  const std::string needle(static_cast<const char*>(weight.data_ptr()), static_cast<size_t>(weight.nbytes()));
  const size_t at = bytes.find(needle);
  REQUIRE(at != std::string::npos);
  bytes[at + needle.size() / 2] ^= 0x10;
  write_file_atomically(path, bytes);
}

Restored restore(const TrainConfig& config) {
  auto workload = test::make_tiny_workload();
  auto model = workload->make_model({});
  std::vector<TrainedModule> modules;
  modules.push_back({"model", model, make_optimizer(config.train, *model), nullptr});
  LocalCommunicator comm;
  Restored restored = Checkpointer(config.checkpoint, comm).restore(modules, "tiny", "sgd");
  REQUIRE(restored.checkpoint.has_value());
  return restored;
}

at::Tensor fc1_weight_of(const std::string& path) {
  torch::serialize::InputArchive archive;
  archive.load_from(path);
  torch::serialize::InputArchive modules, model, fc1;
  archive.read("modules", modules);
  modules.read("model", model);
  model.read("fc1", fc1);
  at::Tensor weight;
  fc1.read("weight", weight);
  return weight.contiguous();
}

// The `warning` records of every run log under log.dir.
std::string logged_warnings(const TrainConfig& config) {
  std::string warnings;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(config.log.dir)) {
    if (entry.path().filename() != "events.jsonl") continue;
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) {
      if (line.find("\"event\":\"warning\"") != std::string::npos) warnings += line + "\n";
    }
  }
  return warnings;
}

}  // namespace

TEST_CASE("the zip check passes a whole checkpoint and names a flipped bit, a cut and garbage", "[checkpoint][integrity]") {
  test::TempDir dir;
  const TrainConfig config = trained(dir, 1);
  const std::string path = checkpoint_of(config, 1);
  const std::string whole = read_file(path);
  CHECK(zip_damage(whole).empty());

  flip_a_weight_bit(path, fc1_weight_of(path));
  CHECK_THAT(zip_damage(read_file(path)), StartsWith("record '") && Contains("' fails its CRC-32 check (stored "));

  CHECK_THAT(zip_damage(whole.substr(0, whole.size() / 3)), Contains("no end of central directory"));
  CHECK(zip_damage("") == "it is empty");
  CHECK_THAT(zip_damage(std::string(4096, 'x')), Contains("no end of central directory"));
  // The directory intact but a record cut out of the middle: its local header is not where it says.
  std::string holed = whole;
  holed.erase(64, 200);
  CHECK_FALSE(zip_damage(holed).empty());
}

TEST_CASE("a resume passes over damaged newer checkpoints, names them, and loads the newest whole one",
          "[checkpoint][integrity]") {
  test::TempDir dir;
  TrainConfig config = trained(dir, 3);
  config.checkpoint.resume = true;
  const std::string third = checkpoint_of(config, 3);
  const std::string second = checkpoint_of(config, 2);
  flip_a_weight_bit(third, fc1_weight_of(third));
  const std::string whole_second = read_file(second);
  write_file_atomically(second, whole_second.substr(0, whole_second.size() / 3));

  const Restored restored = restore(config);
  CHECK(restored.checkpoint->path == checkpoint_of(config, 1));
  CHECK(restored.checkpoint->epoch == 1);
  REQUIRE(restored.passed_over.size() == 2);
  CHECK_THAT(restored.passed_over[0], StartsWith(third + ": record '") && Contains("fails its CRC-32 check"));
  CHECK_THAT(restored.passed_over[1], StartsWith(second + ": it has no end of central directory"));

  // The run itself says so in its log and carries on from epoch 2.
  config.train.epochs = 4;
  const test::TrainRun run = test::train_alone(config, *test::make_tiny_workload());
  CHECK(run.result.epochs.front().epoch == 2);
  const std::string warnings = logged_warnings(config);
  CHECK_THAT(warnings, Contains("passed over a damaged checkpoint, " + third + ": record '"));
  CHECK_THAT(warnings, Contains("resuming from the newest whole one, " + checkpoint_of(config, 1)));
}

TEST_CASE("with every checkpoint damaged the resume stops with a data error naming each", "[checkpoint][integrity]") {
  test::TempDir dir;
  TrainConfig config = trained(dir, 2);
  config.checkpoint.resume = true;
  write_file_atomically(checkpoint_of(config, 2), "");
  write_file_atomically(checkpoint_of(config, 1), std::string(1000, '\0'));
  const std::string error = test::training_error<DataError>(config, *test::make_tiny_workload());
  CHECK_THAT(error, Contains("every checkpoint in checkpoint.dir '" + config.checkpoint.dir + "' is damaged:"));
  CHECK_THAT(error, Contains(checkpoint_of(config, 2) + ": it is empty"));
  CHECK_THAT(error, Contains(checkpoint_of(config, 1) + ": it has no end of central directory"));
}

TEST_CASE("a record cut short with valid CRCs is refused before any of its tensors is used", "[checkpoint][integrity]") {
  // The record of fc1.weight made 12 bytes shorter in the zip's headers and its CRC-32 recomputed: the
  // zip check passes it, and LibTorch would make a tensor of the pickled shape over fewer bytes.
  test::TempDir dir;
  TrainConfig config = trained(dir, 1);
  const std::string path = checkpoint_of(config, 1);
  std::string bytes = read_file(path);
  const at::Tensor weight = fc1_weight_of(path);
  const size_t at = bytes.find(std::string(static_cast<const char*>(weight.data_ptr()), static_cast<size_t>(weight.nbytes())));
  REQUIRE(at != std::string::npos);
  std::string record;
  test::zip_detail::for_each_entry(bytes, [&](size_t, size_t, size_t data, uint32_t size, const std::string& name) {
    if (at >= data && at < data + size) record = name;
  });
  REQUIRE_FALSE(record.empty());
  REQUIRE(test::shorten_zip_record(bytes, record, 12));
  CHECK(zip_damage(bytes).empty());
  write_file_atomically(path, bytes);

  config.checkpoint.resume = true;
  const std::string error = test::training_error<DataError>(config, *test::make_tiny_workload());
  const std::string key = record.substr(record.rfind('/') + 1);
  CHECK_THAT(error, Contains(path + ": record 'archive/data.pkl' (pickle, byte ") &&
                        Contains("says storage " + key + " holds " + std::to_string(weight.numel()) + " elements of 4 bytes, "
                                 "but its record data/" + key + " holds " + std::to_string(weight.nbytes() - 12) + " bytes"));
}

TEST_CASE("TorchScript text that is not a dtrain checkpoint's is refused before LibTorch parses it", "[checkpoint][integrity]") {
  // Bytes no tokenizer accepts at the end of a type definition, CRCs recomputed: LibTorch 1.13's reader
  // throws std::runtime_error for some such edits and crashes on others; the archive check refuses all.
  test::TempDir dir;
  TrainConfig config = trained(dir, 1);
  const std::string path = checkpoint_of(config, 1);
  std::string bytes = read_file(path);
  bool garbled = false;
  test::zip_detail::for_each_entry(bytes, [&](size_t cd, size_t, size_t data, uint32_t size, const std::string& name) {
    const bool stored = test::zip_detail::get16(bytes, cd + 10) == 0;
    if (garbled || !stored || name.size() < 3 || name.compare(name.size() - 3, 3, ".py") != 0 || size < 16) return;
    for (size_t i = data + size - 8; i < data + size; ++i) bytes[i] = '\xff';
    garbled = true;
  });
  REQUIRE(garbled);
  test::recompute_zip_crcs(bytes);
  write_file_atomically(path, bytes);
  config.checkpoint.resume = true;
  const std::string error = test::training_error<DataError>(config, *test::make_tiny_workload());
  CHECK_THAT(error, Contains("every checkpoint in checkpoint.dir '" + config.checkpoint.dir + "' is damaged:"));
  CHECK_THAT(error, Contains(path + ": record 'archive/code/") && Contains(".py' line "));
}
