// A GPU's utilisation, memory, power and clock through NVML, opened at run time with dlopen of
// libnvidia-ml.so.1 (the driver installs it): dtrain neither links nor needs NVML, so the same binary
// starts on machines without a GPU or driver, and simply has no GPU samples there.
#pragma once

#include <memory>
#include <optional>
#include <string>

namespace dtrain {

struct NvmlReading {
  std::optional<double> util_percent;
  std::optional<long long> mem_used_bytes;
  std::optional<double> mem_bw_util_percent;
  std::optional<double> power_w;
  std::optional<double> sm_clock_mhz;
};

class NvmlDevice final {
 public:
  // The device with NVML index `index`, or nullptr with `why` set (no libnvidia-ml.so.1, nvmlInit failed,
  // no such device).
  static std::unique_ptr<NvmlDevice> open(int index, std::string& why);
  ~NvmlDevice();
  NvmlDevice(const NvmlDevice&) = delete;
  NvmlDevice& operator=(const NvmlDevice&) = delete;

  // One reading; a query the device does not support leaves its field empty. Thread-compatible.
  NvmlReading read() const;
  // The product name ("NVIDIA H100 80GB HBM3"), or "" when NVML cannot tell.
  std::string name() const;

 private:
  struct Api;
  NvmlDevice(std::unique_ptr<Api> api, void* handle);
  std::unique_ptr<Api> api_;
  void* handle_;
};

}  // namespace dtrain
