#include "runtime/monitor/flop_counter.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <atomic>
#include <cstring>

#include "runtime/util/check.h"

namespace dtrain {
namespace {

// The one counter's sum and the number of counters (0 or 1): see FlopCounter.
std::atomic<double> g_flops{0.0};
std::atomic<int> g_counters{0};

double product(at::IntArrayRef sizes, size_t from) {
  double p = 1.0;
  for (size_t i = from; i < sizes.size(); ++i) p *= static_cast<double>(sizes[i]);
  return p;
}

// A product of [n, k] and [k, m] operands (the left one possibly sparse): 2 n k m, or 2 nnz m.
double matmul_flops(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || !b.defined() || a.dim() != 2 || b.dim() != 2) return 0.0;
  const double columns = static_cast<double>(b.size(1));
  if (a.is_sparse()) return 2.0 * static_cast<double>(a._nnz()) * columns;
  return 2.0 * static_cast<double>(a.size(0)) * static_cast<double>(a.size(1)) * columns;
}

double batched_matmul_flops(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || !b.defined() || a.dim() != 3 || b.dim() != 3) return 0.0;
  return 2.0 * static_cast<double>(a.size(0)) * static_cast<double>(a.size(1)) * static_cast<double>(a.size(2)) *
         static_cast<double>(b.size(2));
}

// Forward FLOPs of a convolution whose output has `out_spatial` positions per sample: every output
// position of every sample multiplies the whole weight (for a transposed convolution, every input
// position does).
double conv_flops(int64_t batch, double positions, const at::Tensor& weight) {
  return 2.0 * static_cast<double>(batch) * positions * static_cast<double>(weight.numel());
}

std::vector<int64_t> int_list(const c10::IValue& v) { return v.isIntList() ? v.toIntVector() : std::vector<int64_t>{}; }

// Output positions per sample of a (non-transposed) convolution of `input` with `weight`.
double conv_output_positions(const at::Tensor& input, const at::Tensor& weight, const std::vector<int64_t>& stride,
                             const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation) {
  double positions = 1.0;
  const int64_t dims = input.dim() - 2;
  for (int64_t d = 0; d < dims; ++d) {
    auto at_or = [&](const std::vector<int64_t>& v, int64_t fallback) {
      return v.empty() ? fallback : v[static_cast<size_t>(std::min<int64_t>(d, static_cast<int64_t>(v.size()) - 1))];
    };
    const int64_t in = input.size(2 + d);
    const int64_t k = weight.size(2 + d);
    const int64_t out = (in + 2 * at_or(padding, 0) - at_or(dilation, 1) * (k - 1) - 1) / at_or(stride, 1) + 1;
    positions *= static_cast<double>(std::max<int64_t>(out, 0));
  }
  return positions;
}

// Counted ops open on this thread: an op that a counted op calls (a sparse mm's addmm) is part of it.
thread_local int t_counted_depth = 0;

struct CountedOp final : at::ObserverContext {};

std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction& fn) {
  const double flops = op_flops(fn.name(), fn.inputs());
  if (flops <= 0) return nullptr;
  if (t_counted_depth++ == 0) {
    double seen = g_flops.load();
    while (!g_flops.compare_exchange_weak(seen, seen + flops)) {
    }
  }
  return std::make_unique<CountedOp>();
}

void on_op_end(const at::RecordFunction&, at::ObserverContext* context) {
  if (context != nullptr) --t_counted_depth;
}

}  // namespace

double op_flops(const std::string& name, c10::ArrayRef<const c10::IValue> in) {
  auto tensor = [&](size_t i) { return i < in.size() && in[i].isTensor() ? in[i].toTensor() : at::Tensor(); };
  if (name == "aten::mm") return matmul_flops(tensor(0), tensor(1));
  if (name == "aten::addmm") return matmul_flops(tensor(1), tensor(2));
  if (name == "aten::bmm") return batched_matmul_flops(tensor(0), tensor(1));
  if (name == "aten::baddbmm") return batched_matmul_flops(tensor(1), tensor(2));
  if (name == "aten::convolution" && in.size() >= 9) {
    // (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    const at::Tensor input = tensor(0);
    const at::Tensor weight = tensor(1);
    if (!input.defined() || !weight.defined() || input.dim() < 3) return 0.0;
    if (in[6].isBool() && in[6].toBool()) return conv_flops(input.size(0), product(input.sizes(), 2), weight);
    return conv_flops(input.size(0),
                      conv_output_positions(input, weight, int_list(in[3]), int_list(in[4]), int_list(in[5])), weight);
  }
  if (name == "aten::convolution_backward" && in.size() >= 11) {
    // (grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding,
    // groups, output_mask): the input gradient and the weight gradient each cost a forward pass.
    const at::Tensor grad_output = tensor(0);
    const at::Tensor input = tensor(1);
    const at::Tensor weight = tensor(2);
    if (!grad_output.defined() || !input.defined() || !weight.defined() || !in[10].isBoolList()) return 0.0;
    const bool transposed = in[7].isBool() && in[7].toBool();
    const double forward =
        conv_flops(input.size(0), product(transposed ? input.sizes() : grad_output.sizes(), 2), weight);
    const c10::List<bool> mask = in[10].toBoolList();
    return forward * ((mask.get(0) ? 1 : 0) + (mask.get(1) ? 1 : 0));
  }
  return 0.0;
}

FlopCounter::FlopCounter() {
  if (g_counters.fetch_add(1) != 0) {
    g_counters.fetch_sub(1);
    throw Error("FlopCounter: another one is counting");
  }
  g_flops = 0.0;
  handle_ = at::addThreadLocalCallback(
      at::RecordFunctionCallback(on_op_start, on_op_end).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
}

FlopCounter::~FlopCounter() {
  at::removeCallback(handle_);
  g_counters.fetch_sub(1);
}

double FlopCounter::flops() const { return g_flops.load(); }

}  // namespace dtrain
