// [gpu] tests run only where LibTorch sees a CUDA device; elsewhere they say so and pass (Catch2 v2 has
// no SKIP). The message names the test's reason, so a CPU-only CI log shows what it did not cover.
#pragma once

#include <torch/cuda.h>

#define DTRAIN_SKIP_WITHOUT_GPU()                                                                  \
  do {                                                                                            \
    if (!torch::cuda::is_available()) {                                                           \
      WARN("skipped: no CUDA device visible to this process (needs a CUDA LibTorch and a GPU)"); \
      return;                                                                                     \
    }                                                                                             \
  } while (false)
