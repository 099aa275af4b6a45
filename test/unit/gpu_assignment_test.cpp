#include "test/support/catch.h"

#include "runtime/device/gpu_assignment.h"
#include "runtime/util/error.h"

using namespace dtrain;

namespace {

GpuPlacement placement(int local_rank, int local_world_size, int gpus, bool one_rank_per_gpu) {
  GpuPlacement p;
  p.local_rank = local_rank;
  p.local_world_size = local_world_size;
  p.visible_gpus = gpus;
  p.one_rank_per_gpu = one_rank_per_gpu;
  p.host = "node07";
  return p;
}

}  // namespace

TEST_CASE("each rank of a node gets the GPU of its local rank", "[device]") {
  for (int local_rank = 0; local_rank < 4; ++local_rank) {
    CHECK(assign_gpu(placement(local_rank, 4, 4, true)) == local_rank);
    CHECK(assign_gpu(placement(local_rank, 4, 8, true)) == local_rank);  // spare GPUs stay idle
  }
}

TEST_CASE("more ranks than GPUs on a node is an error for NCCL, naming the host and the counts", "[device]") {
  GpuPlacement p = placement(2, 3, 2, true);
  p.cuda_visible_devices = "0,1";
  REQUIRE_THROWS_AS(assign_gpu(p), ConfigError);
  REQUIRE_THROWS_WITH(assign_gpu(p), Catch::Contains("host node07 runs 3 ranks but has only 2 visible GPUs") &&
                                         Catch::Contains("CUDA_VISIBLE_DEVICES=0,1") &&
                                         Catch::Contains("--backend mpi"));
}

TEST_CASE("ranks may share GPUs when the backend stages through host memory", "[device]") {
  CHECK(assign_gpu(placement(0, 2, 1, false)) == 0);
  CHECK(assign_gpu(placement(1, 2, 1, false)) == 0);
  CHECK(assign_gpu(placement(3, 4, 2, false)) == 1);
}

TEST_CASE("a node without a visible GPU is an error that suggests the CPU", "[device]") {
  REQUIRE_THROWS_WITH(assign_gpu(placement(0, 1, 0, false)),
                      Catch::Contains("host node07 has no visible CUDA device") &&
                          Catch::Contains("CUDA_VISIBLE_DEVICES unset") && Catch::Contains("--device cpu"));
}
