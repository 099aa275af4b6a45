// train.deterministic's pieces: the order of a rank's shards, which rows a shard takes, the batch plan and
// its refusals, and the reducer's sums against the same tree built by hand from each shard's gradient.
#include "test/support/catch.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/autograd.h>

#include <string>
#include <vector>

#include "runtime/comm/local_communicator.h"
#include "runtime/reduce/shard_tree_reducer.h"
#include "runtime/train/batch_plan.h"
#include "runtime/train/shard_steps.h"
#include "runtime/util/error.h"
#include "test/support/error_message.h"
#include "test/support/tiny_workload.h"

using namespace dtrain;
using Catch::Matchers::Contains;

namespace {

// train.deterministic with 8 shards; the global batch train.global_batch_size holds (0: none given).
TrainOptions deterministic_options(int64_t global_batch_size = 0) {
  TrainOptions options;
  options.deterministic = true;
  options.shards = 8;
  options.global_batch_size = global_batch_size;
  return options;
}

}  // namespace

TEST_CASE("a rank runs its shards in bit-reversed order, so a running sum builds the tree", "[deterministic]") {
  CHECK(shard_order(1) == std::vector<int64_t>{0});
  CHECK(shard_order(2) == std::vector<int64_t>{0, 1});
  CHECK(shard_order(4) == std::vector<int64_t>{0, 2, 1, 3});
  CHECK(shard_order(8) == std::vector<int64_t>{0, 4, 2, 6, 1, 5, 3, 7});
  CHECK_THAT(test::error_message([] { shard_order(6); }), Contains("6 shards per rank is not a power of two"));
}

TEST_CASE("a shard takes every k-th row of a rank's batch; no rank trains on the sampler's padding", "[deterministic]") {
  Batch batch;
  batch.inputs = at::arange(14, at::kFloat).view({7, 2});
  batch.targets = at::arange(7, at::kLong);
  batch.indices = {10, 11, 12, 13, 14, 15, 16};
  batch.size = 7;
  const Batch first = shard_rows(batch, 0, 4);
  CHECK(first.size == 2);
  CHECK(first.indices == std::vector<int64_t>{10, 14});
  CHECK(at::equal(first.targets, at::tensor({0, 4}, at::kLong)));
  CHECK(at::equal(first.inputs, at::tensor({0.0f, 1.0f, 8.0f, 9.0f}).view({2, 2})));
  const Batch last = shard_rows(batch, 3, 4);
  CHECK(last.size == 1);
  CHECK(last.indices == std::vector<int64_t>{13});
  // Cora's 140 labelled nodes over 8 ranks: 18 on ranks 0-3, 17 on 4-7, each node once.
  int64_t total = 0;
  for (int r = 0; r < 8; ++r) {
    CHECK(unpadded_samples(140, 0, r, 8) == (r < 4 ? 18 : 17));
    total += unpadded_samples(140, 0, r, 8);
  }
  CHECK(total == 140);
  CHECK(unpadded_samples(140, 136, 0, 8) == 1);  // position 136
  CHECK(unpadded_samples(140, 136, 5, 8) == 0);  // 141: past the end
}

TEST_CASE("the deterministic batch holds the global batch and refuses splits it cannot make exact", "[deterministic]") {
  TrainOptions options = deterministic_options();
  options.batch_size = 32;
  options.accumulate = 2;
  options.max_steps = 9;
  const RunBatch plan = plan_deterministic_batch(options, 4, 0, 60000);
  CHECK(plan.global_batch == 256);  // batch_size x accumulate x ranks at this start
  CHECK(options.batch_size == 64);  // loaded per rank and step, trained as 2 shards of 32
  CHECK(options.accumulate == 1);
  CHECK(options.max_steps == 5);    // 9 backward passes at accumulate 2: 5 optimizer steps
  CHECK_THAT(plan.note, Contains("global batch 256 in 8 shards of 32 samples, 2 per rank at 4 ranks"));

  auto planned = [](int ranks, int64_t global, int64_t samples) {
    TrainOptions o = deterministic_options(global);
    return test::error_message([&] { plan_deterministic_batch(o, ranks, 0, samples); });
  };
  CHECK(planned(8, 144, 140) == "no error");  // the GCN: one step of all 140 nodes
  // Advice a user can follow: no --shards makes 3 ranks work; 16 ranks work with 16 shards.
  CHECK(planned(3, 48, 1000) ==
        "train.deterministic: 3 ranks cannot share the 8 shards of train.shards: the shards' gradients are summed in a "
        "binary tree, so the world size must be a power of two that divides them (1, 2, 4 or 8 ranks); run on 1, 2, 4 "
        "or 8 ranks, or without --deterministic");
  CHECK_THAT(planned(16, 64, 1000), Contains("16 ranks cannot share the 8 shards") &&
                                        Contains("or pass --shards 16 or more (a power of two; the bits then differ "
                                                 "from runs with 8 shards)"));
  CHECK_THAT(planned(2, 100, 1000),
             Contains("the global batch of 100 samples (train.global_batch_size) is not a multiple of train.shards (8); "
                      "choose --global-batch-size 104 or --shards"));
  CHECK(planned(2, 64, 1000) == "no error");  // its last global batch: 40 samples, 5 per shard
  CHECK_THAT(planned(2, 64, 1030), Contains("an epoch of 1030 samples ends with a global batch of 6, fewer than its 8 shards"));
  // A checkpoint's global batch is held when none is given.
  TrainOptions resumed = deterministic_options();
  CHECK(plan_deterministic_batch(resumed, 2, 96, 1000).global_batch == 96);
}

