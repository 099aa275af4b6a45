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
  modules_.push_back(TrainedModule{std::move(name), std::move(module), std::move(optimizer), nullptr});
}

AutocastScope TrainState::autocast() const { return AutocastScope(device_.type(), options_.precision); }

void TrainState::begin_micro_batch(const MicroBatch& micro_batch) {
  micro_batch_ = micro_batch;
  if (micro_batch_.first) group_skipped_ = false;
}

void TrainState::set_learning_rate(double lr) {
  for (TrainedModule& m : modules_) {
    if (m.optimizer) dtrain::set_learning_rate(*m.optimizer, lr);
  }
}

int64_t TrainState::skipped_steps() const {
  return skipped_steps_;
}

void TrainState::begin_epoch() {
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
  // The weight is micro_batch_.weight where the loss is finite and NaN where it is not (0 x inf = NaN): a bad
  // loss on one rank makes its gradients NaN, and the average carries that to every rank, so the
  // gradient check after the allreduce is one signal that all ranks agree on, with no collective of its
  // own and no host read here.
  const at::Tensor weight = loss.detach().mul(0.0).add_(micro_batch_.weight);
  at::Tensor objective = loss * weight;
  if (scaler_) objective = scaler_->scale(objective);
  objective.backward();
  for (GradReducer* reducer : reducers) {
    const StepCommStats stats = reducer->finish_backward();
    comm_.bytes_reduced += stats.bytes_reduced;
    comm_.comm_s += stats.comm_s;
    comm_.exposed_comm_s += stats.exposed_comm_s;
    comm_.wait_cpu_s += stats.wait_cpu_s;
    comm_.buckets += stats.buckets;
  }
}

bool TrainState::step(const std::string& name) {
  if (!micro_batch_.last) return false;
  TrainedModule& m = get(name);
  if (!m.optimizer) throw Error("step() of module '" + name + "', which no optimizer trains");
  bool taken = true;
  if (scaler_) {
    // fp16: non-finite gradients are expected while the loss scale settles; the scaler skips those steps
    // on every rank alike (the gradients it checks are the averaged ones). A NaN loss shows in the
    // metric sums, which the progress checks and the epoch end inspect.
    std::vector<at::Tensor> grads;
    for (const at::Tensor& p : m.module->parameters()) grads.push_back(p.grad());
    // The update is queued on the device from the flag itself; the one host read comes after it.
    const at::Tensor found_inf = scaler_->unscale(grads);
    scaler_->update(found_inf);
    taken = !found_inf.item<bool>();
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
  // On the device, with no host read: the step does not wait for the GPU to find out.
  first_nonfinite_step_.copy_(at::where(finite.logical_or(first_nonfinite_step_ >= 0), first_nonfinite_step_,
                                        at::full({}, micro_batch_.step, first_nonfinite_step_.options())));
}

}  // namespace dtrain
