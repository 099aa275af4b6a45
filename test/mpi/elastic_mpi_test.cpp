// Elastic training's promise: with the global batch held (train.elastic_batch global), a run that shrinks
// from 3 ranks to 2 in the middle of an epoch ends with the parameters of a run at 2 ranks throughout
// from the same checkpoint, up to float summation order. Runs in the 3-rank suite: the 3-rank part over
// MPI, the 2-rank part on ranks 0 and 1 as torchrun would start them (a StoreSession and Gloo).
#include "test/support/catch.h"

#include <ATen/ATen.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>

#include "runtime/bootstrap/store_session.h"
#include "runtime/comm/gloo_communicator.h"
#include "test/mpi/mpi_test_support.h"
#include "test/support/params.h"
#include "test/support/temp_dir.h"
#include "test/support/tiny_workload.h"
#include "test/support/train_run.h"

using namespace dtrain;
namespace fs = std::filesystem;

namespace {

// Rank 0 picks a free port and every rank learns it.
int shared_free_port(Communicator& comm) {
  int port = 0;
  if (comm.is_root()) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) {
      socklen_t length = sizeof address;
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
      port = ntohs(address.sin_port);
    }
    close(fd);
  }
  at::Tensor value = at::full({1}, port, at::kLong);
  comm.broadcast(value, 0);
  return static_cast<int>(value.item<int64_t>());
}

// ||a - b|| / ||b - start||: 0 for the same training, float rounding ~1e-6, a real difference ~1e-2.
double gap(const at::Tensor& a, const at::Tensor& b, const at::Tensor& start) {
  return (a - b).norm().item<double>() / (b - start).norm().item<double>();
}

TrainConfig elastic_config(const std::string& dir) {
  TrainConfig config = test::tiny_config(dir);
  config.train.epochs = 2;
  config.train.batch_size = 24;  // the most a rank takes: 48 = 3 x 16 = 2 x 24, one pass each
  config.train.elastic_batch = ElasticBatch::kGlobal;
  config.train.global_batch_size = 48;
  config.checkpoint.keep = 0;
  return config;
}

}  // namespace

TEST_CASE("shrinking from 3 ranks to 2 mid-epoch with the global batch held trains as 2 ranks throughout",
          "[elastic][mpi]") {
  auto mpi = test::make_mpi_comm();
  if (mpi->world_size() != 3) {
    WARN("needs 3 ranks; this run has " << mpi->world_size());
    return;
  }
  test::TempDir dir;  // rank 0's is the one used: it writes and reads the checkpoints
  test::TinyOptions tiny;
  tiny.train_samples = 576;  // 12 global batches of 48: no padding at any of the world sizes
  tiny.float64 = true;       // the bound is float64's rounding (test::kReorderBound), whatever the CPU
  auto workload = test::make_tiny_workload(tiny);

  // C0: epoch 1 at 3 ranks.
  TrainConfig start = elastic_config(dir.file("c0"));
  start.train.epochs = 1;
  const test::TrainRun c0 = test::train_run(start, *workload, *mpi);

  // Epoch 2 at 3 ranks from C0, a checkpoint every 4 steps; it "fails" after step 4 (C1): the later
  // checkpoints are removed.
  TrainConfig three = elastic_config(dir.file("shrink"));
  TrainConfig two = elastic_config(dir.file("two"));
  TrainConfig per_rank = elastic_config(dir.file("per-rank"));
  if (mpi->is_root()) {
    for (const TrainConfig* c : {&three, &two}) {
      fs::create_directories(c->checkpoint.dir);
      fs::copy(start.checkpoint.dir, c->checkpoint.dir, fs::copy_options::recursive);
    }
  }
  mpi->barrier();
  three.checkpoint.resume = true;
  three.checkpoint.every_steps = 4;
  test::train_run(three, *workload, *mpi);
  if (mpi->is_root()) {
    fs::create_directories(per_rank.checkpoint.dir);
    fs::copy(three.checkpoint.dir, per_rank.checkpoint.dir, fs::copy_options::recursive);
    for (const TrainConfig* c : {&three, &per_rank}) {
      for (const char* late : {"checkpoint-epoch-000002-step-00000008.safetensors", "checkpoint-epoch-000002.safetensors"}) {
        REQUIRE(fs::remove(c->checkpoint.dir + "/" + late));
      }
    }
  }
  mpi->barrier();

  // Ranks 0 and 1 go on as a world of 2, as torchrun restarts them: the shrunk run from C1, the run at 2
  // ranks throughout from C0, and a control that holds the per-rank batch instead (global 32).
  const int port = shared_free_port(*mpi);
  if (mpi->rank() < 2) {
    TorchEnv env;
    env.rank = mpi->rank();
    env.world_size = 2;
    env.master_addr = "127.0.0.1";
    env.master_port = port;
    StoreSession session(env, 120.0);
    GlooOptions options;
    options.wait = WaitOptions{120.0, nullptr, {}};
    GlooCommunicator gloo(session, options);
    const test::TrainRun shrunk = test::train_run(three, *workload, gloo);
    two.checkpoint.resume = true;
    const test::TrainRun throughout = test::train_run(two, *workload, gloo);
    per_rank.checkpoint.resume = true;
    per_rank.train.elastic_batch = ElasticBatch::kPerRank;
    per_rank.train.global_batch_size = 0;
    per_rank.train.batch_size = 16;
    const test::TrainRun control = test::train_run(per_rank, *workload, gloo);

    REQUIRE(shrunk.result.epochs.size() == 1);
    CHECK(shrunk.result.epochs[0].first_step == 5);
    CHECK(shrunk.result.epochs[0].steps == 8);
    CHECK(shrunk.result.epochs[0].train_samples == 576);
    const double shrink_gap = gap(shrunk.params, throughout.params, c0.params);
    const double control_gap = gap(control.params, throughout.params, c0.params);
    INFO("shrunk vs 2 ranks throughout: " << shrink_gap << "; per-rank batch control: " << control_gap);
    CHECK(shrink_gap < test::kReorderBound);
    CHECK(control_gap > test::kWrongMath);  // the comparison can tell a different training apart
  }
  mpi->barrier();
}
