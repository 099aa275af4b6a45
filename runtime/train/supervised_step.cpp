#include "runtime/train/supervised_step.h"

#include <ATen/ATen.h>

namespace dtrain {

std::unique_ptr<TrainStep> ClassifierWorkload::make_step(const TrainConfig&) const { return std::make_unique<SupervisedStep>(outputs()); }

SupervisedStep::SupervisedStep(ClassifierWorkload::Outputs outputs, std::string module)
    : outputs_(outputs), module_(std::move(module)) {}

at::Tensor classification_loss(const at::Tensor& outputs, const at::Tensor& targets, ClassifierWorkload::Outputs kind,
                               double label_smoothing) {
  if (label_smoothing == 0.0 && kind == ClassifierWorkload::Outputs::kLogProbabilities) {
    return at::nll_loss(outputs, targets);
  }
  // log_softmax leaves log-probabilities as they are, so cross-entropy is also the smoothed loss of a
  // model whose outputs are log-probabilities.
  return at::cross_entropy_loss(outputs, targets, {}, at::Reduction::Mean, -100, label_smoothing);
}

void SupervisedStep::train(const Batch& batch, TrainState& state, MetricSums& metrics) {
  Model& model = state.module_as<Model>(module_);
  at::Tensor loss;
  {
    auto autocast = state.autocast();
    loss = classification_loss(model.forward(batch.inputs), batch.targets, outputs_, state.options().label_smoothing);
  }
  state.backward(loss, {module_});
  state.step(module_);
  metrics.add("loss", loss.detach().to(at::kDouble) * static_cast<double>(batch.size), static_cast<double>(batch.size));
}

void SupervisedStep::evaluate(const Batch& batch, TrainState& state, MetricSums& metrics) {
  Model& model = state.module_as<Model>(module_);
  at::Tensor outputs;
  {
    auto autocast = state.autocast();
    outputs = model.forward(batch.inputs);
  }
  const double n = static_cast<double>(batch.size);
  metrics.add("accuracy", outputs.argmax(1).eq(batch.targets).sum(), n);
  metrics.add("loss", classification_loss(outputs, batch.targets, outputs_).to(at::kDouble) * n, n);
}

}  // namespace dtrain
