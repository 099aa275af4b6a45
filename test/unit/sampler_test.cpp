#include "test/support/catch.h"

#include <algorithm>
#include <set>

#include <ATen/ATen.h>

#include "runtime/data/distributed_sampler.h"
#include "runtime/data/tensor_dataset.h"
#include "runtime/util/error.h"

using namespace dtrain;

TEST_CASE("shards are disjoint, equal in length and cover the dataset", "[data]") {
  for (int world : {1, 2, 3, 4, 7}) {
    for (int64_t n : {1, 10, 100, 1001}) {
      std::multiset<int64_t> all;
      for (int rank = 0; rank < world; ++rank) {
        DistributedSampler sampler(n, rank, world, 42);
        const auto indices = sampler.indices(1);
        CHECK(static_cast<int64_t>(indices.size()) == (n + world - 1) / world);
        all.insert(indices.begin(), indices.end());
      }
      const std::set<int64_t> distinct(all.begin(), all.end());
      CHECK(static_cast<int64_t>(distinct.size()) == n);  // every sample, each rank's share disjoint...
      CHECK(static_cast<int64_t>(all.size()) - n == DistributedSampler(n, 0, world, 42).padding());  // ...but padding
      CHECK(DistributedSampler(n, 0, world, 42).padding() < world);
    }
  }
}

TEST_CASE("shuffles are deterministic for a seed and differ across epochs and seeds", "[data]") {
  DistributedSampler a(1000, 1, 3, 7);
  DistributedSampler b(1000, 1, 3, 7);
  CHECK(a.indices(2) == b.indices(2));
  CHECK(a.indices(1) != a.indices(2));
  CHECK(DistributedSampler(1000, 1, 3, 8).indices(1) != a.indices(1));
}

TEST_CASE("the permutation is a permutation and is pinned across platforms", "[data]") {
  auto perm = seeded_permutation(10, 123);
  auto sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 10; ++i) CHECK(sorted[i] == i);
  // SplitMix64 + Fisher-Yates is fully specified: a change here changes every run's data order.
  CHECK(perm == seeded_permutation(10, 123));
  CHECK(seeded_permutation(10, 124) != perm);
}

TEST_CASE("W ranks with batch b see the samples of one rank with batch W*b", "[data]") {
  const int world = 3;
  const int64_t n = 96;
  const int64_t b = 4;
  const auto single = DistributedSampler(n, 0, 1, 5).indices(1);
  std::vector<std::vector<int64_t>> shards;
  for (int r = 0; r < world; ++r) shards.push_back(DistributedSampler(n, r, world, 5).indices(1));
  for (int64_t step = 0; step < n / (world * b); ++step) {
    std::set<int64_t> global(single.begin() + step * world * b, single.begin() + (step + 1) * world * b);
    std::set<int64_t> union_of_ranks;
    for (const auto& shard : shards) union_of_ranks.insert(shard.begin() + step * b, shard.begin() + (step + 1) * b);
    CHECK(union_of_ranks == global);
  }
}

TEST_CASE("an epoch stopped at a global position continues at another world size with the same batches", "[data]") {
  // 3 ranks x 8 took 5 global batches of 24; 2 ranks x 12 take the rest: every global batch is the one
  // the uninterrupted run at 3 ranks takes, and over the two parts each sample is seen exactly once.
  const int64_t n = 240;
  const int64_t global = 24;
  const int64_t done = 5 * global;
  std::vector<std::vector<int64_t>> before;
  std::vector<std::vector<int64_t>> after;
  for (int r = 0; r < 3; ++r) before.push_back(DistributedSampler(n, r, 3, 9).indices(2));
  for (int r = 0; r < 2; ++r) after.push_back(DistributedSampler(n, r, 2, 9).indices(2, done));
  CHECK(after[0].size() == static_cast<size_t>((n - done) / 2));
  std::multiset<int64_t> seen;
  for (int64_t step = 0; step < n / global; ++step) {
    std::set<int64_t> uninterrupted;
    for (const auto& shard : before) uninterrupted.insert(shard.begin() + step * 8, shard.begin() + (step + 1) * 8);
    std::set<int64_t> resumed;
    if (step < 5) {
      resumed = uninterrupted;
    } else {
      const int64_t t = step - 5;
      for (const auto& shard : after) resumed.insert(shard.begin() + t * 12, shard.begin() + (t + 1) * 12);
    }
    CHECK(resumed == uninterrupted);
    seen.insert(resumed.begin(), resumed.end());
  }
  CHECK(seen.size() == static_cast<size_t>(n));
  CHECK(std::set<int64_t>(seen.begin(), seen.end()).size() == static_cast<size_t>(n));
  // A rest that does not divide is padded from its own start, as a whole epoch is.
  const auto last = DistributedSampler(10, 1, 3, 9).indices(1, 6);
  const auto whole = DistributedSampler(10, 0, 1, 9).indices(1);
  CHECK(last == std::vector<int64_t>{whole[7], whole[6]});  // positions 6 7 8 9 | 6 7: rank 1 takes 7, then 6
  CHECK_THROWS_AS(DistributedSampler(10, 0, 1, 9).indices(1, 10), Error);
}

TEST_CASE("evaluation shards partition the test set without padding", "[data]") {
  for (int world : {1, 2, 3, 8}) {
    int64_t next = 0;
    for (int rank = 0; rank < world; ++rank) {
      const Range range = eval_shard(10, rank, world);
      CHECK(range.begin == next);
      CHECK(range.end >= range.begin);
      next = range.end;
    }
    CHECK(next == 10);
  }
}

TEST_CASE("datasets normalise stored uint8 inputs per batch", "[data]") {
  TensorDataset data;
  data.inputs = at::tensor(std::vector<uint8_t>{0, 51, 255}).reshape({3, 1});
  data.targets = at::zeros({3}, at::kLong);
  data.mean = at::full({1}, 0.5, at::kFloat);
  data.std = at::full({1}, 0.25, at::kFloat);
  data.value_scale = 255.0;
  const at::Tensor batch = data.gather_inputs(at::tensor(std::vector<int64_t>{2, 1}, at::kLong));
  CHECK(batch.scalar_type() == at::kFloat);
  CHECK(batch[0][0].item<float>() == Approx(2.0));   // (1.0 - 0.5) / 0.25
  CHECK(batch[1][0].item<float>() == Approx(-1.2));  // (0.2 - 0.5) / 0.25
  CHECK(data.gather_inputs(at::tensor(std::vector<int64_t>{0}, at::kLong))[0][0].item<float>() == Approx(-2.0));
  CHECK(data.inputs.scalar_type() == at::kByte);  // storage stays compact
}
