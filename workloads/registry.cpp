#include "workloads/registry.h"

#include "runtime/util/error.h"
#include "workloads/biggan/biggan_workload.h"
#include "workloads/gcn/gcn_workload.h"
#include "workloads/mnist/mnist_workload.h"
#include "workloads/vision/vision_workloads.h"

namespace dtrain {

void WorkloadRegistry::add(const std::string& name, const std::string& description, WorkloadFactory factory) {
  if (!entries_.emplace(name, Entry{description, std::move(factory)}).second) {
    throw Error("workload '" + name + "' is registered twice");
  }
}

std::vector<std::string> WorkloadRegistry::names() const {
  std::vector<std::string> names;
  for (const auto& [name, entry] : entries_) names.push_back(name);
  return names;
}

const std::string& WorkloadRegistry::description(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw Error("no workload named '" + name + "'");
  return it->second.description;
}

std::unique_ptr<Workload> WorkloadRegistry::create(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    std::string available;
    for (const auto& [known, entry] : entries_) available += (available.empty() ? "" : ", ") + known;
    throw ConfigError("unknown workload '" + name + "'; available: " + available);
  }
  return it->second.factory();
}

void register_builtin_workloads(WorkloadRegistry& registry) {
  registry.add("mnist", "pytorch/examples MNIST CNN on MNIST-format data (Fashion-MNIST by default)",
               make_mnist_workload);
  registry.add("cifar10", "ResNet-18 for 32x32 inputs (3x3 stem, no max-pool) on CIFAR-10", make_cifar10_workload);
  registry.add("resnet18", "torchvision ResNet-18 on tiny-imagenet-200 (any image size)", make_resnet18_workload);
  registry.add("resnet50", "torchvision ResNet-50 (v1.5) on tiny-imagenet-200 (any image size)", make_resnet50_workload);
  registry.add("alexnet", "torchvision AlexNet on tiny-imagenet-200 (any image size >= 63)", make_alexnet_workload);
  registry.add("image-classifier", "torchvision ResNet-18 on a folder of JPEG/PNG images, one folder per class",
               make_image_classifier_workload);
  registry.add("gcn", "Kipf & Welling's two-layer GCN on a citation graph (Cora by default), Planetoid split",
               [] { return make_gcn_workload(); });
  registry.add("biggan", "BigGAN (residual G and D, spectral norm, conditional BatchNorm, hinge loss) on CIFAR-10",
               [] { return make_biggan_workload(); });
}

}  // namespace dtrain
