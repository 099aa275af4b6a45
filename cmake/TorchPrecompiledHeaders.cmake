# One precompiled header with LibTorch's headers, made once per build and reused by every target.
#
# Why: nearly every dtrain source includes ATen or torch/nn, and parsing them is most of its compile
# time (about 15 of 20-30 s per source on 2 cores). Parsed once, a source compiles in a third to half
# the time; the whole build (CPU or CUDA LibTorch) takes minutes less. Sources that include no LibTorch
# header skip it (loading the header costs them more than it saves); `dtrain_skip_torch_pch(...)` marks
# them. -DDTRAIN_PRECOMPILE_HEADERS=OFF builds without it, which also shows a source that forgot an
# include of its own.
option(DTRAIN_PRECOMPILE_HEADERS "Precompile LibTorch's headers once and reuse them in every target" ON)

set(DTRAIN_TORCH_PCH_HEADERS
  <ATen/ATen.h>
  <torch/nn/module.h>
  <torch/nn/modules/batchnorm.h>
  <torch/nn/modules/container/sequential.h>
  <torch/nn/modules/conv.h>
  <torch/nn/modules/dropout.h>
  <torch/nn/modules/linear.h>
  <torch/optim/optimizer.h>
  <torch/optim/sgd.h>
  <torch/serialize/archive.h>
)

# dtrain_torch_pch(<target>): the first target named makes the header; the others reuse it.
function(dtrain_torch_pch target)
  if(NOT DTRAIN_PRECOMPILE_HEADERS)
    return()
  endif()
  get_property(owner GLOBAL PROPERTY DTRAIN_TORCH_PCH_OWNER)
  if(owner)
    target_precompile_headers(${target} REUSE_FROM ${owner})
  else()
    target_precompile_headers(${target} PRIVATE ${DTRAIN_TORCH_PCH_HEADERS})
    set_property(GLOBAL PROPERTY DTRAIN_TORCH_PCH_OWNER ${target})
  endif()
endfunction()

# dtrain_skip_torch_pch(<source>...): sources of the current directory that include no LibTorch header.
function(dtrain_skip_torch_pch)
  set_source_files_properties(${ARGN} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
endfunction()
