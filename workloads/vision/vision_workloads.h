// The image classifiers of the studies: cifar10 (a CIFAR ResNet-18 on CIFAR-10), resnet18, resnet50 and
// alexnet (on tiny-imagenet-200 at 64 px by default, any size with --image-size), and image-classifier
// (a ResNet-18 on a folder of JPEG/PNG photos, as many classes as it has folders). Each is its model,
// its data and its recipe; the training step is the shared SupervisedStep.
#pragma once

#include <memory>

#include "runtime/train/workload.h"

namespace dtrain {

std::unique_ptr<Workload> make_cifar10_workload();
std::unique_ptr<Workload> make_resnet18_workload();
std::unique_ptr<Workload> make_resnet50_workload();
std::unique_ptr<Workload> make_alexnet_workload();
std::unique_ptr<Workload> make_image_classifier_workload();

}  // namespace dtrain
