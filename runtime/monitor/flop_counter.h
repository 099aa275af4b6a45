// Floating-point operations a piece of training actually runs, counted from the shapes of the ops as
// they execute (at::RecordFunction callbacks, which LibTorch carries into the autograd threads, so the
// backward pass counts too): convolutions forward and backward, and matrix products (mm, addmm, bmm,
// baddbmm; a sparse left operand by its non-zeros), 2 FLOPs per multiply-add. Element-wise ops,
// normalisation, activations and the optimizer are left out, as FLOP counts of models conventionally do:
// for a convnet's training step the count is close to 3x its forward pass.
#pragma once

#include <c10/util/ArrayRef.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <string>

namespace dtrain {

// FLOPs of one op call `name` ("aten::convolution", ...) with `inputs`; 0 for ops not counted.
double op_flops(const std::string& name, c10::ArrayRef<const c10::IValue> inputs);

// Counts the ops of the constructing thread (and of the threads its ops hand work to, such as autograd's)
// from construction until destruction. One at a time per process: LibTorch's callbacks carry no data of
// their own and run on those other threads too, so the count is one process-wide sum; a second counter
// while one counts throws Error.
class FlopCounter final {
 public:
  FlopCounter();
  ~FlopCounter();
  FlopCounter(const FlopCounter&) = delete;
  FlopCounter& operator=(const FlopCounter&) = delete;

  double flops() const;

 private:
  uint64_t handle_;
};

}  // namespace dtrain
