// Internal to runtime/: checking of CUDA runtime calls. Only .cpp files built with the CUDA toolkit
// include this (it pulls in cuda_runtime.h); public headers stay free of CUDA types.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "runtime/util/check.h"

namespace dtrain::detail {

// This process's rank and host ("[rank r/n host] "), or only the host before MPI is up: GPU errors
// always say which machine.
ErrorOrigin device_origin();

std::string cuda_error_string(cudaError_t code);  // "cudaErrorNoDevice: no CUDA-capable device is detected"

}  // namespace dtrain::detail

// Throws CommError "[rank r/n host] cudaSetDevice(device) failed (<name>: <message>), file.cpp:42".
#define DTRAIN_CUDA_CHECK(call)                                                                              \
  do {                                                                                                       \
    const cudaError_t dtrain_cuda_rc_ = (call);                                                              \
    if (dtrain_cuda_rc_ != cudaSuccess) {                                                                    \
      ::dtrain::detail::throw_call_error(::dtrain::detail::device_origin(), #call,                          \
                                         ::dtrain::detail::cuda_error_string(dtrain_cuda_rc_), __FILE__, __LINE__); \
    }                                                                                                        \
  } while (false)
