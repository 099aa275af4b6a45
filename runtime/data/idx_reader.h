// Reader for the IDX format of MNIST-style datasets (plain or gzip-compressed), as published by
// LeCun et al. and used by Fashion-MNIST: big-endian header, unsigned-byte payload.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace dtrain {

// Reads an unsigned-byte IDX file with `expected_dims` dimensions into a uint8 tensor of its shape.
// Files ending in .gz are decompressed. Throws DataError naming the file for a missing file, a wrong
// magic number, an unexpected dtype or dimension count, or a payload shorter or longer than the header says.
at::Tensor read_idx_file(const std::string& path, int expected_dims);

}  // namespace dtrain
