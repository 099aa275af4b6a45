#include "runtime/reduce/bucket_assignment.h"

namespace dtrain {

std::vector<BucketSpec> assign_buckets(const std::vector<ParamInfo>& params, const BucketOptions& options) {
  std::vector<BucketSpec> buckets;
  BucketSpec open;
  std::string open_group;
  auto close = [&]() {
    if (!open.param_indices.empty()) buckets.push_back(std::move(open));
    open = BucketSpec{};
  };
  for (size_t i = params.size(); i-- > 0;) {
    if (!open.param_indices.empty() && params[i].group != open_group) close();
    open_group = params[i].group;
    open.param_indices.push_back(i);
    open.bytes += params[i].bytes;
    const size_t cap = buckets.empty() ? options.first_bucket_bytes : options.bucket_bytes;
    if (static_cast<size_t>(open.bytes) >= cap) close();
  }
  close();
  return buckets;
}

}  // namespace dtrain
