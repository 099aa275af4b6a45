#include "runtime/monitor/nvml.h"

#include <dlfcn.h>

namespace dtrain {
// A named namespace, not an anonymous one: NvmlDevice::Api (a member of an exported class) holds these
// types, and GCC warns about such members (-Wsubobject-linkage) in a unity build, where one version of
// it crashed compiling them.
namespace nvml {

// The part of NVML's C API (nvml.h, stable across driver versions) the resource poller uses, declared
// here so that building dtrain needs no NVML headers (nvmlReturn_t, nvmlDevice_t, nvmlUtilization_t, ...).
using Return = int;
constexpr Return kSuccess = 0;
using Device = void*;
struct Utilization {
  unsigned int gpu;
  unsigned int memory;
};
struct Memory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
constexpr int kClockSm = 1;  // NVML_CLOCK_SM

}  // namespace nvml

struct NvmlDevice::Api {
  void* library = nullptr;
  nvml::Return (*init)() = nullptr;
  nvml::Return (*shutdown)() = nullptr;
  const char* (*error_string)(nvml::Return) = nullptr;
  nvml::Return (*handle_by_index)(unsigned int, nvml::Device*) = nullptr;
  nvml::Return (*utilization)(nvml::Device, nvml::Utilization*) = nullptr;
  nvml::Return (*memory)(nvml::Device, nvml::Memory*) = nullptr;
  nvml::Return (*power)(nvml::Device, unsigned int*) = nullptr;
  nvml::Return (*clock)(nvml::Device, int, unsigned int*) = nullptr;
  nvml::Return (*name)(nvml::Device, char*, unsigned int) = nullptr;
  bool initialised = false;

  ~Api() {
    if (initialised) shutdown();
    if (library != nullptr) dlclose(library);
  }

  template <class F>
  bool bind(F& function, const char* name) {
    function = reinterpret_cast<F>(dlsym(library, name));
    return function != nullptr;
  }
};

std::unique_ptr<NvmlDevice> NvmlDevice::open(int index, std::string& why) {
  auto api = std::make_unique<Api>();
  api->library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (api->library == nullptr) {
    why = "NVML (libnvidia-ml.so.1) is not installed: no GPU samples";
    return nullptr;
  }
  if (!api->bind(api->init, "nvmlInit_v2") || !api->bind(api->shutdown, "nvmlShutdown") ||
      !api->bind(api->error_string, "nvmlErrorString") ||
      !api->bind(api->handle_by_index, "nvmlDeviceGetHandleByIndex_v2") ||
      !api->bind(api->utilization, "nvmlDeviceGetUtilizationRates") ||
      !api->bind(api->memory, "nvmlDeviceGetMemoryInfo") || !api->bind(api->power, "nvmlDeviceGetPowerUsage") ||
      !api->bind(api->clock, "nvmlDeviceGetClockInfo")) {
    why = "libnvidia-ml.so.1 lacks a function the resource poller needs: no GPU samples";
    return nullptr;
  }
  api->bind(api->name, "nvmlDeviceGetName");  // optional: only the MFU's peak lookup needs it
  if (nvml::Return rc = api->init(); rc != nvml::kSuccess) {
    why = std::string("nvmlInit failed (") + api->error_string(rc) + "): no GPU samples";
    return nullptr;
  }
  api->initialised = true;
  nvml::Device handle = nullptr;
  if (nvml::Return rc = api->handle_by_index(static_cast<unsigned int>(index), &handle); rc != nvml::kSuccess) {
    why = "NVML has no device " + std::to_string(index) + " (" + api->error_string(rc) + "): no GPU samples";
    return nullptr;
  }
  return std::unique_ptr<NvmlDevice>(new NvmlDevice(std::move(api), handle));
}

NvmlDevice::NvmlDevice(std::unique_ptr<Api> api, void* handle) : api_(std::move(api)), handle_(handle) {}

NvmlDevice::~NvmlDevice() = default;

std::string NvmlDevice::name() const {
  char text[96] = {};  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
  if (api_->name == nullptr || api_->name(handle_, text, sizeof text) != nvml::kSuccess) return "";
  return text;
}

NvmlReading NvmlDevice::read() const {
  NvmlReading r;
  nvml::Utilization util{};
  if (api_->utilization(handle_, &util) == nvml::kSuccess) {
    r.util_percent = util.gpu;
    r.mem_bw_util_percent = util.memory;
  }
  nvml::Memory memory{};
  if (api_->memory(handle_, &memory) == nvml::kSuccess) r.mem_used_bytes = static_cast<long long>(memory.used);
  unsigned int milliwatts = 0;
  if (api_->power(handle_, &milliwatts) == nvml::kSuccess) r.power_w = milliwatts / 1000.0;
  unsigned int mhz = 0;
  if (api_->clock(handle_, nvml::kClockSm, &mhz) == nvml::kSuccess) r.sm_clock_mhz = mhz;
  return r;
}

}  // namespace dtrain
