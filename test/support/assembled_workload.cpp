#include "test/support/assembled_workload.h"

#include <utility>

#include "runtime/data/synthetic.h"

namespace dtrain::test {
namespace {

class AssembledWorkload final : public ClassifierWorkload {
 public:
  explicit AssembledWorkload(WorkloadParts parts) : parts_(std::move(parts)) {}
  std::string name() const override { return parts_.name; }
  std::string data_format() const override { return "generated in the test"; }
  void apply_defaults(TrainConfig& config) const override {
    if (parts_.recipe) parts_.recipe->apply_defaults(config);
  }
  std::shared_ptr<Model> make_model(const WorkloadData& data) const override { return parts_.model(data); }
  Outputs outputs() const override { return parts_.outputs; }
  WorkloadData load_data(const TrainConfig& config) const override {
    return parts_.data(static_cast<uint64_t>(config.train.seed));
  }

 private:
  WorkloadParts parts_;
};

}  // namespace

Float64Model::Float64Model(std::shared_ptr<Model> model) : model_(register_module("model", std::move(model))) {
  model_->to(at::kDouble);
}

at::Tensor Float64Model::forward(const at::Tensor& inputs) { return model_->forward(inputs.to(at::kDouble)); }

std::unique_ptr<ClassifierWorkload> assemble_workload(WorkloadParts parts) {
  return std::make_unique<AssembledWorkload>(std::move(parts));
}

WorkloadData generated_images(int64_t num_classes, int64_t image_size, int64_t train_samples, int64_t test_samples,
                              int64_t crop_padding, uint64_t seed) {
  WorkloadData data;
  data.num_classes = num_classes;
  auto train = std::make_shared<TensorDataset>(
      make_synthetic_images({num_classes, image_size, train_samples, train_samples}, seed, seed + 1));
  train->crop_padding = crop_padding;
  train->random_flip = true;
  data.train = std::move(train);
  data.test = std::make_shared<TensorDataset>(
      make_synthetic_images({num_classes, image_size, test_samples, test_samples}, seed, seed + 2));
  data.description = "generated " + std::to_string(image_size) + " px images";
  return data;
}

}  // namespace dtrain::test
