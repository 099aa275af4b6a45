// What a checkpoint's archive may hold (checkpoint_archive.h): everything this build's LibTorch writes for
// dtrain passes, and each kind of crafted record is refused, naming it, before LibTorch parses it.
#include "test/support/catch.h"

#include <torch/optim/adam.h>

#include "runtime/comm/local_communicator.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/checkpoint_archive.h"
#include "runtime/train/optimizer_factory.h"
#include "runtime/train/zip_integrity.h"
#include "runtime/util/file_io.h"
#include "test/support/temp_dir.h"
#include "test/support/tiny_workload.h"
#include "test/support/zip_edit.h"

using namespace dtrain;
using Catch::Matchers::Contains;

namespace {

using Records = test::ZipContents;

// A checkpoint of the tiny model (every parameter and the optimizer's state after one step), as the
// bytes dtrain writes.
std::string tiny_checkpoint(OptimizerKind optimizer, bool amsgrad_or_nesterov) {
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  config.train.optimizer = optimizer;
  config.train.nesterov = amsgrad_or_nesterov && optimizer == OptimizerKind::kSgd;
  auto model = test::make_tiny_workload()->make_model({});
  std::vector<TrainedModule> modules;
  modules.push_back({"model", model, make_optimizer(config.train, *model), nullptr});
  if (amsgrad_or_nesterov && optimizer == OptimizerKind::kAdam) {
    static_cast<torch::optim::AdamOptions&>(modules[0].optimizer->param_groups()[0].options()).amsgrad(true);
  }
  for (at::Tensor& p : model->parameters()) p.mutable_grad() = at::ones_like(p);
  modules[0].optimizer->step();
  LocalCommunicator comm;
  CheckpointMeta meta;
  meta.epoch = 3;
  meta.workload = "tiny";
  meta.optimizer = to_string(optimizer);
  meta.world_size = 2;
  meta.labels = "classes: a, b";
  EpochStats stats;
  stats.train = MetricValues({{"loss", 0.5, 5.0, 10.0}});
  meta.metrics = stats;
  config.checkpoint.memory_dir.clear();
  return read_file(Checkpointer(config.checkpoint, comm).save(meta, modules));
}

Records records_of(const std::string& zip) { return test::zip_contents_of(zip); }
std::string zip_of(const Records& records) { return test::stored_zip(records); }

// `text` with its first `from` replaced by `to` (which must be there).
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("every checkpoint this build writes holds only what a dtrain checkpoint may", "[checkpoint][archive]") {
  for (const OptimizerKind optimizer : {OptimizerKind::kSgd, OptimizerKind::kAdam, OptimizerKind::kAdamW, OptimizerKind::kAdadelta}) {
    for (const bool variant : {false, true}) {
      const std::string bytes = tiny_checkpoint(optimizer, variant);
      INFO(to_string(optimizer) << (variant ? " (nesterov, amsgrad)" : ""));
      REQUIRE(zip_damage(bytes).empty());
      CHECK(checkpoint_archive_problem(bytes).empty());
      // Rebuilt with every record stored: the check reads the records, not the zip's layout.
      CHECK(checkpoint_archive_problem(zip_of(records_of(bytes))).empty());
    }
  }
}

TEST_CASE("crafted records are refused before LibTorch parses them, each named", "[checkpoint][archive]") {
  const Records whole = records_of(tiny_checkpoint(OptimizerKind::kAdam, false));
  REQUIRE(whole.count("archive/code/__torch__.py") == 1);
  Records r = whole;
  std::string expected;
  const std::string top = "archive/code/__torch__.py";
  const std::string first_mangled = "archive/code/__torch__/___torch_mangle_0.py";
  const std::string pickle = "archive/data.pkl";

  SECTION("a misspelt type") {
    r[top] = replaced(r[top], "  epoch : Tensor", "  epoch : Tensr");
    expected = "record 'archive/code/__torch__.py' line 7: '  epoch : Tensr' is not an attribute of a type";
  }
  SECTION("a method") {
    r[top] += "  def forward(self):\n    return self.epoch\n";
    expected = "'  def forward(self):' is not a line a dtrain checkpoint's code has";
  }
  SECTION("a class that no record declares") {
    r[top] += "  evil : __torch__.___torch_mangle_999.Module\n";
    expected = "refers to class '__torch__.___torch_mangle_999.Module', which no record declares";
  }
  SECTION("a class that contains itself") {
    r[first_mangled] += "  again : __torch__.___torch_mangle_0.Module\n";
    expected = "class '__torch__.___torch_mangle_0.Module' contains itself";
  }
  SECTION("a parameter that is not declared a tensor") {
    r[top] = replaced(r[top], "__parameters__ = [\"format_version\", ", "__parameters__ = [\"other\", ");
    expected = "lists 'other' as a parameter or buffer more than once, or without declaring it a Tensor";
  }
  SECTION("a record no checkpoint has") {
    r["archive/extra/run.py"] = "import os";
    expected = "record 'archive/extra/run.py' is not one a dtrain checkpoint holds";
  }
  SECTION("a pickle that calls something else") {
    r[pickle] = replaced(r[pickle], "collections\nOrderedDict\n", "collections\nnamedtuple_\n");
    expected = "names 'collections namedtuple_', which a dtrain checkpoint's classes and tensors do not include";
  }
  SECTION("a pickle cut short") {
    r[pickle] = r[pickle].substr(0, r[pickle].size() / 2);
    expected = "record 'archive/data.pkl' (pickle, byte ";
  }
  SECTION("a pickle that recalls what it never stored") {
    // The key "epoch" (BINUNICODE), memoized (BINPUT and its id), then a BINGET ('h') of an earlier value.
    const size_t key = r[pickle].find("epochq");
    REQUIRE(key != std::string::npos);
    REQUIRE(r[pickle][key + 7] == 'h');
    r[pickle][key + 8] = static_cast<char>(250);
    expected = "recalls memo id 250, which it never stored";
  }
  SECTION("an object without an attribute its class declares") {
    r[top] += "  extra : Tensor\n";
    expected = "gives a __torch__.Module no value for its attribute 'extra'";
  }
  SECTION("an attribute of another type than declared") {
    const size_t line = r[top].find("  partial_train : ");
    REQUIRE(line != std::string::npos);
    r[top] = r[top].substr(0, line) + "  partial_train : int" + r[top].substr(r[top].find('\n', line));
    expected = "a value for 'partial_train' of another type than its class declares";
  }
  SECTION("a storage larger than its record") {
    r["archive/data/0"].pop_back();
    expected = "but its record data/0 holds " + std::to_string(whole.at("archive/data/0").size() - 1) + " bytes";
  }
  SECTION("another format version's record") {
    r["archive/version"] = "many\n";
    expected = "record 'archive/version' holds no format version";
  }
  SECTION("no records at all") {
    r.clear();
    expected = "it holds no records";
  }
  CHECK_THAT(checkpoint_archive_problem(zip_of(r)), Contains(expected));
}
