#include "runtime/reduce/bucketed_reducer.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>


#include "runtime/reduce/replica_state.h"
#include "runtime/util/check.h"

namespace dtrain {
namespace {

// Runs after AccumulateGrad wrote a parameter's .grad: the moment its bucket slot holds the final value.
class GradReadyHook final : public torch::autograd::FunctionPostHook {
 public:
  GradReadyHook(BucketedReducer* reducer, size_t index) : reducer_(reducer), index_(index) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    reducer_->mark_grad_ready(index_);
    return outputs;
  }

 private:
  BucketedReducer* reducer_;
  size_t index_;
};

}  // namespace

BucketedReducer::BucketedReducer(std::vector<at::Tensor> params, const std::vector<at::Tensor>& buffers,
                                 Communicator& comm, const ReducerOptions& options)
    : params_(std::move(params)),
      comm_(comm),
      divide_in_hooks_(!comm.averages_in_reduction()),
      bucket_op_(divide_in_hooks_ ? ReduceOp::kSum : ReduceOp::kAverage) {
  std::vector<at::Tensor> state = params_;
  state.insert(state.end(), buffers.begin(), buffers.end());
  if (comm_.world_size() > 1) broadcast_from_root(state, comm_);
  for (const at::Tensor& b : buffers) {
    if (at::isFloatingType(b.scalar_type())) float_buffers_.push_back(b);
  }

  std::vector<ParamInfo> infos;
  for (const at::Tensor& p : params_) {
    DTRAIN_CHECK(p.requires_grad(), Error, "BucketedReducer: every parameter must require grad");
    DTRAIN_CHECK(p.is_contiguous() || p.is_contiguous(at::MemoryFormat::ChannelsLast), Error,
                 "BucketedReducer: parameter of shape " << p.sizes() << " is neither contiguous nor channels-last");
    infos.push_back(ParamInfo{static_cast<int64_t>(p.nbytes()), tensor_group(p)});
  }
  specs_ = assign_buckets(infos, options.buckets);

  bucket_of_param_.resize(params_.size());
  grad_ptrs_.resize(params_.size());
  at::NoGradGuard no_grad;
  for (size_t b = 0; b < specs_.size(); ++b) {
    int64_t numel = 0;
    for (size_t i : specs_[b].param_indices) numel += params_[i].numel();
    const at::Tensor& first = params_[specs_[b].param_indices.front()];
    at::Tensor buffer = at::zeros({numel}, first.options().requires_grad(false));
    int64_t offset = 0;
    for (size_t i : specs_[b].param_indices) {
      at::Tensor& p = params_[i];
      at::Tensor view = buffer.narrow(0, offset, p.numel()).view(p.sizes());
      if (p.grad().defined()) view.copy_(p.grad());
      p.mutable_grad() = view;
      grad_ptrs_[i] = view.data_ptr();
      bucket_of_param_[i] = b;
      offset += p.numel();
    }
    const bool compress = options.compress_bf16 && buffer.scalar_type() == at::kFloat;
    wire_.push_back(compress ? at::empty_like(buffer, buffer.options().dtype(at::kBFloat16)) : at::Tensor());
    buffers_.push_back(std::move(buffer));
  }

  for (size_t i = 0; i < params_.size(); ++i) {
    std::shared_ptr<torch::autograd::Node> accumulator = torch::autograd::impl::grad_accumulator(params_[i]);
    DTRAIN_CHECK(accumulator != nullptr, Error, "BucketedReducer: parameter " << i << " is not a leaf tensor");
    hook_keys_.push_back(accumulator->add_post_hook(std::make_unique<GradReadyHook>(this, i)));
    accumulators_.push_back(std::move(accumulator));
  }
  pending_.resize(specs_.size());
  param_seen_.resize(params_.size());
}

void BucketedReducer::sync_buffers() {
  if (comm_.world_size() > 1 && !float_buffers_.empty()) broadcast_from_root(float_buffers_, comm_);
}

BucketedReducer::~BucketedReducer() {
  for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(hook_keys_[i]);
  // Unfinished works complete in their destructors before the buffers they write to are freed.
  works_.clear();
}

void BucketedReducer::prepare_backward(bool sync) {
  DTRAIN_CHECK(!prepared_, Error, "BucketedReducer: prepare_backward called twice without finish_backward");
  for (size_t i = 0; i < params_.size(); ++i) {
    // AccumulateGrad adds into an existing .grad in place; a replaced .grad would bypass the buckets.
    DTRAIN_CHECK(params_[i].grad().defined() && params_[i].grad().data_ptr() == grad_ptrs_[i], Error,
                 "BucketedReducer: parameter " << i << " (shape " << params_[i].sizes()
                                               << ") had its .grad replaced; zero gradients with the reducer's "
                                                  "zero_grad(), not by assigning or resetting .grad");
  }
  prepared_ = true;
  sync_ = sync && comm_.world_size() > 1;
  for (size_t b = 0; b < specs_.size(); ++b) pending_[b] = specs_[b].param_indices.size();
  std::fill(param_seen_.begin(), param_seen_.end(), false);
  next_launch_ = 0;
  first_unfinished_ = 0;
  works_.clear();
}

