// Mixed precision for one forward pass: while a scope is alive, LibTorch's autocast runs eligible ops
// (matmul, convolution) in bf16 or fp16 on the given device type and keeps precision-sensitive ones in
// fp32. Thread-local, like autocast itself; backward follows the dtypes the forward chose.
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include "runtime/config/config.h"

namespace dtrain {

class AutocastScope final {
 public:
  // Precision::kFp32 makes the scope a no-op.
  AutocastScope(c10::DeviceType device_type, Precision precision);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  c10::DeviceType device_type_;
  bool active_ = false;
  bool was_enabled_ = false;
  c10::ScalarType previous_dtype_ = c10::ScalarType::Undefined;
};

}  // namespace dtrain
