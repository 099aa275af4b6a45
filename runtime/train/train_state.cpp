#include "runtime/train/train_state.h"

#include <ATen/ATen.h>

#include "runtime/train/optimizer_factory.h"
#include "runtime/util/strings.h"

namespace dtrain {
namespace {

// Scales the gradients of `module` so that their global L2 norm is at most `max_norm`, as
// torch.nn.utils.clip_grad_norm_ does, but without reading the norm on the host: on a GPU the step stays
// free of synchronisation. The gradients are the averaged ones, identical on every rank, so every rank
// clips alike.
void clip_grad_norm(torch::nn::Module& module, double max_norm) {
  std::vector<at::Tensor> norms;
  std::vector<at::Tensor> grads;
  for (const at::Tensor& p : module.parameters()) {
    if (!p.grad().defined()) continue;
    grads.push_back(p.grad());
    norms.push_back(at::linalg_vector_norm(p.grad().detach(), 2.0, {}, false, at::kFloat));
  }
  if (grads.empty()) return;
  const at::Tensor total = at::linalg_vector_norm(at::stack(norms), 2.0);
  const at::Tensor coef = at::clamp_max(max_norm / (total + 1e-6), 1.0);
  for (at::Tensor& g : grads) g.mul_(coef.to(g.scalar_type()));
}

}  // namespace

TrainState::TrainState(const TrainOptions& options, c10::Device device, NonFiniteErrorFactory non_finite_error)
    : options_(options), device_(device), non_finite_error_(std::move(non_finite_error)) {
  if (options_.precision == Precision::kFp16) scaler_ = std::make_unique<LossScaler>(device_);
  first_nonfinite_step_ = at::full({}, -1, at::TensorOptions().device(device_).dtype(at::kLong));
}

TrainState::~TrainState() = default;

TrainedModule& TrainState::get(const std::string& name) {
  for (TrainedModule& m : modules_) {
    if (m.name == name) return m;
  }
  const std::string names = join(modules_, ", ", [](const TrainedModule& m) { return m.name; });
  throw Error("the training state has no module '" + name + "' (it has: " + (names.empty() ? "none" : names) + ")");
}

void TrainState::throw_wrong_class(const std::string& name) const {
  throw Error("module '" + name + "' of the training state is not of the class the step expects");
}

void TrainState::add(std::string name, std::shared_ptr<torch::nn::Module> module,
                     std::unique_ptr<torch::optim::Optimizer> optimizer) {
  for (const TrainedModule& m : modules_) {
    if (m.name == name) throw Error("the training state already has a module '" + name + "'");
  }
  module->to(device_);
  modules_.push_back(TrainedModule{std::move(name), std::move(module), std::move(optimizer), nullptr, nullptr});
}

AutocastScope TrainState::autocast() const { return AutocastScope(device_.type(), options_.precision); }

void TrainState::begin_micro_batch(const MicroBatch& micro_batch) {
  micro_batch_ = micro_batch;
  if (micro_batch_.first) group_skipped_ = false;
}

void TrainState::enable_device_steps() {
  if (options_.on_nonfinite == NonFinitePolicy::kSkipStep) {
    throw ConfigError("train.device_steps: train.on_nonfinite 'skip-step' decides on the host whether each step is "
                      "taken, which a step run on the device cannot do; use 'stop'");
  }
  for (TrainedModule& m : modules_) {
    if (m.optimizer) m.device_optimizer = std::make_unique<DeviceOptimizer>(*m.optimizer, options_.optimizer);
  }
  device_skipped_ = at::zeros({}, at::TensorOptions().device(device_).dtype(at::kLong));
  device_steps_ = true;
}

void TrainState::set_learning_rate(double lr) {
  for (TrainedModule& m : modules_) {
    if (m.device_optimizer) {
      m.device_optimizer->set_lr(lr);
    } else if (m.optimizer) {
      dtrain::set_learning_rate(*m.optimizer, lr);
    }
  }
}

void TrainState::device_state_to_optimizers() {
  for (TrainedModule& m : modules_) {
    if (m.device_optimizer) m.device_optimizer->sync_to_state();
  }
}

void TrainState::device_state_from_optimizers() {
  for (TrainedModule& m : modules_) {
    if (m.device_optimizer) m.device_optimizer->sync_from_state();
  }
}

int64_t TrainState::skipped_steps() const {
  return skipped_steps_ + (device_steps_ ? device_skipped_.item<int64_t>() : 0);
}

void TrainState::begin_epoch() {
  if (device_steps_) device_skipped_.zero_();
  skipped_steps_ = 0;
  group_skipped_ = false;
  comm_ = StepCommStats{};
  first_nonfinite_step_.fill_(-1);
}

StepCommStats TrainState::take_comm_stats() {
  StepCommStats taken = comm_;
  comm_ = StepCommStats{};
  return taken;
}

int64_t TrainState::first_nonfinite_step() const { return first_nonfinite_step_.item<int64_t>(); }

void TrainState::backward(const at::Tensor& loss, const std::vector<std::string>& names) {
  std::vector<GradReducer*> reducers;
  for (const std::string& name : names) {
    TrainedModule& m = get(name);
    if (!m.optimizer) throw Error("backward() into module '" + name + "', which no optimizer trains");
    if (m.reducer == nullptr) throw Error("module '" + name + "' has no gradient reducer yet: backward() outside a run");
    reducers.push_back(m.reducer.get());
  }
  for (GradReducer* reducer : reducers) reducer->prepare_backward(micro_batch_.last);
  // The weight is 1/group_size where the loss is finite and NaN where it is not (0 x inf = NaN): a bad
  // loss on one rank makes its gradients NaN, and the average carries that to every rank, so the
  // gradient check after the allreduce is one signal that all ranks agree on, with no collective of its
  // own and no host read here.
  const at::Tensor weight = loss.detach().mul(0.0).add_(1.0 / static_cast<double>(micro_batch_.group_size));
  at::Tensor objective = loss * weight;
  if (scaler_) objective = scaler_->scale(objective);
  objective.backward();
  for (GradReducer* reducer : reducers) {
    const StepCommStats stats = reducer->finish_backward();
    comm_.bytes_reduced += stats.bytes_reduced;
    comm_.comm_s += stats.comm_s;
    comm_.exposed_comm_s += stats.exposed_comm_s;
    comm_.buckets += stats.buckets;
  }
}

bool TrainState::step(const std::string& name) {
  if (!micro_batch_.last) return false;
  TrainedModule& m = get(name);
  if (!m.optimizer) throw Error("step() of module '" + name + "', which no optimizer trains");
  if (device_steps_) return device_step(m);
  bool taken = true;
  if (scaler_) {
    // fp16: non-finite gradients are expected while the loss scale settles; the scaler skips those steps
    // on every rank alike (the gradients it checks are the averaged ones). A NaN loss shows in the
    // metric sums, which the progress checks and the epoch end inspect.
    std::vector<at::Tensor> grads;
    for (const at::Tensor& p : m.module->parameters()) grads.push_back(p.grad());
    const bool found_inf = scaler_->unscale_and_check(grads);
    scaler_->update(found_inf);
    taken = !found_inf;
  } else {
    const at::Tensor finite = m.reducer->all_finite();
    if (options_.on_nonfinite == NonFinitePolicy::kSkipStep) {
      // One host read per optimizer step: the price of deciding on the host (docs/failures.md).
      taken = finite.item<bool>();
    } else if (!device_.is_cuda()) {
      // On the CPU reading the flag costs nothing: stop before the step, with the parameters still finite.
      if (!finite.item<bool>()) {
        throw non_finite_error_(micro_batch_.epoch, micro_batch_.step, micro_batch_.step,
                                "the loss or the averaged gradients are NaN or infinite");
      }
    } else {
      note_nonfinite_step(finite);
    }
  }
  if (taken) {
    if (options_.clip_grad_norm > 0) clip_grad_norm(*m.module, options_.clip_grad_norm);
    m.optimizer->step();
  }
  m.reducer->zero_grad();
  if (!taken) {
    ++skipped_steps_;
    group_skipped_ = true;
  }
  return taken;
}

void TrainState::note_nonfinite_step(const at::Tensor& finite) {
  // In place: a captured step writes the same tensor at every replay.
  first_nonfinite_step_.copy_(at::where(finite.logical_or(first_nonfinite_step_ >= 0), first_nonfinite_step_,
                                        at::full({}, micro_batch_.step, first_nonfinite_step_.options())));
}

bool TrainState::device_step(TrainedModule& m) {
  at::Tensor take;
  if (scaler_) {
    std::vector<at::Tensor> grads;
    for (const at::Tensor& p : m.module->parameters()) grads.push_back(p.grad());
    const at::Tensor found_inf = scaler_->unscale(grads);
    scaler_->update(found_inf);
    take = found_inf.logical_not();
  } else {
    // train.on_nonfinite stop: the step is held off, so the parameters stay finite until the host's next
    // check of the flag stops the run.
    take = m.reducer->all_finite();
    note_nonfinite_step(take);
  }
  if (options_.clip_grad_norm > 0) clip_grad_norm(*m.module, options_.clip_grad_norm);
  m.device_optimizer->step(take);
  m.reducer->zero_grad();
  device_skipped_.add_(take.logical_not().to(at::kLong));
  return true;
}

}  // namespace dtrain
