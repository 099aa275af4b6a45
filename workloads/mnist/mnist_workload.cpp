#include "workloads/mnist/mnist_workload.h"

#include <ATen/ATen.h>

#include <filesystem>
#include <string>
#include <vector>

#include "runtime/data/idx_reader.h"
#include "runtime/data/synthetic.h"
#include "runtime/util/error.h"
#include "workloads/mnist/mnist_net.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;

// Normalisation of the pytorch/examples MNIST recipe (MNIST's mean and standard deviation), kept for
// Fashion-MNIST too so that dtrain and the PyTorch peer see identical inputs.
constexpr double kMean = 0.1307;
constexpr double kStd = 0.3081;

// Where the data is when data.dir is empty: Debian's dataset-fashion-mnist package.
constexpr const char* kFashionMnistDebianDir = "/usr/share/datasets/fashion-mnist";

// The directories searched for the IDX files under `dir`: dir itself and torchvision's layouts.
std::vector<std::string> mnist_search_dirs(const std::string& dir) {
  return {dir, (fs::path(dir) / "raw").string(), (fs::path(dir) / "MNIST" / "raw").string(),
          (fs::path(dir) / "FashionMNIST" / "raw").string()};
}

// "train-images-idx3-ubyte" -> the first of DIR/NAME, DIR/NAME.gz (in each search dir) that exists.
std::string find_idx(const std::vector<std::string>& dirs, const std::string& name, std::vector<std::string>& tried) {
  for (const std::string& dir : dirs) {
    for (const std::string& candidate : {name, name + ".gz"}) {
      const fs::path path = fs::path(dir) / candidate;
      std::error_code ec;
      if (fs::is_regular_file(path, ec)) return path.string();
      tried.push_back(path.string());
    }
  }
  return "";
}

TensorDataset load_split(const std::vector<std::string>& dirs, const std::string& prefix, const std::string& where) {
  std::vector<std::string> tried;
  const std::string images_path = find_idx(dirs, prefix + "-images-idx3-ubyte", tried);
  const std::string labels_path = find_idx(dirs, prefix + "-labels-idx1-ubyte", tried);
  if (images_path.empty() || labels_path.empty()) {
    std::string list;
    for (const std::string& path : tried) list += "\n  " + path;
    throw DataError("MNIST-format " + prefix + " files not found in " + where + "; looked for:" + list +
                    "\nPass --data-dir DIR with torchvision's raw file names (.gz or not), install Debian's "
                    "dataset-fashion-mnist, or use --synthetic.");
  }
  const at::Tensor images = read_idx_file(images_path, 3);
  const at::Tensor labels = read_idx_file(labels_path, 1);
  if (images.size(0) != labels.size(0)) {
    throw DataError("'" + images_path + "' holds " + std::to_string(images.size(0)) + " images but '" + labels_path +
                    "' holds " + std::to_string(labels.size(0)) + " labels; they must match");
  }
  if (images.size(1) != 28 || images.size(2) != 28) {
    throw DataError("'" + images_path + "' holds " + std::to_string(images.size(1)) + "x" +
                    std::to_string(images.size(2)) + " images, the mnist workload expects 28x28");
  }
  if (labels.numel() > 0 && labels.max().item<int64_t>() > 9) {
    throw DataError("'" + labels_path + "' holds label " + std::to_string(labels.max().item<int64_t>()) +
                    ", expected classes 0..9");
  }
  TensorDataset split;
  // Pixels stay uint8 (a quarter of the memory of floats) and are normalised per batch.
  split.inputs = images.unsqueeze(1);
  split.mean = at::full({1, 1, 1}, kMean, at::kFloat);
  split.std = at::full({1, 1, 1}, kStd, at::kFloat);
  split.value_scale = 255.0;
  split.targets = labels.to(at::kLong);
  return split;
}

class MnistWorkload final : public ClassifierWorkload {
 public:
  std::string name() const override { return "mnist"; }

  std::string data_format() const override {
    return std::string("MNIST IDX files (train-images-idx3-ubyte, ... .gz or not) in --data-dir; default ") +
           kFashionMnistDebianDir + " (Debian's dataset-fashion-mnist); 60000 + 10000 28x28 grey images, 10 classes";
  }

  // The pytorch/examples MNIST recipe: Adadelta at lr 1.0, decayed by 0.7 every epoch, batch 64.
  void apply_defaults(TrainConfig& config) const override {
    TrainOptions& t = config.train;
    t.batch_size = 64;
    t.eval_batch_size = 1000;
    t.optimizer = OptimizerKind::kAdadelta;
    t.lr = 1.0;
    t.lr_schedule = LrSchedule::kStep;
    t.lr_gamma = 0.7;
    t.lr_step_epochs = 1;
  }

  std::shared_ptr<Model> make_model(const WorkloadData&) const override { return std::make_shared<MnistNet>(); }
  Outputs outputs() const override { return Outputs::kLogProbabilities; }  // MnistNet ends in log_softmax

  WorkloadData load_data(const TrainConfig& config) const override {
    const DataOptions& options = config.data;
    const auto seed = static_cast<uint64_t>(config.train.seed);
    WorkloadData data;
    data.num_classes = 10;
    if (options.synthetic) {
      SyntheticSpec spec{{1, 28, 28}, 10, 60000, 0.5};
      data.train = std::make_shared<TensorDataset>(make_synthetic_dataset(spec, seed, seed + 1));
      spec.num_samples = 10000;
      data.test = std::make_shared<TensorDataset>(make_synthetic_dataset(spec, seed, seed + 2));
      data.description = "synthetic MNIST-shaped data (seed " + std::to_string(seed) + ")";
      return data;
    }
    std::string dir = options.dir;
    std::string where = "data.dir '" + dir + "'";
    if (dir.empty()) {
      std::error_code ec;
      if (!fs::is_directory(kFashionMnistDebianDir, ec)) {
        throw DataError(std::string("no data for the mnist workload: data.dir is not set and ") +
                        kFashionMnistDebianDir +
                        " does not exist. Install Debian's dataset-fashion-mnist (apt-get install "
                        "dataset-fashion-mnist), pass --data-dir DIR with MNIST-format IDX files, or use --synthetic.");
      }
      dir = kFashionMnistDebianDir;
      where = std::string("the default ") + kFashionMnistDebianDir;
    }
    const std::vector<std::string> dirs = mnist_search_dirs(dir);
    data.train = std::make_shared<TensorDataset>(load_split(dirs, "train", where));
    data.test = std::make_shared<TensorDataset>(load_split(dirs, "t10k", where));
    data.description = "MNIST-format IDX files in " + dir;
    return data;
  }
};

}  // namespace

std::unique_ptr<Workload> make_mnist_workload() { return std::make_unique<MnistWorkload>(); }

void register_mnist_workloads(WorkloadRegistry& registry) {
  registry.add("mnist", "pytorch/examples MNIST CNN on MNIST-format data (Fashion-MNIST by default)",
               make_mnist_workload);
}

}  // namespace dtrain
