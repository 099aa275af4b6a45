#include "test/support/catch.h"

#include <torch/cuda.h>

#include <algorithm>

#include "runtime/comm/make_communicator.h"
#include "runtime/config/validate.h"
#include "runtime/util/error.h"

using namespace dtrain;

namespace {

bool has(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

TEST_CASE("the build contains the backends CMake found", "[device]") {
  const std::vector<std::string> backends = available_backends();
  CHECK(has(backends, "mpi"));
  // DTRAIN_EXPECT_NCCL comes from CMake: a build that found the CUDA toolkit and NCCL, against a CUDA
  // LibTorch, must offer the backend, so a CI machine with the toolkit cannot lose it silently; with a
  // CPU-only LibTorch it must not offer it.
  CHECK(has(backends, "nccl") == (DTRAIN_EXPECT_NCCL != 0));
}

TEST_CASE("auto picks CUDA and NCCL only when a GPU is visible and NCCL is built in", "[device]") {
  const bool gpu = torch::cuda::is_available();
  const DeviceKind device = resolve_device(DeviceKind::kAuto);
  CHECK(device == (gpu ? DeviceKind::kCuda : DeviceKind::kCpu));
  const BootstrapKind mpi = BootstrapKind::kMpi;
  CHECK(resolve_backend(BackendKind::kAuto, DeviceKind::kCpu, mpi) == BackendKind::kMpi);
  CHECK(resolve_backend(BackendKind::kAuto, DeviceKind::kCuda, mpi) ==
        (has(available_backends(), "nccl") ? BackendKind::kNccl : BackendKind::kMpi));
  CHECK(resolve_backend(BackendKind::kMpi, DeviceKind::kCuda, mpi) == BackendKind::kMpi);
}

TEST_CASE("under torchrun's environment auto picks gloo on CPUs, and mpi is refused", "[device]") {
  const BootstrapKind env = BootstrapKind::kEnv;
  if (has(available_backends(), "gloo")) {
    CHECK(resolve_backend(BackendKind::kAuto, DeviceKind::kCpu, env) == BackendKind::kGloo);
  } else {
    REQUIRE_THROWS_WITH(resolve_backend(BackendKind::kAuto, DeviceKind::kCpu, env),
                        Catch::Contains("needs the gloo backend, which is not built into this dtrain"));
  }
  if (has(available_backends(), "nccl")) {
    CHECK(resolve_backend(BackendKind::kAuto, DeviceKind::kCuda, env) == BackendKind::kNccl);
  }
  REQUIRE_THROWS_WITH(resolve_backend(BackendKind::kMpi, DeviceKind::kCpu, env),
                      Catch::Contains("comm.backend 'mpi' needs ranks that an MPI launcher started") &&
                          Catch::Contains("--backend gloo on CPUs or nccl on GPUs"));
}

TEST_CASE("asking for an absent device or backend is an error listing what is available", "[device]") {
  if (!torch::cuda::is_available()) {
    REQUIRE_THROWS_AS(resolve_device(DeviceKind::kCuda), ConfigError);
    REQUIRE_THROWS_WITH(resolve_device(DeviceKind::kCuda),
                        Catch::Contains("comm.device 'cuda' requested") && Catch::Contains("available devices: cpu"));
  }
  if (has(available_backends(), "nccl")) {
    REQUIRE_THROWS_WITH(resolve_backend(BackendKind::kNccl, DeviceKind::kCpu, BootstrapKind::kMpi),
                        Catch::Contains("comm.backend 'nccl' needs comm.device 'cuda'"));
  } else {
    REQUIRE_THROWS_WITH(resolve_backend(BackendKind::kNccl, DeviceKind::kCpu, BootstrapKind::kMpi),
                        Catch::Contains("comm.backend 'nccl'") && Catch::Contains("available backends: mpi"));
  }
}

TEST_CASE("fp16 needs a CUDA device, bf16 runs anywhere", "[device][config]") {
  TrainConfig config;
  config.train.precision = Precision::kFp16;
  ConfigSources sources{{"train.precision", "--precision"}};
  REQUIRE_THROWS_WITH(validate_for_device(config, DeviceKind::kCpu, sources),
                      Catch::Contains("train.precision (from --precision) 'fp16' needs comm.device 'cuda'") &&
                          Catch::Contains("--precision bf16"));
  CHECK_NOTHROW(validate_for_device(config, DeviceKind::kCuda, sources));
  config.train.precision = Precision::kBf16;
  CHECK_NOTHROW(validate_for_device(config, DeviceKind::kCpu, sources));
}
