#include "runtime/monitor/nvml.h"

#include <dlfcn.h>

namespace dtrain {
namespace {

// The part of NVML's C API (nvml.h, stable across driver versions) the resource poller uses, declared
// here so that building dtrain needs no NVML headers.
using nvmlReturn_t = int;
constexpr nvmlReturn_t kNvmlSuccess = 0;
using nvmlDevice_t = void*;
struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
constexpr int kNvmlClockSm = 1;  // NVML_CLOCK_SM

}  // namespace

struct NvmlDevice::Api {
  void* library = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*handle_by_index)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned int) = nullptr;
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
  if (nvmlReturn_t rc = api->init(); rc != kNvmlSuccess) {
    why = std::string("nvmlInit failed (") + api->error_string(rc) + "): no GPU samples";
    return nullptr;
  }
  api->initialised = true;
  nvmlDevice_t handle = nullptr;
  if (nvmlReturn_t rc = api->handle_by_index(static_cast<unsigned int>(index), &handle); rc != kNvmlSuccess) {
    why = "NVML has no device " + std::to_string(index) + " (" + api->error_string(rc) + "): no GPU samples";
    return nullptr;
  }
  return std::unique_ptr<NvmlDevice>(new NvmlDevice(std::move(api), handle));
}

NvmlDevice::NvmlDevice(std::unique_ptr<Api> api, void* handle) : api_(std::move(api)), handle_(handle) {}

NvmlDevice::~NvmlDevice() = default;

std::string NvmlDevice::name() const {
  char text[96] = {};  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
  if (api_->name == nullptr || api_->name(handle_, text, sizeof text) != kNvmlSuccess) return "";
  return text;
}

NvmlReading NvmlDevice::read() const {
  NvmlReading r;
  nvmlUtilization_t util{};
  if (api_->utilization(handle_, &util) == kNvmlSuccess) {
    r.util_percent = util.gpu;
    r.mem_bw_util_percent = util.memory;
  }
  nvmlMemory_t memory{};
  if (api_->memory(handle_, &memory) == kNvmlSuccess) r.mem_used_bytes = static_cast<long long>(memory.used);
  unsigned int milliwatts = 0;
  if (api_->power(handle_, &milliwatts) == kNvmlSuccess) r.power_w = milliwatts / 1000.0;
  unsigned int mhz = 0;
  if (api_->clock(handle_, kNvmlClockSm, &mhz) == kNvmlSuccess) r.sm_clock_mhz = mhz;
  return r;
}

}  // namespace dtrain
