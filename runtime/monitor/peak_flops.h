// Peak dense TFLOP/s of common data-centre GPUs, by the name the driver reports (NVML's device name,
// e.g. "NVIDIA H100 80GB HBM3", "Tesla V100-SXM2-32GB"), for the model FLOPs utilisation (mfu) of epoch
// records when --peak-tflops is not given.
//
// Figures are NVIDIA's data-sheet numbers without structured sparsity, at boost clock:
//   fp32        the CUDA cores' FP32 rate (LibTorch keeps TF32 off for matrix products by default)
//   bf16/fp16   the tensor cores' dense rate at that precision (fp16 on GPUs without bf16)
// A GPU not in the table, or a precision it lacks (bf16 before Ampere), has no peak: mfu is then left out
// and the run says so once; --peak-tflops gives any figure.
#pragma once

#include <optional>
#include <string>

#include "runtime/config/config.h"

namespace dtrain {

struct GpuPeak {
  std::string model;  // the table's name for the GPU, e.g. "H100 SXM"
  double tflops = 0.0;
};

std::optional<GpuPeak> gpu_peak_tflops(const std::string& device_name, Precision precision);

}  // namespace dtrain
