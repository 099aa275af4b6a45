#include "test/support/catch.h"

#include <cmath>
#include <set>

#include "runtime/reduce/bucket_assignment.h"
#include "runtime/reduce/bucket_probe.h"

using namespace dtrain;

namespace {
std::vector<ParamInfo> float_params(std::vector<int64_t> bytes) {
  std::vector<ParamInfo> params;
  for (int64_t b : bytes) params.push_back({b, "float"});
  return params;
}
}  // namespace

TEST_CASE("buckets follow reverse parameter order with a small first bucket", "[reduce]") {
  const BucketOptions options{100, 30};
  const auto buckets = assign_buckets(float_params({40, 40, 40, 10, 10, 20}), options);
  // Reverse order: 5 (20), 4 (10) -> 30 closes the first bucket; then 3, 2, 1 (10+40+40=90), 0 (40) -> 130.
  REQUIRE(buckets.size() == 2);
  CHECK(buckets[0].param_indices == std::vector<size_t>{5, 4});
  CHECK(buckets[0].bytes == 30);
  CHECK(buckets[1].param_indices == std::vector<size_t>{3, 2, 1, 0});
  CHECK(buckets[1].bytes == 130);
}

TEST_CASE("a parameter larger than the cap gets a bucket of its own", "[reduce]") {
  const auto buckets = assign_buckets(float_params({10, 500, 10}), BucketOptions{100, 100});
  REQUIRE(buckets.size() == 2);
  CHECK(buckets[0].param_indices == std::vector<size_t>{2, 1});
  CHECK(buckets[1].param_indices == std::vector<size_t>{0});
}

TEST_CASE("buckets never mix dtypes", "[reduce]") {
  std::vector<ParamInfo> params{{8, "float"}, {8, "double"}, {8, "float"}};
  const auto buckets = assign_buckets(params, BucketOptions{1000, 1000});
  REQUIRE(buckets.size() == 3);
  for (const auto& bucket : buckets) CHECK(bucket.param_indices.size() == 1);
}

TEST_CASE("every parameter lands in exactly one bucket", "[reduce]") {
  std::vector<int64_t> sizes;
  for (int i = 0; i < 57; ++i) sizes.push_back(4 * ((i * 7919) % 1000 + 1));
  const auto buckets = assign_buckets(float_params(sizes), BucketOptions{4096, 512});
  std::multiset<size_t> seen;
  int64_t total = 0;
  for (const auto& bucket : buckets) {
    seen.insert(bucket.param_indices.begin(), bucket.param_indices.end());
    total += bucket.bytes;
  }
  CHECK(seen.size() == sizes.size());
  CHECK(std::set<size_t>(seen.begin(), seen.end()).size() == sizes.size());
  int64_t expected = 0;
  for (int64_t s : sizes) expected += s;
  CHECK(total == expected);
  CHECK(assign_buckets({}, BucketOptions{}).empty());
}

TEST_CASE("buckets from the network: the square root of gradients x bandwidth x each bucket's cost", "[reduce]") {
  const BucketOptions fixed{25u << 20, 1u << 20};
  AllreduceFit fit;
  fit.latency_s = 1e-3;
  fit.bytes_per_s = 1e8;
  fit.small_cpu_s = 5e-4;
  // On a device the CPU does not count: 1 ms per bucket, sqrt(40e6 x 1e8 x 1e-3) = 2e6 bytes.
  CHECK(per_bucket_s(fit, 0.0) == Approx(1e-3));
  BucketOptions chosen = buckets_for_network(fit, 0.0, 40000000, fixed);
  CHECK(chosen.bucket_bytes == 2000000);
  CHECK(chosen.first_bucket_bytes == fixed.first_bucket_bytes);
  // On a quarter core the 0.5 ms of CPU costs 2 ms of the step: 3 ms per bucket, sqrt(40e6 x 1e8 x 3e-3).
  CHECK(per_bucket_s(fit, 0.25) == Approx(3e-3));
  chosen = buckets_for_network(fit, 0.25, 40000000, fixed);
  CHECK(chosen.bucket_bytes == static_cast<size_t>(std::sqrt(40e6 * 1e8 * 3e-3)));
  // Fewer gradients, smaller buckets; the first bucket never larger than the rest.
  chosen = buckets_for_network(fit, 0.0, 400000, fixed);
  CHECK(chosen.bucket_bytes == 256u << 10);  // sqrt(4e5 x 1e8 x 1e-3) = 200 kB, below the floor
  CHECK(chosen.first_bucket_bytes == 256u << 10);
  // A slow, costly network wants large buckets: capped at comm.bucket_mb.
  fit.latency_s = 0.5;
  chosen = buckets_for_network(fit, 1.0, 400000000, fixed);
  CHECK(chosen.bucket_bytes == fixed.bucket_bytes);
  // The floor never exceeds what the user allowed.
  chosen = buckets_for_network(fit, 1.0, 400000, BucketOptions{64u << 10, 16u << 10});
  CHECK(chosen.bucket_bytes == 64u << 10);
  CHECK(chosen.first_bucket_bytes == 16u << 10);
}
