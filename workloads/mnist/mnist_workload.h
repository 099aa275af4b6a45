// The mnist workload: the pytorch/examples MNIST CNN on MNIST-format IDX data (Fashion-MNIST from
// Debian's dataset-fashion-mnist by default) or on generated data of the same shape.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/train/workload.h"

namespace dtrain {

std::unique_ptr<Workload> make_mnist_workload();

// Where the mnist workload looks for data when data.dir is empty.
inline const char* kFashionMnistDebianDir = "/usr/share/datasets/fashion-mnist";

// The directories searched for the IDX files under `dir`: dir itself and torchvision's layouts.
std::vector<std::string> mnist_search_dirs(const std::string& dir);

}  // namespace dtrain
