// What a workload supplies to the one training loop: its modules, its data and its step. Workloads
// never run their own epoch loop; ClassifierWorkload covers supervised classification in a few lines.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <any>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/config/config.h"
#include "runtime/config/config_fields.h"
#include "runtime/data/dataset.h"
#include "runtime/util/directory.h"
#include "runtime/data/tensor_dataset.h"
#include "runtime/train/train_step.h"

namespace dtrain {

// A model maps a batch of inputs to a batch of outputs. Parameters and buffers are registered as usual
// in torch::nn::Module.
class Model : public torch::nn::Module {
 public:
  virtual at::Tensor forward(const at::Tensor& inputs) = 0;
};

struct WorkloadData {
  std::shared_ptr<Dataset> train;
  std::shared_ptr<Dataset> test;
  int64_t num_classes = 0;  // classifiers: what the model's last layer is sized for
  int64_t image_size = 0;   // image workloads: the side of the square images the model sees
  std::string description;  // where the data came from, for the run log
  int64_t bad_files_left_out = 0;  // files the start-up check found bad, left out (data.skip_bad_images)
  // What gives the model's outputs their meaning where the data decides it, one fact per line: an image
  // folder's classes in label order ("classes: cat, dog"), a graph's classes and papers. Checkpoints
  // record it, and a resume on data whose labels mean other things stops. Empty for fixed label sets
  // (MNIST, CIFAR-10) and synthetic data.
  std::string labels;
  // What the workload's modules are built with besides the batches, of the workload's own type (a graph
  // for a graph network); the loop never looks into it. Not batched, not checkpointed.
  std::any context;
};

// A module to train, under the name the step and the checkpoints know it by.
struct NamedModule {
  std::string name;
  std::shared_ptr<torch::nn::Module> module;
  // Parameters (names as in named_parameters()) the optimizer applies no weight decay to, whatever
  // train.weight_decay says: the recipe's own exemptions (the GCN decays its first layer only).
  std::vector<std::string> no_weight_decay = {};
  // false: a module the step updates itself (a GAN generator's moving average): checkpointed with the
  // others, but without an optimizer or a gradient reducer, and not counted as trained parameters.
  bool trained = true;
};

// Pictures a workload makes from its trained modules for a user to look at (a GAN's grid of samples),
// written by rank 0 after an epoch's evaluation, in eval mode, with no collective.
class SampleGridWriter {
 public:
  virtual ~SampleGridWriter() = default;
  // Whether epoch `epoch` of `epochs` gets a grid.
  virtual bool due(int64_t epoch, int64_t epochs) const = 0;
  // Writes the grid for `epoch` into the run directory `run` (open: files go through it, never through a
  // link) and returns the paths written.
  virtual std::vector<std::string> write(const Directory& run, int64_t epoch, TrainState& state) = 0;
};

class Workload {
 public:
  virtual ~Workload() = default;

  virtual std::string name() const = 0;

  // The data it trains on: format and default location, as --list-workloads shows it.
  virtual std::string data_format() const = 0;

  // The workload's recipe over the generic defaults of config.h: batch size, optimizer, learning rate
  // and schedule, epochs, image size. Files and flags override it (see configure_workload).
  virtual void apply_defaults(TrainConfig& config) const { (void)config; }

  // Throws ConfigError for a merged configuration the workload cannot run (configure_workload calls it),
  // e.g. gradient accumulation for a GAN step that updates two networks in turn.
  virtual void check_config(const TrainConfig& config) const { (void)config; }

  // Local. Freshly initialised modules for `data` and the run's `config` (from torch's global RNG,
  // seeded by the trainer), each trained with its own optimizer and reducer; the reducers then copy rank
  // 0's parameters to every rank.
  virtual std::vector<NamedModule> make_modules(const WorkloadData& data, const TrainConfig& config) const = 0;

  // Local. Loads or generates both splits (called before make_modules). Throws DataError saying what is
  // missing and how to get it.
  // Reads config.data and the workload's own options; draws from config.train.seed.
  virtual WorkloadData load_data(const TrainConfig& config) const = 0;

  // The step that trains and evaluates the modules of make_modules().
  virtual std::unique_ptr<TrainStep> make_step(const TrainConfig& config) const = 0;

  // What the run writes besides its metrics and checkpoints for a user to look at; none by default.
  virtual std::unique_ptr<SampleGridWriter> make_sample_writer(const TrainConfig& /*config*/) const { return nullptr; }

  // Whether every pass computes the whole input, whichever samples its batch holds (a full-graph network:
  // the batch only picks the nodes whose loss counts), so that splitting a batch saves no computation.
  // Under train.deterministic every rank of such a workload trains the whole global batch in one pass
  // (runtime/train/batch_plan.h) instead of one pass per shard.
  virtual bool whole_input_passes() const { return false; }
};

// A classifier: one module, "model", whose outputs are class scores; trained by SupervisedStep on the
// mean loss, evaluated on accuracy and loss.
class ClassifierWorkload : public Workload {
 public:
  enum class Outputs { kLogProbabilities, kLogits };  // log_softmax outputs take NLL, logits cross-entropy

  // Local. A freshly initialised model for `data` (data.num_classes outputs).
  virtual std::shared_ptr<Model> make_model(const WorkloadData& data) const = 0;
  virtual Outputs outputs() const { return Outputs::kLogits; }

  std::vector<NamedModule> make_modules(const WorkloadData& data, const TrainConfig&) const override {
    return {{"model", make_model(data)}};
  }
  std::unique_ptr<TrainStep> make_step(const TrainConfig& config) const override;
};

// The configuration of a run of `workload`: the generic defaults, then its recipe, then the keys the
// file and flags set (`sources`, as the command line recorded them). Keys the recipe changed are added to
// `sources` as coming from "the NAME workload's defaults", so errors about them say where they came from.
// Throws ConfigError for a key of another workload's options.
TrainConfig configure_workload(const Workload& workload, const TrainConfig& user, ConfigSources& sources,
                               const ConfigSchema& schema);

// The workload's recipe as key-value pairs in the order of the configuration reference: epochs, batch
// size, optimizer, learning rate and schedule always, other keys where they differ from the generic
// defaults.
std::vector<std::pair<std::string, std::string>> workload_recipe(const Workload& workload, const ConfigSchema& schema);

}  // namespace dtrain
