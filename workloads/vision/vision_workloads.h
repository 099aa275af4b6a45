// The image classifiers of the studies: cifar10 (a CIFAR ResNet-18 on CIFAR-10), resnet18, resnet50 and
// alexnet (on tiny-imagenet-200 at 64 px by default, any size with --image-size), and image-classifier
// (a ResNet-18 on a folder of JPEG/PNG photos, as many classes as it has folders). Each is its model,
// its data and its recipe; the training step is the shared SupervisedStep.
#pragma once

#include <memory>
#include <string>

#include "runtime/data/image_files.h"
#include "runtime/train/workload.h"
#include "workloads/registry.h"

namespace dtrain {

std::unique_ptr<Workload> make_cifar10_workload();
std::unique_ptr<Workload> make_resnet18_workload();
std::unique_ptr<Workload> make_resnet50_workload();
std::unique_ptr<Workload> make_alexnet_workload();
std::unique_ptr<Workload> make_image_classifier_workload();

// Adds cifar10, resnet18, resnet50, alexnet and image-classifier.
void register_vision_workloads(WorkloadRegistry& registry);

// Where scripts/fetch_data.sh puts CIFAR-10's binary files (cifar10 and biggan read them).
inline constexpr const char* kCifar10Dir = "data/cifar-10-batches-bin";

// data.dir when set; else `fallback` (where scripts/fetch_data.sh puts the dataset) if it exists; else
// DataError telling the user of the `workload` to run `scripts/fetch_data.sh fetch_name`, pass --data-dir
// or use --synthetic.
std::string data_dir_or_default(const DataOptions& options, const char* fallback, const std::string& workload,
                                const std::string& fetch_name);

// The two splits of a scanned image folder (or tiny-imagenet-200) as ImageFileDatasets read with
// `options`, its class count and image size. Throws DataError when a split has no images.
WorkloadData image_file_data(ImageSplits splits, const ImageFileOptions& options);

}  // namespace dtrain
