#include "runtime/train/autocast_scope.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include "runtime/util/error.h"

// LibTorch 2.4 replaced the per-device autocast functions (set_enabled, set_autocast_gpu_dtype, ...) with
// ones taking the device type; the old ones are deprecated. Debian's LibTorch is 1.13.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define DTRAIN_AUTOCAST_BY_DEVICE_TYPE 1
#else
#define DTRAIN_AUTOCAST_BY_DEVICE_TYPE 0
#endif

namespace dtrain {
namespace {

bool autocast_enabled(c10::DeviceType type) {
#if DTRAIN_AUTOCAST_BY_DEVICE_TYPE
  return at::autocast::is_autocast_enabled(type);
#else
  return type == c10::DeviceType::CUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}

void set_autocast(c10::DeviceType type, bool enabled) {
#if DTRAIN_AUTOCAST_BY_DEVICE_TYPE
  at::autocast::set_autocast_enabled(type, enabled);
#else
  if (type == c10::DeviceType::CUDA) {
    at::autocast::set_enabled(enabled);
  } else {
    at::autocast::set_cpu_enabled(enabled);
  }
#endif
}

c10::ScalarType autocast_dtype(c10::DeviceType type) {
#if DTRAIN_AUTOCAST_BY_DEVICE_TYPE
  return at::autocast::get_autocast_dtype(type);
#else
  return type == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
#endif
}

void set_autocast_dtype(c10::DeviceType type, c10::ScalarType dtype) {
#if DTRAIN_AUTOCAST_BY_DEVICE_TYPE
  at::autocast::set_autocast_dtype(type, dtype);
#else
  if (type == c10::DeviceType::CUDA) {
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
#endif
}

}  // namespace

AutocastScope::AutocastScope(c10::DeviceType device_type, Precision precision) : device_type_(device_type) {
  if (precision == Precision::kFp32) return;
  if (device_type != c10::DeviceType::CUDA && device_type != c10::DeviceType::CPU) {
    throw ConfigError(std::string("train.precision '") + to_string(precision) + "' needs a CPU or CUDA device, got " +
                      c10::DeviceTypeName(device_type));
  }
  active_ = true;
  was_enabled_ = autocast_enabled(device_type);
  previous_dtype_ = autocast_dtype(device_type);
  set_autocast(device_type, true);
  set_autocast_dtype(device_type, precision == Precision::kFp16 ? c10::ScalarType::Half : c10::ScalarType::BFloat16);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  // Autocast caches casts of the weights inside a scope; they are stale after the optimizer step.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_autocast(device_type_, was_enabled_);
  set_autocast_dtype(device_type_, previous_dtype_);
}

}  // namespace dtrain