void BucketedReducer::mark_grad_ready(size_t index) {
  DTRAIN_CHECK(prepared_, Error, "BucketedReducer: backward ran without prepare_backward()");
  if (!sync_) return;
  DTRAIN_CHECK(!param_seen_[index], Error,
               "BucketedReducer: parameter " << index << " received two gradients in one backward; "
                                             << "call backward once per prepare_backward()");
  param_seen_[index] = true;
  divide(index);
  const size_t bucket = bucket_of_param_[index];
  DTRAIN_CHECK(bucket >= next_launch_, Error,
               "BucketedReducer: gradient of parameter " << index << " arrived after its bucket " << bucket
                                                          << " was sent");
  --pending_[bucket];
  launch_ready_buckets();
  poll_in_flight();
}

void BucketedReducer::divide(size_t index) {
  // The average, folded into the hook: the gradient was just written and is still in cache, and the
  // backend then sums (MPI and Gloo have no average op), so no pass over the bucket follows completion,
  // where the last bucket's would be exposed. Summing g/W instead of dividing the sum rounds differently
  // only where W is not a power of two, by an ulp.
  if (!divide_in_hooks_) return;
  at::NoGradGuard no_grad;
  params_[index].mutable_grad().div_(comm_.world_size());
}

void BucketedReducer::launch_ready_buckets() {
  // Launch strictly in bucket order so that every rank issues the same sequence of collectives, whatever
  // order its own gradients arrived in.
  while (next_launch_ < specs_.size() && pending_[next_launch_] == 0) launch(next_launch_++);
}

void BucketedReducer::launch(size_t bucket) {
  if (bucket == 0) since_first_launch_.reset();
  if (wire_[bucket].defined()) {
    wire_[bucket].copy_(buffers_[bucket]);
    works_.push_back(comm_.allreduce_async(wire_[bucket], bucket_op_));
  } else {
    works_.push_back(comm_.allreduce_async(buffers_[bucket], bucket_op_));
  }
}

void BucketedReducer::poll_in_flight() {
  // Notes the buckets that are done (cheap: the backends progress on threads of their own, MPI's in
  // mpi_progress.h), so finish_backward() waits only for the rest.
  while (first_unfinished_ < works_.size() && works_[first_unfinished_]->is_completed()) ++first_unfinished_;
}

StepCommStats BucketedReducer::finish_backward() {
  DTRAIN_CHECK(prepared_, Error, "BucketedReducer: finish_backward called without prepare_backward");
  prepared_ = false;
  StepCommStats stats;
  if (!sync_) return stats;
  Stopwatch exposed;
  const double cpu_before = process_cpu_s();
  // Buckets of parameters that got no gradient this step (unused branches) still go out, in order, so the
  // collective sequence matches on every rank; their gradients (zero, or accumulated over earlier
  // micro-batches) are averaged like the others.
  for (size_t b = next_launch_; b < specs_.size(); ++b) {
    for (size_t i : specs_[b].param_indices) {
      if (!param_seen_[i]) divide(i);
    }
  }
  while (next_launch_ < specs_.size()) launch(next_launch_++);
  for (auto& work : works_) work->wait();
  for (size_t b = 0; b < specs_.size(); ++b) {
    if (wire_[b].defined()) buffers_[b].copy_(wire_[b]);
  }
  stats.exposed_comm_s = exposed.elapsed_s();
  stats.wait_cpu_s = process_cpu_s() - cpu_before;
  stats.comm_s = since_first_launch_.elapsed_s();
  stats.buckets = static_cast<int64_t>(specs_.size());
  for (size_t b = 0; b < specs_.size(); ++b) stats.bytes_reduced += wire_[b].defined() ? wire_[b].nbytes() : specs_[b].bytes;
  works_.clear();
  return stats;
}

std::vector<int64_t> BucketedReducer::bucket_bytes() const {
  std::vector<int64_t> bytes;
  for (const BucketSpec& spec : specs_) bytes.push_back(spec.bytes);
  return bytes;
}

void BucketedReducer::zero_grad() {
  for (at::Tensor& buffer : buffers_) buffer.zero_();
}

at::Tensor BucketedReducer::all_finite() const { return dtrain::all_finite(buffers_); }

}  // namespace dtrain
