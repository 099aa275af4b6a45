// How gradients are grouped into allreduce buckets. Pure arithmetic on sizes, so every rank derives the
// same layout from the same parameter list, and tests need neither tensors nor MPI.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/config/config.h"

namespace dtrain {

struct BucketOptions {
  size_t bucket_bytes = static_cast<size_t>(kDefaultBucketMb * (1 << 20));
  size_t first_bucket_bytes = static_cast<size_t>(kDefaultFirstBucketMb * (1 << 20));
};

struct ParamInfo {
  int64_t bytes = 0;
  std::string group;  // dtype and device; a bucket never mixes groups
};

struct BucketSpec {
  std::vector<size_t> param_indices;  // in the order they are laid out in the bucket buffer
  int64_t bytes = 0;
};

// Buckets parameters in reverse model order (backward produces the last layers' gradients first).
// A bucket closes once it holds at least its cap (first_bucket_bytes for the first bucket, bucket_bytes
// after) or when the next parameter belongs to another group. A parameter larger than the cap gets a
// bucket of its own. Every parameter appears in exactly one bucket.
std::vector<BucketSpec> assign_buckets(const std::vector<ParamInfo>& params, const BucketOptions& options);

}  // namespace dtrain
