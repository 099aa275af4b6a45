// CIFAR-10 in its binary format (cifar-10-batches-bin: data_batch_1..5.bin, test_batch.bin; each record
// a label byte and 3072 bytes of 32x32 pixels, red, green, then blue plane), held in memory as uint8
// (150 MB) and augmented on the device as batches are gathered: the usual random 32x32 crop of the image
// padded by 4 pixels and a horizontal flip, then normalisation by the training set's channel statistics.
#pragma once

#include <string>

#include "runtime/data/tensor_dataset.h"

namespace dtrain {

struct Cifar10 {
  TensorDataset train;  // 50000 images with the training transforms
  TensorDataset test;   // 10000 images, normalised only
};

// Reads the six files from `dir` or `dir`/cifar-10-batches-bin. Throws DataError naming the missing or
// malformed file (a size that is not a whole number of records, a label above 9).
Cifar10 read_cifar10(const std::string& dir);

// The channel means and standard deviations of CIFAR-10's training images (in [0, 1]).
at::Tensor cifar10_mean();
at::Tensor cifar10_std();

}  // namespace dtrain
