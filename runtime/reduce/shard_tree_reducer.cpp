#include "runtime/reduce/shard_tree_reducer.h"

#include <ATen/ATen.h>

#include <string>

#include "runtime/reduce/replica_state.h"
#include "runtime/util/check.h"
#include "runtime/util/error.h"
#include "runtime/util/timer.h"

namespace dtrain {
namespace {

bool power_of_two(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

int log2_of(int64_t n) {
  int bits = 0;
  while ((int64_t{1} << bits) < n) ++bits;
  return bits;
}

}  // namespace

void check_shard_split(int64_t shards, int ranks) {
  if (power_of_two(ranks) && shards % ranks == 0) return;
  std::string sizes;  // the world sizes that can share them: the powers of two up to `shards`
  for (int64_t n = 1; n <= shards; n *= 2) sizes += (sizes.empty() ? "" : n * 2 > shards ? " or " : ", ") + std::to_string(n);
  const std::string what = "train.deterministic: " + std::to_string(ranks) + " ranks cannot share the " +
                           std::to_string(shards) + " shards of train.shards: the shards' gradients are summed in a "
                           "binary tree, so the world size must be a power of two that divides them (" + sizes + " ranks)";
  if (!power_of_two(ranks)) {
    // No --shards helps here: a power of two is never divided by a world size that is not one.
    throw ConfigError(what + "; run on " + sizes + " ranks, or without --deterministic");
  }
  throw ConfigError(what + "; run on " + sizes + " ranks, or pass --shards " + std::to_string(ranks) +
                    " or more (a power of two; the bits then differ from runs with " + std::to_string(shards) + " shards)");
}

std::vector<int64_t> shard_order(int64_t shards_per_rank) {
  DTRAIN_CHECK(power_of_two(shards_per_rank), Error,
               "shard_order: " << shards_per_rank << " shards per rank is not a power of two");
  const int bits = log2_of(shards_per_rank);
  std::vector<int64_t> order;
  order.reserve(static_cast<size_t>(shards_per_rank));
  for (int64_t i = 0; i < shards_per_rank; ++i) {
    int64_t reversed = 0;
    for (int b = 0; b < bits; ++b) {
      if (i & (int64_t{1} << b)) reversed |= int64_t{1} << (bits - 1 - b);
    }
    order.push_back(reversed);
  }
  return order;
}

ShardTreeReducer::ShardTreeReducer(std::vector<at::Tensor> params, std::vector<at::Tensor> buffers, Communicator& comm,
                                   int64_t shards, int sharing_ranks)
    : params_(std::move(params)), comm_(comm), shards_(shards), sharing_ranks_(sharing_ranks) {
  DTRAIN_CHECK(sharing_ranks_ == 1 || sharing_ranks_ == comm_.world_size(), Error,
               "ShardTreeReducer: the shards are shared by " << sharing_ranks_ << " ranks of " << comm_.world_size()
                                                             << "; expected 1 or all of them");
  check_shard_split(shards_, sharing_ranks_);
  shards_per_rank_ = shards_ / sharing_ranks_;
  std::vector<at::Tensor> state = params_;
  state.insert(state.end(), buffers.begin(), buffers.end());
  if (comm_.world_size() > 1) broadcast_from_root(state, comm_);

  for (const at::Tensor& p : params_) {
    DTRAIN_CHECK(p.requires_grad() && p.scalar_type() == at::kFloat && p.device().is_cpu(), Error,
                 "ShardTreeReducer: every parameter must be a float32 CPU tensor that requires grad, got "
                     << p.scalar_type() << " on " << p.device());
    grad_numel_ += p.numel();
  }
  flat_numel_ = grad_numel_;
  for (const at::Tensor& b : buffers) {
    if (at::isFloatingType(b.scalar_type())) {
      DTRAIN_CHECK(b.scalar_type() == at::kFloat, Error,
                   "ShardTreeReducer: floating-point buffers must be float32, got " << b.scalar_type());
      float_buffers_.push_back(b);
      flat_numel_ += b.numel();
    } else {
      int_buffers_.push_back(b);
    }
  }
  grads_ = at::zeros({flat_numel_}, at::kFloat);
  received_ = at::empty_like(grads_);
  point_grads_at(grads_);
  for (const at::Tensor& b : float_buffers_) snapshot_.push_back(b.detach().clone());
  for (const at::Tensor& b : int_buffers_) int_snapshot_.push_back(b.detach().clone());
}

at::Tensor ShardTreeReducer::take_flat() {
  if (free_.empty()) return at::empty({flat_numel_}, at::kFloat);
  at::Tensor flat = std::move(free_.back());
  free_.pop_back();
  return flat;
}

void ShardTreeReducer::point_grads_at(const at::Tensor& flat) {
  int64_t offset = 0;
  for (at::Tensor& p : params_) {
    p.mutable_grad() = flat.narrow(0, offset, p.numel()).view(p.sizes());
    offset += p.numel();
  }
}

void ShardTreeReducer::sync_buffers() {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < float_buffers_.size(); ++i) snapshot_[i].copy_(float_buffers_[i]);
  for (size_t i = 0; i < int_buffers_.size(); ++i) int_snapshot_[i].copy_(int_buffers_[i]);
}

void ShardTreeReducer::prepare_backward(bool sync) {
  DTRAIN_CHECK(!prepared_, Error, "ShardTreeReducer: prepare_backward called twice without finish_backward");
  DTRAIN_CHECK(passes_ < shards_per_rank_, Error,
               "ShardTreeReducer: pass " << passes_ + 1 << " of a step with " << shards_per_rank_ << " shards per rank");
  DTRAIN_CHECK(sync == (passes_ + 1 == shards_per_rank_), Error,
               "ShardTreeReducer: the step's last pass must be its shard " << shards_per_rank_ << ", got sync "
                                                                            << sync << " at pass " << passes_ + 1);
  at::NoGradGuard no_grad;
  if (passes_ == 0 && grads_.defined()) free_.push_back(std::move(grads_));  // the last step's root: stepped on
  // Each shard's gradient starts from zero: it must not depend on the shards run before.
  pass_ = take_flat();
  pass_.narrow(0, 0, grad_numel_).zero_();
  point_grads_at(pass_);
  prepared_ = true;
  sync_ = sync;
}

void ShardTreeReducer::push(at::Tensor leaf) {
  int level = 0;
  while (!stack_.empty() && stack_.back().first == level) {
    at::Tensor left = std::move(stack_.back().second);
    stack_.pop_back();
    left.add_(leaf);
    free_.push_back(std::move(leaf));
    leaf = std::move(left);
    ++level;
  }
  stack_.emplace_back(level, std::move(leaf));
}

StepCommStats ShardTreeReducer::finish_backward() {
  DTRAIN_CHECK(prepared_, Error, "ShardTreeReducer: backward ran without prepare_backward()");
  prepared_ = false;
  at::NoGradGuard no_grad;
  int64_t offset = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    // AccumulateGrad adds into an existing .grad in place; a replaced .grad would bypass the pass's buffer.
    const at::Tensor& grad = params_[i].grad();
    DTRAIN_CHECK(grad.defined() && grad.data_ptr<float>() == pass_.data_ptr<float>() + offset, Error,
                 "ShardTreeReducer: parameter " << i << " (shape " << params_[i].sizes()
                                                << ") had its .grad replaced during backward; zero gradients with the "
                                                   "reducer's zero_grad(), not by assigning or resetting .grad");
    offset += params_[i].numel();
  }
  // What the shard's forward left in the buffers joins its gradients; the next shard's forward starts from
  // the step's statistics again. Only now: backward reads the buffers the forward saved (BatchNorm). The
  // last pass keeps what its forward left: the integer counters so advance once per step.
  offset = grad_numel_;
  for (size_t i = 0; i < float_buffers_.size(); ++i) {
    at::Tensor& b = float_buffers_[i];
    pass_.narrow(0, offset, b.numel()).copy_(b.reshape(-1));
    if (!sync_) b.copy_(snapshot_[i]);
    offset += b.numel();
  }
  if (!sync_) {
    for (size_t i = 0; i < int_buffers_.size(); ++i) int_buffers_[i].copy_(int_snapshot_[i]);
  }
  push(std::move(pass_));
  ++passes_;
  StepCommStats stats;
  if (!sync_) return stats;
  DTRAIN_CHECK(stack_.size() == 1, Error,
               "ShardTreeReducer: " << passes_ << " passes left " << stack_.size() << " partial sums, expected one");
  grads_ = std::move(stack_.back().second);
  stack_.clear();
  passes_ = 0;
  reduce_over_ranks(grads_, stats);
  point_grads_at(grads_);
  offset = grad_numel_;
  for (at::Tensor& b : float_buffers_) {
    // The mean over shards of their forwards' statistics: the same division on every rank.
    b.copy_(grads_.narrow(0, offset, b.numel()).view(b.sizes()).div(static_cast<double>(shards_)));
    offset += b.numel();
  }
  return stats;
}

void ShardTreeReducer::reduce_over_ranks(at::Tensor& sum, StepCommStats& stats) {
  const int rank = comm_.rank();
  if (sharing_ranks_ == 1) return;
  Stopwatch watch;
  const double cpu_before = process_cpu_s();
  for (int bit = log2_of(sharing_ranks_) - 1; bit >= 0; --bit) {
    comm_.exchange(sum, received_, rank ^ (1 << bit));
    sum.add_(received_);
    stats.bytes_reduced += static_cast<int64_t>(sum.nbytes());
    ++stats.buckets;
  }
  stats.comm_s = watch.elapsed_s();
  stats.exposed_comm_s = stats.comm_s;
  stats.wait_cpu_s = process_cpu_s() - cpu_before;
}

void ShardTreeReducer::zero_grad() { grads_.narrow(0, 0, grad_numel_).zero_(); }

at::Tensor ShardTreeReducer::all_finite() const { return dtrain::all_finite({grads_.narrow(0, 0, grad_numel_)}); }

std::vector<int64_t> ShardTreeReducer::bucket_bytes() const { return {grad_numel_ * 4}; }

}  // namespace dtrain
