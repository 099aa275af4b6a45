// Reading which GPU architectures a library has kernels for. The layout was checked against NVIDIA's
// cuobjdump on PyPI's libtorch_cuda.so 2.11 (CUDA 13): 444 fatbinaries, each with sm_75, sm_80, sm_86,
// sm_90, sm_100 and sm_120 cubins, and a few with sm_89, sm_90a, sm_100a, sm_103a, sm_120a or sm_121a,
// exactly as listed by `cuobjdump --list-elf`. Here a section of that layout is built into this test
// binary, so that CI checks the reader without a CUDA library.
#include "test/support/catch.h"

#include <cstdint>
#include <fstream>

#include <torch/version.h>

#include "runtime/device/cuda_configs.h"
#include "runtime/device/cuda_kernel_inventory.h"
#include "runtime/util/error.h"
#include "test/support/temp_dir.h"
#include "test/support/skip.h"

using namespace dtrain;
using Catch::Matchers::Contains;

namespace {

// The fatbinary layout, written out as the CUDA toolchain lays it out.
struct TestFatbinHeader {
  uint32_t magic = 0xBA55ED50;
  uint16_t version = 1;
  uint16_t header_size = 16;
  uint64_t entries_size;
};
struct TestEntry {
  uint16_t kind;  // 1 PTX, 2 cubin
  uint16_t version = 0x0101;
  uint32_t header_size = 64;
  uint64_t payload_size = 16;
  uint32_t compressed_size = 0;
  uint32_t unknown = 0;
  uint16_t minor = 8;
  uint16_t major = 1;
  uint32_t arch;
  uint32_t name_offset = 0;
  uint32_t name_size = 0;
  uint64_t flags;
  uint64_t reserved[2] = {0, 0};  // the toolchain's headers are 64 or 112 bytes
  unsigned char payload[16] = {};
};
static_assert(sizeof(TestEntry) == 64 + 16, "entry header 64 bytes, payload 16");

struct TestFatbin {
  TestFatbinHeader header;
  TestEntry entries[3];
};

constexpr uint64_t kEntries = 3 * sizeof(TestEntry);
constexpr uint64_t kCubin64 = 0x8011;               // the flags of ordinary 64-bit cubins
constexpr uint64_t kArchSpecific = 0x100000 | kCubin64;

// Two modules: {sm_75, sm_80, sm_90a} and {sm_75, sm_80, compute_90 (PTX)}.
__attribute__((used, section(".nv_fatbin"), aligned(8))) const TestFatbin kFatbins[2] = {
    {{0xBA55ED50, 1, 16, kEntries},
     {{2, 0x0101, 64, 16, 0, 0, 8, 1, 75, 0, 0, kCubin64, {0, 0}, {}},
      {2, 0x0101, 64, 16, 0, 0, 8, 1, 80, 0, 0, kCubin64, {0, 0}, {}},
      {2, 0x0101, 64, 16, 0, 0, 8, 1, 90, 0, 0, kArchSpecific, {0, 0}, {}}}},
    {{0xBA55ED50, 1, 16, kEntries},
     {{2, 0x0101, 64, 16, 0, 0, 8, 1, 75, 0, 0, kCubin64, {0, 0}, {}},
      {2, 0x0101, 64, 16, 0, 0, 8, 1, 80, 0, 0, kCubin64, {0, 0}, {}},
      {1, 0x0101, 64, 16, 0, 0, 8, 1, 90, 0, 0, 0x11, {0, 0}, {}}}},
};

}  // namespace

TEST_CASE("kernel images run on the compute capabilities CUDA allows", "[device]") {
  const KernelImage sm80{80, false, false};
  CHECK(runs_on(sm80, 8, 0));
  CHECK(runs_on(sm80, 8, 6));        // a cubin runs on later minors of its major
  CHECK_FALSE(runs_on(sm80, 7, 5));
  CHECK_FALSE(runs_on(sm80, 9, 0));  // never on another major
  const KernelImage sm90a{90, false, true};
  CHECK(runs_on(sm90a, 9, 0));
  CHECK_FALSE(runs_on(sm90a, 10, 0));
  const KernelImage ptx90{90, true, false};
  CHECK(runs_on(ptx90, 12, 0));      // PTX is compiled for newer GPUs by the driver
  CHECK_FALSE(runs_on(ptx90, 8, 9));
  CHECK(to_string(sm90a) == "sm_90a");
  CHECK(to_string(ptx90) == "compute_90");
  CHECK(runs_on(KernelImage{100, false, false}, 10, 3));
  CHECK_FALSE(runs_on(KernelImage{120, false, false}, 10, 0));
}

TEST_CASE("the kernel inventory of a binary comes from its .nv_fatbin section", "[device]") {
  const auto inventory = read_cuda_kernel_inventory("/proc/self/exe");
  REQUIRE(inventory.has_value());
  CHECK(inventory->modules() == 2);
  CHECK(inventory->common_images() == "sm_75, sm_80");
  CHECK(inventory->runs_on(7, 5));   // T4
  CHECK(inventory->runs_on(8, 6));   // A10, via sm_80
  CHECK(inventory->runs_on(9, 0));   // H100: sm_90a in one module, PTX in the other
  CHECK_FALSE(inventory->runs_on(7, 0));   // V100
  CHECK_FALSE(inventory->runs_on(10, 0));  // the first module has nothing for it

  const std::string message = unsupported_gpu_message(GpuDescription{1, "node07", "Tesla V100-SXM2-16GB", 7, 0},
                                                       "libtorch 2.11.0 with CUDA 13.0", *inventory);
  CHECK(message ==
        "GPU 1 on host node07 (Tesla V100-SXM2-16GB, compute capability 7.0) cannot run this LibTorch's CUDA kernels: "
        "libtorch 2.11.0 with CUDA 13.0 has kernels for sm_75, sm_80 and none for sm_70. Use dtrain's volta "
        "configuration (LibTorch 2.7.1 with CUDA 12.6, kernels sm_50, sm_60, sm_70, sm_75, sm_80, sm_86, sm_90): the "
        "image dtrain:cuda-volta (bash scripts/build_image.sh cuda-volta) or a build with bash scripts/build_cuda.sh "
        "volta; or another GPU, or --device cpu (docs/gpu.md)");
}

