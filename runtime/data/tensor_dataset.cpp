#include "runtime/data/tensor_dataset.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <utility>

#include "runtime/data/sample_random.h"

namespace dtrain {
namespace {

at::Tensor normalise(const TensorDataset& data, at::Tensor raw) {
  if (!data.mean.defined()) return raw;
  at::Tensor x = raw.to(at::kFloat);
  if (data.value_scale != 1.0) x.div_(data.value_scale);
  return x.sub_(data.mean).div_(data.std);
}

// Random crops (of padded images) and flips of a [B, C, H, W] batch. Each sample's crop offset and flip
// come from SampleRandom(seed, its index), drawn on the host (a few bytes per batch), applied on the
// device with two gathers.
at::Tensor augment(const TensorDataset& data, const at::Tensor& images, const int64_t* indices, uint64_t seed) {
  const int64_t b = images.size(0);
  const int64_t h = images.size(2);
  const int64_t w = images.size(3);
  const int64_t pad = data.crop_padding;
  at::Tensor draws = at::empty({3, b}, at::kLong);  // row offset, column offset, flip
  int64_t* d = draws.data_ptr<int64_t>();
  for (int64_t i = 0; i < b; ++i) {
    SampleRandom random(seed, indices[i]);
    d[i] = pad > 0 ? random.below(2 * pad + 1) : 0;
    d[b + i] = pad > 0 ? random.below(2 * pad + 1) : 0;
    d[2 * b + i] = data.random_flip && random.uniform() < 0.5 ? 1 : 0;
  }
  draws = draws.to(images.device());
  at::Tensor x = images;
  if (pad > 0) {
    x = at::constant_pad_nd(x, {pad, pad, pad, pad}, 0);
    const at::Tensor rows = draws[0].unsqueeze(1) + at::arange(h, draws.options());  // [B, H]
    x = x.gather(2, rows.view({b, 1, h, 1}).expand({b, x.size(1), h, x.size(3)}));
    at::Tensor cols = draws[1].unsqueeze(1) + at::arange(w, draws.options());  // [B, W]
    if (data.random_flip) {
      // A flipped sample reads its columns right to left: the crop and the flip in one gather.
      const at::Tensor flip = draws[2].unsqueeze(1).to(at::kBool);
      cols = at::where(flip, cols.flip({1}), cols);
    }
    return x.gather(3, cols.view({b, 1, 1, w}).expand({b, x.size(1), h, w}));
  }
  if (data.random_flip) x = at::where(draws[2].to(at::kBool).view({b, 1, 1, 1}), x.flip({3}), x);
  return x;
}

class TensorBatchStream final : public BatchStream {
 public:
  TensorBatchStream(const TensorDataset& data, std::vector<int64_t> indices, int64_t batch_size,
                    std::optional<uint64_t> augment_seed)
      : data_(data), indices_(std::move(indices)), batch_size_(batch_size), augment_seed_(augment_seed) {
    count_ = static_cast<int64_t>(indices_.size());
    index_ = at::from_blob(indices_.data(), {count_}, at::kLong).to(data.targets.device());
  }

  bool next(Batch& batch) override {
    if (begin_ >= count_) return false;
    const int64_t count = std::min(batch_size_, count_ - begin_);
    const at::Tensor index = index_.narrow(0, begin_, count);
    const auto first = indices_.begin() + begin_;
    batch = Batch{data_.gather_inputs(index, augment_seed_, indices_.data() + begin_), data_.targets.index_select(0, index),
                  count, std::vector<int64_t>(first, first + count), {}};
    begin_ += count;
    return true;
  }

 private:
  const TensorDataset& data_;
  std::vector<int64_t> indices_;  // on the host: the augmentation draws need them there
  int64_t batch_size_;
  std::optional<uint64_t> augment_seed_;
  at::Tensor index_;
  int64_t count_ = 0;
  int64_t begin_ = 0;
};

}  // namespace

void TensorDataset::to(c10::Device device) {
  for (at::Tensor* t : {&inputs, &targets, &rows, &mean, &std}) {
    if (t->defined()) *t = t->to(device);
  }
}

std::unique_ptr<BatchStream> TensorDataset::stream(std::vector<int64_t> indices, int64_t batch_size,
                                                   std::optional<uint64_t> augment_seed) const {
  return std::make_unique<TensorBatchStream>(*this, std::move(indices), batch_size, augment_seed);
}

at::Tensor TensorDataset::gather_inputs(const at::Tensor& index, std::optional<uint64_t> augment_seed,
                                        const int64_t* host_index) const {
  at::Tensor raw = inputs.index_select(0, rows.defined() ? rows.index_select(0, index) : index);
  if (augment_seed && (crop_padding > 0 || random_flip) && raw.dim() == 4) {
    at::Tensor on_host;
    if (host_index == nullptr) {
      on_host = index.to(at::kCPU).contiguous();
      host_index = on_host.data_ptr<int64_t>();
    }
    raw = augment(*this, raw, host_index, *augment_seed);
  }
  return normalise(*this, raw);
}

}  // namespace dtrain