TEST_CASE("a workload whose passes compute their whole input trains the global batch whole on every rank",
          "[deterministic]") {
  auto planned = [](int ranks) {
    TrainOptions o = deterministic_options(144);
    o.accumulate = 3;
    o.max_steps = 7;
    const RunBatch plan = plan_deterministic_batch(o, ranks, 0, 140, /*whole_input_passes=*/true);
    CHECK(plan.global_batch == 144);
    CHECK(plan.sharing_ranks == 1);  // no rank's share is another's: each trains all of it
    CHECK(o.batch_size == 144);
    CHECK(o.shards == 1);  // one pass per step
    CHECK(o.accumulate == 1);
    CHECK(o.max_steps == 3);  // 7 backward passes at accumulate 3: 3 optimizer steps
    return plan.note;
  };
  // Any world size: nothing is split, so no power of two is needed.
  for (const int ranks : {1, 2, 3, 8}) {
    CHECK_THAT(planned(ranks), Contains("global batch 144 (train.global_batch_size) trained whole on each of the " +
                                        std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks") + " in one pass"));
  }
  // The same workload's batch without the mode is the world's to share.
  TrainOptions plain;
  plain.batch_size = 16;
  CHECK(plan_run_batch(plain, 4, 0, 140, /*whole_input_passes=*/true).sharing_ranks == 4);
}

TEST_CASE("the reducer's shards are shared by the world's ranks or by none", "[deterministic][reduce]") {
  // Shared by one rank, each rank holds the whole tree (e2e_deterministic trains the GCN so at 1 to 8 ranks).
  test::TinyOptions tiny;
  auto model = test::make_tiny_workload(tiny)->make_model({});
  std::vector<at::Tensor> params = model->parameters();
  LocalCommunicator comm;
  ShardTreeReducer reducer(params, model->buffers(), comm, 1, 1);
  CHECK(reducer.shards_per_rank() == 1);
  CHECK_THAT(test::error_message([&] { ShardTreeReducer(params, model->buffers(), comm, 1, 2); }),
             Contains("the shards are shared by 2 ranks of 1; expected 1 or all of them"));
}

TEST_CASE("the reducer sums each shard's gradient and statistics in the fixed tree", "[deterministic][reduce]") {
  test::TinyOptions tiny;
  tiny.batchnorm = true;
  auto model = test::make_tiny_workload(tiny)->make_model({});
  std::vector<at::Tensor> params = model->parameters();
  std::vector<at::Tensor> buffers = model->buffers();
  const at::Tensor inputs = at::randn({16, 8}, at::detail::createCPUGenerator(3), at::kFloat);
  const at::Tensor targets = at::randint(4, {16}, at::detail::createCPUGenerator(4), at::kLong);
  constexpr int64_t kShards = 4;
  auto shard_loss = [&](int64_t m) {
    const at::Tensor rows = at::arange(m, 16, kShards, at::kLong);
    return at::nll_loss(model->forward(inputs.index_select(0, rows)), targets.index_select(0, rows)) * 0.25;
  };
  // By hand: each shard from the same statistics, its gradient alone; then ((0 + 2) + (1 + 3)).
  std::vector<at::Tensor> start;
  for (const at::Tensor& b : buffers) start.push_back(b.detach().clone());
  std::vector<std::vector<at::Tensor>> grads(kShards), stats(kShards);
  for (int64_t m = 0; m < kShards; ++m) {
    for (size_t i = 0; i < buffers.size(); ++i) buffers[i].detach().copy_(start[i]);
    grads[m] = torch::autograd::grad({shard_loss(m)}, params);
    for (const at::Tensor& b : buffers) stats[m].push_back(b.detach().clone());
  }
  for (size_t i = 0; i < buffers.size(); ++i) buffers[i].detach().copy_(start[i]);

  LocalCommunicator comm;
  ShardTreeReducer reducer(params, buffers, comm, kShards, comm.world_size());
  reducer.sync_buffers();
  const std::vector<int64_t> order = shard_order(kShards);
  for (size_t i = 0; i < order.size(); ++i) {
    const at::Tensor loss = shard_loss(order[i]);
    reducer.prepare_backward(i + 1 == order.size());
    loss.backward();
    reducer.finish_backward();
  }
  for (size_t p = 0; p < params.size(); ++p) {
    const at::Tensor expected = (grads[0][p] + grads[2][p]) + (grads[1][p] + grads[3][p]);
    CHECK(at::equal(params[p].grad(), expected));
  }
  int floating = 0;
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (!buffers[i].is_floating_point()) {
      CHECK(at::equal(buffers[i], start[i] + 1));  // one forward's worth of batches, not four
      continue;
    }
    ++floating;
    const at::Tensor expected = ((stats[0][i] + stats[2][i]) + (stats[1][i] + stats[3][i])).div(4.0);
    CHECK(at::equal(buffers[i], expected));
  }
  CHECK(floating == 2);  // BatchNorm's running mean and variance
  CHECK(reducer.all_finite().item<bool>());
  reducer.zero_grad();
  for (const at::Tensor& p : params) CHECK(p.grad().abs().sum().item<double>() == 0);
}