TEST_CASE("a GPU the loaded LibTorch cannot drive is sent to the configuration that can", "[device]") {
  const CudaConfig* volta = cuda_config_for_torch("2.7.1");
  const CudaConfig* current = cuda_config_for_torch("2.11.0");
  REQUIRE(volta != nullptr);
  REQUIRE(current != nullptr);
  CHECK(cuda_config_for_torch("2.9.1") == nullptr);
  const auto message = [](const CudaConfig& loaded, const GpuDescription& gpu) {
    return unsupported_gpu_message(gpu, "libtorch " + loaded.torch_version, loaded.inventory());
  };
  // Pascal (P100, and P4 through sm_60's cubins) on the current image: the volta one.
  CHECK_THAT(message(*current, {0, "gke-p100-1", "Tesla P100-PCIE-16GB", 6, 0}),
             Contains("has kernels for sm_75, sm_80, sm_86, sm_90, sm_100, sm_120 and none for sm_60. Use dtrain's "
                      "volta configuration") &&
                 Contains("the image dtrain:cuda-volta (bash scripts/build_image.sh cuda-volta)"));
  CHECK_THAT(message(*current, {0, "gke-p4-1", "Tesla P4", 6, 1}), Contains("Use dtrain's volta configuration"));
  // Blackwell on the volta image: the current one.
  CHECK_THAT(message(*volta, {3, "b200-node", "NVIDIA B200", 10, 0}),
             Contains("none for sm_100. Use dtrain's current configuration (LibTorch 2.11.0 with CUDA 13.0, kernels "
                      "sm_75, sm_80, sm_86, sm_90, sm_100, sm_120): the image dtrain:cuda (bash scripts/build_image.sh "
                      "cuda) or a build with bash scripts/build_cuda.sh current"));
  // Kepler (K80): no configuration has kernels for it, and the message says so instead of sending the user
  // from one image to the other.
  const std::string k80 = message(*current, {0, "gke-k80-1", "Tesla K80", 3, 7});
  CHECK_THAT(k80, Contains("No configuration of dtrain has sm_37 kernels (current: sm_75, sm_80, sm_86, sm_90, "
                           "sm_100, sm_120; volta: sm_50, sm_60, sm_70, sm_75, sm_80, sm_86, sm_90;") &&
                      Contains("use another GPU or --device cpu"));
  CHECK_THAT(k80, !Contains("image"));
}

TEST_CASE("files without GPU code or not ELF at all are told apart", "[device]") {
  CHECK_FALSE(read_cuda_kernel_inventory("/bin/sh").has_value());
  test::TempDir dir;
  std::ofstream(dir.file("text")) << "not an ELF file, but long enough to hold an ELF header of sixty-four bytes";
  CHECK_THROWS_WITH(read_cuda_kernel_inventory(dir.file("text")), Contains("is not a 64-bit ELF file"));
  CHECK_THROWS_WITH(read_cuda_kernel_inventory(dir.file("missing")), Contains("cannot open"));
  CHECK(loaded_library_path("no-such-library-loaded").empty());
  CHECK_THAT(loaded_library_path("libc.so"), Contains("libc.so"));
}

TEST_CASE("this build's LibTorch has the kernels its configuration lists", "[device]") {
  const std::string library = loaded_library_path("libtorch_cuda");
  if (library.empty()) {
    DTRAIN_SKIP("this build's LibTorch has no CUDA (no libtorch_cuda loaded)");
  }
  const auto inventory = read_cuda_kernel_inventory(library);
  REQUIRE(inventory.has_value());
  CHECK(inventory->modules() > 100);
  INFO(library << ": " << inventory->common_images());
  const CudaConfig* config = cuda_config_for_torch(TORCH_VERSION);
  if (config == nullptr) {
    // A LibTorch outside dtrain's configurations (a GPU host's own): the GPUs the deploy files target.
    WARN("LibTorch " << TORCH_VERSION << " is none of dtrain's CUDA configurations (runtime/device/cuda_configs.cpp)");
    CHECK(inventory->runs_on(7, 5));
    CHECK(inventory->runs_on(8, 0));
    CHECK(inventory->runs_on(9, 0));
    return;
  }
  INFO("configuration " << config->name);
  // The real library has exactly the kernels that the table (and so the start-up message) promises.
  CHECK(inventory->common_images() == config->inventory().common_images());
  CHECK(inventory->runs_on(7, 5));  // T4
  CHECK(inventory->runs_on(9, 0));  // H100, H200 (the GPU hosts)
  if (config->name == "volta") {
    CHECK(inventory->runs_on(6, 0));  // P100
    CHECK(inventory->runs_on(6, 1));  // P4
    CHECK(inventory->runs_on(7, 0));  // V100
  } else {
    CHECK(config->name == "current");
    CHECK_FALSE(inventory->runs_on(6, 0));
    CHECK_FALSE(inventory->runs_on(7, 0));
    CHECK(inventory->runs_on(10, 0));  // B200
    CHECK(inventory->runs_on(12, 0));  // RTX 50xx
  }
  CHECK_FALSE(inventory->runs_on(3, 7));  // K80: no PyPI LibTorch of today
}
