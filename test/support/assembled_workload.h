// A classifier workload assembled from parts: a model factory, a data factory and optionally the recipe
// of a registered workload. Lets multi-rank tests train the real models (ResNet, AlexNet, MNIST's net)
// on small generated datasets, with settings no user-facing workload needs (dropout 0, a few samples).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "runtime/train/workload.h"

namespace dtrain::test {

struct WorkloadParts {
  std::string name = "assembled";
  std::function<std::shared_ptr<Model>(const WorkloadData&)> model;
  std::function<WorkloadData(uint64_t seed)> data;
  ClassifierWorkload::Outputs outputs = ClassifierWorkload::Outputs::kLogits;
  std::shared_ptr<const Workload> recipe;  // apply_defaults comes from it; nullptr: the generic defaults
};

std::unique_ptr<ClassifierWorkload> assemble_workload(WorkloadParts parts);

// A model run in float64 (parameters, buffers, activations, class scores and so the loss) on the float
// inputs of the data pipeline: for tests that compare two trainings whose float32 rounding differs.
class Float64Model final : public Model {
 public:
  explicit Float64Model(std::shared_ptr<Model> model);
  at::Tensor forward(const at::Tensor& inputs) override;

 private:
  std::shared_ptr<Model> model_;
};

// Generated RGB images (make_synthetic_images: each class its colour and texture) with the vision
// workloads' training transforms: a random crop of the `crop_padding`-padded image and a flip.
WorkloadData generated_images(int64_t num_classes, int64_t image_size, int64_t train_samples, int64_t test_samples,
                              int64_t crop_padding, uint64_t seed);

}  // namespace dtrain::test
