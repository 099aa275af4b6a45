// Damaged checkpoints as disks, copies and kills leave them: one bit flipped inside a tensor, a file
// cut short, empty or overwritten; and crafted ones, every CRC valid. Each is found before a tensor is
// made, named, and a resume falls back to the newest whole checkpoint; with none whole, the run stops
// with a data error listing them.
#include "test/support/catch.h"

#include <ATen/ATen.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "runtime/comm/local_communicator.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/optimizer_factory.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/util/error.h"
#include "runtime/util/file_io.h"
#include "test/support/temp_dir.h"
#include "test/support/tiny_workload.h"
#include "test/support/train_run.h"

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
  std::snprintf(name, sizeof name, "/checkpoint-epoch-%06d.safetensors", epoch);
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
  const std::string bytes = read_file(path);
  const SafetensorsFile file = parse_safetensors(bytes);
  const SafetensorsEntry* entry = file.find("model.fc1.weight");
  REQUIRE(entry != nullptr);
  return file.tensor(*entry);
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

TEST_CASE("the layout check passes a whole checkpoint and names a flipped bit, a cut and garbage", "[checkpoint][integrity]") {
  test::TempDir dir;
  const TrainConfig config = trained(dir, 1);
  const std::string path = checkpoint_of(config, 1);
  const std::string whole = read_file(path);
  const auto problem = [&path](std::string bytes) -> std::string {
    try {
      (void)decode_checkpoint(path, std::move(bytes));
      return "";
    } catch (const DataError& e) {
      return e.message();
    }
  };
  CHECK(problem(whole).empty());
  flip_a_weight_bit(path, fc1_weight_of(path));
  CHECK(problem(read_file(path)) == "tensor 'model.fc1.weight' fails its CRC-32 check (damaged)");
  CHECK_THAT(problem(whole.substr(0, whole.size() / 3)), Contains("outside the ") || Contains("its header would be"));
  CHECK(problem("") == "it is 0 bytes, shorter than a checkpoint's 8-byte header length");
  CHECK_THAT(problem(std::string(4096, 'x')), Contains("its header would be ") && Contains("more than the 104857600"));
  CHECK_THAT(problem(std::string("PK\x03\x04", 4) + std::string(100, '\0')),
             Contains("a LibTorch archive (format 4, dtrain 0.1)") && Contains("scripts/convert_checkpoint.py"));
}

namespace {

// A file of the layout: `header` as given, then `data` zero bytes.
std::string layout(const std::string& header, size_t data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + std::string(data, '\0');
}

std::string layout_problem(const std::string& bytes) {
  try {
    (void)parse_safetensors(bytes);
    return "";
  } catch (const DataError& e) {
    return e.message();
  }
}

}  // namespace

TEST_CASE("the layout's reader checks every offset, dtype and shape against the file before a tensor is made",
          "[checkpoint][integrity]") {
  const std::string a = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  CHECK(layout_problem(layout("{" + a + "}", 8)).empty());
  CHECK(layout_problem(layout("{" + a + "}", 12)) == "its tensors take 8 bytes but the data is 12 (truncated or extended)");
  CHECK_THAT(layout_problem(layout(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", 8)),
             Contains("has data_offsets [0,16], outside the 8 bytes of data"));
  CHECK_THAT(layout_problem(layout(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 12)),
             Contains("tensor 'a' of shape [3] and dtype F32 takes 8 bytes, expected 12"));
  CHECK_THAT(layout_problem(layout(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}})", 8)),
             Contains("more elements than the file holds"));
  CHECK_THAT(layout_problem(layout(R"({"a":{"dtype":"F32","shape":[0,4611686018427387904,4611686018427387904],"data_offsets":[0,0]}})", 0)),
             Contains("more elements than the file holds"));
  CHECK_THAT(layout_problem(layout(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,8]}})", 8)),
             Contains("expected non-negative integers"));
  CHECK_THAT(layout_problem(layout(R"({"a":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}})", 8)),
             Contains("has dtype \"C64\", which dtrain does not read"));
  CHECK_THAT(layout_problem(layout("{" + a + "," + a + "}", 8)), Contains("its header names 'a' twice"));
  CHECK_THAT(layout_problem(layout(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", 12)),
             Contains("tensor 'b' starts at byte 8 of the data, expected 4 (a gap or an overlap)"));
  CHECK_THAT(layout_problem(layout(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8)),
             Contains("a gap or an overlap"));
  CHECK_THAT(layout_problem(layout(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":1}})", 4)),
             Contains("not described by exactly dtype, shape and data_offsets"));
  // Nesting is refused while it is parsed: 900 kB of brackets, which would take a recursive reader's stack.
  CHECK_THAT(layout_problem(layout(std::string(450000, '[') + std::string(450000, ']'), 0)),
             Contains("its header does not start with '{'"));
  CHECK_THAT(layout_problem(layout("{\"a\":" + std::string(450000, '[') + std::string(450000, ']') + "}", 0)),
             Contains("its header nests deeper than 3 levels"));
  CHECK_THAT(layout_problem(layout("{\"__metadata__\":{\"k\":1}}", 0)), Contains("its __metadata__ 'k' is not a string"));
  CHECK_THAT(layout_problem(std::string("\xff\xff\xff\xff\xff\xff\xff\xff", 8) + "{}"), Contains("its header would be 18446744073709551615 bytes"));
  CHECK_THAT(layout_problem(layout("{not json}", 0)), Contains("its header is not JSON"));
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
  CHECK(restored.passed_over[0] == third + ": tensor 'model.fc1.weight' fails its CRC-32 check (damaged)");
  CHECK_THAT(restored.passed_over[1], StartsWith(second + ": its header would be ") && Contains("(truncated, or not a checkpoint)"));

  // The run itself says so in its log and carries on from epoch 2.
  config.train.epochs = 4;
  const test::TrainRun run = test::train_alone(config, *test::make_tiny_workload());
  CHECK(run.result.epochs.front().epoch == 2);
  const std::string warnings = logged_warnings(config);
  CHECK_THAT(warnings, Contains("passed over a damaged checkpoint, " + third + ": tensor 'model.fc1.weight' fails"));
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
  CHECK_THAT(error, Contains(checkpoint_of(config, 2) + ": it is 0 bytes, shorter than a checkpoint's 8-byte header length"));
  CHECK_THAT(error, Contains(checkpoint_of(config, 1) + ": its header would be 0 bytes, but the file is 1000"));
}

