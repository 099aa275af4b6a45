// What a workload's step trains and how: named modules, each with its optimizer and gradient reducer,
// and the context of the current micro-batch (autocast precision, fp16 loss scaling, gradient
// accumulation, the non-finite policy). The trainer owns the state and moves it from step to step; a
// workload's TrainStep calls backward() and step() on it and never talks to a reducer or an optimizer
// about averaging, accumulation or NaN handling itself.
#pragma once

#include <c10/core/Device.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/config/config.h"
#include "runtime/reduce/grad_reducer.h"
#include "runtime/train/autocast_scope.h"
#include "runtime/train/loss_scaler.h"
#include "runtime/util/error.h"

namespace dtrain {

// One trained module: its parameters are averaged by its reducer and updated by its optimizer.
struct TrainedModule {
  std::string name;  // as the workload named it: "model"; "generator", "discriminator"
  std::shared_ptr<torch::nn::Module> module;
  // Null for a module the step updates itself (NamedModule::trained false): no optimizer, no reducer.
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::unique_ptr<GradReducer> reducer;  // set when a run starts (the reducer syncs the replicas)
};

// Where the trainer is: the micro-batch within its optimizer step, and the step within the epoch.
struct MicroBatch {
  int64_t epoch = 0;
  int64_t step = 0;        // 1-based, within the epoch: the step progress lines and errors name
  int64_t group_size = 1;  // micro-batches in this optimizer step (train.accumulate, or fewer at the end)
  bool first = true;       // the group's first micro-batch
  bool last = true;        // the group's last micro-batch: gradients are averaged and the optimizer steps
  // The same on every rank, new each epoch: draws that belong to a sample rather than to a rank (a GAN's
  // latent vectors) come from (sample_seed, Batch::indices), so they do not depend on the world size.
  uint64_t sample_seed = 0;
  // The factor on this micro-batch's mean loss: 1/group_size, or under train.deterministic its shard's
  // share of the global batch's samples (the shards' weighted gradients then sum to the global mean's).
  double weight = 1.0;
};

// The error that stops a run for non-finite values at steps [first, last] of `epoch`, with the advice
// the trainer gives (learning rate, where to resume).
using NonFiniteErrorFactory =
    std::function<NonFiniteError(int64_t epoch, int64_t first_step, int64_t last_step, const std::string& what)>;

class TrainState {
 public:
  TrainState(const TrainOptions& options, c10::Device device, NonFiniteErrorFactory non_finite_error);
  ~TrainState();
  TrainState(const TrainState&) = delete;
  TrainState& operator=(const TrainState&) = delete;

  c10::Device device() const { return device_; }
  const TrainOptions& options() const { return options_; }
  std::vector<TrainedModule>& modules() { return modules_; }
  const std::vector<TrainedModule>& modules() const { return modules_; }
  // Throws Error naming the modules there are when there is no module `name`.
  TrainedModule& get(const std::string& name);
  torch::nn::Module& module(const std::string& name) { return *get(name).module; }
  // The module `name` as its concrete class; throws Error when it is another one.
  template <class M>
  M& module_as(const std::string& name) {
    auto* typed = dynamic_cast<M*>(get(name).module.get());
    if (typed == nullptr) throw_wrong_class(name);
    return *typed;
  }

  // Adds a module (on the state's device) and its optimizer (null: a module no optimizer trains). Local.
  void add(std::string name, std::shared_ptr<torch::nn::Module> module, std::unique_ptr<torch::optim::Optimizer> optimizer);

  // The forward pass's mixed precision: `{ auto scope = state.autocast(); outputs = model(inputs); }`.
  // Returned by value (guaranteed copy elision): no allocation per micro-batch.
  AutocastScope autocast() const;

  // Backpropagates `loss`, the mean over this micro-batch, into the gradients of `modules` (names).
  // Accumulation weighs it by 1/group_size; fp16 scales it; a non-finite loss poisons the gradients so
  // that every rank sees it after averaging. At the last micro-batch of an optimizer step, each named
  // module's reducer averages its gradients over all ranks while backward runs (collective).
  void backward(const at::Tensor& loss, const std::vector<std::string>& modules);

  // At the last micro-batch of an optimizer step: the optimizer step of module `name` on its averaged
  // gradients (clipped to train.clip_grad_norm when set), then zeroed gradients. A step whose gradients
  // are not finite is skipped (fp16 overflow, train.on_nonfinite skip-step) or stops the run (stop:
  // NonFiniteError, at once on the CPU, at the next check point on a GPU, where the host does not wait
  // for the flag). Returns whether it stepped; before the last micro-batch it does nothing and returns
  // false.
  bool step(const std::string& name);

  // The learning rate of every trained module's optimizer.
  void set_learning_rate(double lr);

  const MicroBatch& micro_batch() const { return micro_batch_; }

  // --- for the trainer --------------------------------------------------------------------------
  void begin_micro_batch(const MicroBatch& micro_batch);
  // Starts an epoch: clears the skipped-step count, the device-side non-finite flag and the comm stats.
  void begin_epoch();
  // Communication of the backward passes since the last call.
  StepCommStats take_comm_stats();
  // Optimizer steps skipped this epoch, and whether the current group had one.
  int64_t skipped_steps() const;
  bool group_skipped() const { return group_skipped_; }
  // GPU with train.on_nonfinite stop: the first step of this epoch whose gradients were not finite, or
  // -1 (one host read).
  int64_t first_nonfinite_step() const;
  const LossScaler* scaler() const { return scaler_.get(); }

 private:
  [[noreturn]] void throw_wrong_class(const std::string& name) const;
  // GPU, stop policy: records this micro-batch's step as the first non-finite one unless one is already.
  void note_nonfinite_step(const at::Tensor& finite);

  TrainOptions options_;
  c10::Device device_;
  NonFiniteErrorFactory non_finite_error_;
  std::vector<TrainedModule> modules_;
  std::unique_ptr<LossScaler> scaler_;  // fp16 only
  MicroBatch micro_batch_;
  StepCommStats comm_;
  int64_t skipped_steps_ = 0;
  bool group_skipped_ = false;
  at::Tensor first_nonfinite_step_;  // GPU, stop policy: 0-dim int64 on the device, -1 = none yet
};

}  // namespace dtrain
