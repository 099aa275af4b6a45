#include "workloads/vision/vision_workloads.h"

#include <filesystem>
#include <algorithm>
#include <functional>
#include <string>
#include <utility>

#include "runtime/data/cifar10.h"
#include "runtime/data/image_files.h"
#include "runtime/data/synthetic.h"
#include "runtime/util/error.h"
#include "runtime/util/strings.h"
#include "workloads/vision/alexnet.h"
#include "workloads/vision/resnet.h"

namespace dtrain {
namespace {

// Where scripts/fetch_data.sh puts each dataset (relative to the working directory) when data.dir is
// not set.
constexpr const char* kTinyImagenetDir = "data/tiny-imagenet-200";

enum class DataKind { kCifar10, kTinyImagenet, kImageFolder };

using ModelMaker = std::function<std::shared_ptr<Model>(int64_t num_classes)>;
using Recipe = std::function<void(TrainConfig&)>;

struct VisionSpec {
  std::string name;
  DataKind data;
  int64_t native_size;  // the image side the workload trains at by default
  ModelMaker model;
  Recipe recipe;
  // The smallest image side the model's layers can take (1: any); a smaller data.image_size is a
  // configuration error before anything is loaded, not LibTorch's shape error at the first forward.
  int64_t min_size = 1;
};

class VisionWorkload final : public ClassifierWorkload {
 public:
  explicit VisionWorkload(VisionSpec spec) : spec_(std::move(spec)) {}

  std::string name() const override { return spec_.name; }

  std::string data_format() const override {
    switch (spec_.data) {
      case DataKind::kCifar10:
        return std::string("CIFAR-10 binary (data_batch_1..5.bin, test_batch.bin) in --data-dir; default ") +
               kCifar10Dir + "; 50000 + 10000 32x32 RGB images, 10 classes; random crop (padding 4) and flip";
      case DataKind::kTinyImagenet:
        return std::string("tiny-imagenet-200 as published (wnids.txt, train/<wnid>/images/*.JPEG, val/images with "
                           "val_annotations.txt) in --data-dir; default ") +
               kTinyImagenetDir + "; 100000 + 10000 64x64 JPEGs, 200 classes; random-resized crop and flip";
      case DataKind::kImageFolder:
        return "a folder of JPEG/PNG images, --data-dir ROOT with ROOT/<class>/<image> (a share held out by "
               "--val-fraction) or ROOT/train/<class>/ and ROOT/val/<class>/; any number of classes >= 2";
    }
    return "";
  }

  void apply_defaults(TrainConfig& config) const override {
    config.data.image_size = spec_.native_size;
    spec_.recipe(config);
  }

  std::shared_ptr<Model> make_model(const WorkloadData& data) const override { return spec_.model(data.num_classes); }
  Outputs outputs() const override { return Outputs::kLogits; }

  WorkloadData load_data(const TrainConfig& config) const override {
    const DataOptions& options = config.data;
    const auto seed = static_cast<uint64_t>(config.train.seed);
    const int64_t size = options.image_size > 0 ? options.image_size : spec_.native_size;
    if (size < spec_.min_size) {
      throw ConfigError("data.image_size " + std::to_string(size) + " is too small for the " + spec_.name +
                        " model, whose pooling layers need images of at least " + std::to_string(spec_.min_size) +
                        " px; give --image-size " + std::to_string(spec_.min_size) + " or more");
    }
    switch (spec_.data) {
      case DataKind::kCifar10: {
        if (size != 32) {
          throw ConfigError("data.image_size " + std::to_string(size) +
                            ": the cifar10 workload trains on CIFAR-10's 32x32 images; leave it at 0 or 32");
        }
        if (options.synthetic) return synthetic({10, 32, 50000, 4096}, {10, 32, 1000, 1000}, seed, /*crop_padding=*/4);
        const std::string dir = data_dir_or_default(options, kCifar10Dir, spec_.name, "cifar10");
        WorkloadData data;
        Cifar10 cifar = read_cifar10(dir);
        data.num_classes = 10;
        data.image_size = 32;
        data.train = std::make_shared<TensorDataset>(std::move(cifar.train));
        data.test = std::make_shared<TensorDataset>(std::move(cifar.test));
        data.description = "CIFAR-10 binary files in " + dir;
        return data;
      }
      case DataKind::kTinyImagenet: {
        if (options.synthetic) return synthetic({200, size, 100000, 2048}, {200, size, 1000, 512}, seed, 0);
        const std::string dir = data_dir_or_default(options, kTinyImagenetDir, spec_.name, "tiny-imagenet-200");
        return files(scan_tiny_imagenet(dir), options, size);
      }
      case DataKind::kImageFolder: {
        if (options.synthetic) return synthetic({2, size, 2000, 512}, {2, size, 400, 400}, seed, 0);
        if (options.dir.empty()) {
          throw DataError("the image-classifier workload needs --data-dir ROOT: a folder with one sub-folder of "
                          "JPEG/PNG images per class (or train/ and val/ with those), or use --synthetic");
        }
        return files(scan_image_folder(options.dir, options.val_fraction, seed), options, size);
      }
    }
    throw Error("unknown data kind");
  }

