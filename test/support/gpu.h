// [gpu] cases run only where LibTorch sees a CUDA device; elsewhere they skip (test/support/skip.h),
// naming the reason, so a CPU-only CI log shows what it did not cover.
#pragma once

#include <torch/cuda.h>

#include "test/support/skip.h"

#define DTRAIN_SKIP_WITHOUT_GPU()                                                         \
  do {                                                                                   \
    if (!torch::cuda::is_available()) {                                                  \
      DTRAIN_SKIP("no CUDA device visible to this process (needs a CUDA LibTorch and a GPU)"); \
    }                                                                                    \
  } while (false)