 private:
  static WorkloadData synthetic(const SyntheticImageSpec& train, const SyntheticImageSpec& test, uint64_t seed,
                                int64_t crop_padding) {
    WorkloadData data;
    data.num_classes = train.num_classes;
    data.image_size = train.image_size;
    auto train_set = std::make_shared<TensorDataset>(make_synthetic_images(train, seed, seed + 1));
    train_set->crop_padding = crop_padding;
    train_set->random_flip = true;
    data.train = std::move(train_set);
    data.test = std::make_shared<TensorDataset>(make_synthetic_images(test, seed, seed + 2));
    data.description = "synthetic " + std::to_string(train.image_size) + "x" + std::to_string(train.image_size) +
                       " RGB images, " + std::to_string(train.num_classes) + " classes (seed " + std::to_string(seed) + ")";
    return data;
  }

  static WorkloadData files(ImageSplits splits, const DataOptions& options, int64_t size) {
    ImageFileOptions file_options;
    file_options.image_size = size;
    file_options.workers = options.workers;
    file_options.skip_bad = options.skip_bad_images;
    return image_file_data(std::move(splits), file_options);
  }

  VisionSpec spec_;
};

// SGD with momentum 0.9 and weight decay, as the torchvision classification references train.
void sgd(TrainConfig& config, double lr, double weight_decay) {
  TrainOptions& t = config.train;
  t.optimizer = OptimizerKind::kSgd;
  t.lr = lr;
  t.momentum = 0.9;
  t.weight_decay = weight_decay;
  t.eval_batch_size = 500;
}

}  // namespace

std::string data_dir_or_default(const DataOptions& options, const char* fallback, const std::string& workload,
                                const std::string& fetch_name) {
  if (!options.dir.empty()) return options.dir;
  std::error_code ec;
  if (!std::filesystem::exists(fallback, ec)) {
    throw DataError("no data for the " + workload + " workload: data.dir is not set and '" + fallback +
                    "' does not exist. Run scripts/fetch_data.sh " + fetch_name + " (it downloads to data/), pass "
                    "--data-dir DIR, or use --synthetic.");
  }
  return fallback;
}

WorkloadData image_file_data(ImageSplits splits, const ImageFileOptions& options) {
  // Every file's header, before training: a bad file stops the run now, naming it, not hours in.
  std::vector<ImageSample> all = splits.train;
  all.insert(all.end(), splits.test.begin(), splits.test.end());
  const std::vector<BadImage> bad = check_image_files(all, std::max<int64_t>(options.workers, 4));
  std::string skipped;
  if (!bad.empty()) {
    std::string list;
    for (size_t i = 0; i < bad.size() && i < 10; ++i) list += "\n  " + bad[i].problem;
    if (bad.size() > 10) list += "\n  and " + std::to_string(bad.size() - 10) + " more";
    if (!options.skip_bad) {
      throw DataError(std::to_string(bad.size()) + " of the " + std::to_string(all.size()) + " image files of " +
                      splits.description + " cannot be used:" + list +
                      "\nremove or replace them, or --skip-bad-images to leave them out");
    }
    const size_t train_count = splits.train.size();
    std::vector<bool> dropped(all.size(), false);
    for (const BadImage& b : bad) dropped[b.index] = true;
    const auto keep = [&dropped](std::vector<ImageSample>& samples, size_t first) {
      std::vector<ImageSample> kept;
      for (size_t i = 0; i < samples.size(); ++i) {
        if (!dropped[first + i]) kept.push_back(std::move(samples[i]));
      }
      samples = std::move(kept);
    };
    keep(splits.train, 0);
    keep(splits.test, train_count);
    skipped = "; " + std::to_string(bad.size()) + " bad image files left out (--skip-bad-images), the first: " +
              bad.front().problem;
  }
  if (splits.train.empty() || splits.test.empty()) {
    throw DataError(splits.description + " has " + std::to_string(splits.train.size()) + " training and " +
                    std::to_string(splits.test.size()) + " validation images; both splits need some");
  }
  WorkloadData data;
  data.num_classes = static_cast<int64_t>(splits.classes.size());
  data.image_size = options.image_size;
  data.train = std::make_shared<ImageFileDataset>(std::move(splits.train), options);
  data.test = std::make_shared<ImageFileDataset>(std::move(splits.test), options);
  data.description = splits.description + ", " + std::to_string(data.num_classes) + " classes at " +
                     std::to_string(options.image_size) + " px";
  data.labels = "classes: " + join(splits.classes, ", ");
  data.description += skipped;
  data.bad_files_left_out = static_cast<int64_t>(bad.size());
  return data;
}

std::unique_ptr<Workload> make_cifar10_workload() {
  return std::make_unique<VisionWorkload>(VisionSpec{
      "cifar10", DataKind::kCifar10, 32,
      [](int64_t classes) { return std::make_shared<ResNet>(resnet18_options(classes, ResNetStem::kCifar)); },
      [](TrainConfig& c) {
        // The common CIFAR-10 ResNet-18 recipe: batch 128, SGD 0.1 with weight decay 5e-4, cosine decay.
        sgd(c, 0.1, 5e-4);
        c.train.epochs = 30;
        c.train.batch_size = 128;
        c.train.lr_schedule = LrSchedule::kCosine;
      }});
}

// torchvision's reference recipe (SGD 0.1, momentum 0.9, weight decay 1e-4, x0.1 every 30 of 90 epochs)
// at batch 128 per rank; the learning rate is for a global batch of 256 (scale it with the world size).
void imagenet_recipe(TrainConfig& c, double lr) {
  sgd(c, lr, 1e-4);
  c.train.epochs = 90;
  c.train.batch_size = 128;
  c.train.lr_schedule = LrSchedule::kStep;
  c.train.lr_gamma = 0.1;
  c.train.lr_step_epochs = 30;
}

std::unique_ptr<Workload> make_resnet18_workload() {
  return std::make_unique<VisionWorkload>(VisionSpec{
      "resnet18", DataKind::kTinyImagenet, 64,
      [](int64_t classes) { return std::make_shared<ResNet>(resnet18_options(classes)); },
      [](TrainConfig& c) { imagenet_recipe(c, 0.1); }});
}

std::unique_ptr<Workload> make_resnet50_workload() {
  return std::make_unique<VisionWorkload>(VisionSpec{
      "resnet50", DataKind::kTinyImagenet, 64,
      [](int64_t classes) { return std::make_shared<ResNet>(resnet50_options(classes)); },
      [](TrainConfig& c) { imagenet_recipe(c, 0.1); }});
}

std::unique_ptr<Workload> make_alexnet_workload() {
  return std::make_unique<VisionWorkload>(VisionSpec{
      "alexnet", DataKind::kTinyImagenet, 64, [](int64_t classes) { return std::make_shared<AlexNet>(classes); },
      [](TrainConfig& c) { imagenet_recipe(c, 0.01); },  // torchvision trains AlexNet at 0.01
      // conv1 (11, stride 4, padding 2) and three 3x3 max-pools of stride 2 leave 1 px from 63 px up.
      63});
}

std::unique_ptr<Workload> make_image_classifier_workload() {
  return std::make_unique<VisionWorkload>(VisionSpec{
      "image-classifier", DataKind::kImageFolder, 224,
      [](int64_t classes) { return std::make_shared<ResNet>(resnet18_options(classes)); },
      [](TrainConfig& c) {
        // A small photo set trained from scratch: shorter than ImageNet's schedule, cosine decay.
        sgd(c, 0.1, 1e-4);
        c.train.epochs = 30;
        c.train.batch_size = 64;
        c.train.lr_schedule = LrSchedule::kCosine;
        c.train.warmup_epochs = 1;
      }});
}

void register_vision_workloads(WorkloadRegistry& registry) {
  registry.add("cifar10", "ResNet-18 for 32x32 inputs (3x3 stem, no max-pool) on CIFAR-10", make_cifar10_workload);
  registry.add("resnet18", "torchvision ResNet-18 on tiny-imagenet-200 (any image size)", make_resnet18_workload);
  registry.add("resnet50", "torchvision ResNet-50 (v1.5) on tiny-imagenet-200 (any image size)", make_resnet50_workload);
  registry.add("alexnet", "torchvision AlexNet on tiny-imagenet-200 (any image size >= 63)", make_alexnet_workload);
  registry.add("image-classifier", "torchvision ResNet-18 on a folder of JPEG/PNG images, one folder per class",
               make_image_classifier_workload);
}

}  // namespace dtrain
