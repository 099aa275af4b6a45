#include "runtime/data/image_transform.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace dtrain {
namespace {

// One output axis's taps: output i reads source pixels [first[i], first[i] + count[i]) with weights.
struct Taps {
  std::vector<int64_t> first;
  std::vector<int64_t> count;
  std::vector<float> weights;  // max_taps per output
  int64_t max_taps = 0;
};

// Triangle (bilinear) filter from source segment [start, start + length) to `out` samples. Shrinking
// widens the filter by the scale factor, so every source pixel contributes (antialiasing), as PIL does.
Taps make_taps(int64_t start, int64_t length, int64_t out, int64_t limit) {
  const double scale = static_cast<double>(length) / static_cast<double>(out);
  const double support = std::max(scale, 1.0);
  Taps taps;
  taps.max_taps = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  taps.first.resize(out);
  taps.count.resize(out);
  taps.weights.assign(static_cast<size_t>(out * taps.max_taps), 0.0f);
  for (int64_t i = 0; i < out; ++i) {
    const double center = static_cast<double>(start) + (static_cast<double>(i) + 0.5) * scale;
    const int64_t lo = std::max<int64_t>(0, static_cast<int64_t>(std::floor(center - support)));
    const int64_t hi = std::min<int64_t>(limit, static_cast<int64_t>(std::ceil(center + support)));
    double total = 0.0;
    std::vector<double> w;
    for (int64_t x = lo; x < hi; ++x) {
      const double d = std::abs((static_cast<double>(x) + 0.5 - center) / support);
      w.push_back(d < 1.0 ? 1.0 - d : 0.0);
      total += w.back();
    }
    // Trim zero taps at both ends so that count <= max_taps.
    int64_t begin = 0;
    int64_t end = static_cast<int64_t>(w.size());
    while (begin < end && w[begin] == 0.0) ++begin;
    while (end > begin && w[end - 1] == 0.0) --end;
    if (end == begin) {  // a box narrower than a pixel: the nearest pixel
      begin = 0;
      end = 1;
      w.assign(1, 1.0);
      total = 1.0;
    }
    taps.first[i] = lo + begin;
    taps.count[i] = std::min(end - begin, taps.max_taps);
    for (int64_t k = 0; k < taps.count[i]; ++k) {
      taps.weights[static_cast<size_t>(i * taps.max_taps + k)] = static_cast<float>(w[begin + k] / total);
    }
  }
  return taps;
}

}  // namespace

CropBox random_resized_crop(int64_t height, int64_t width, SampleRandom& random, double min_scale) {
  const double area = static_cast<double>(height * width);
  const double log_lo = std::log(3.0 / 4.0);
  const double log_hi = std::log(4.0 / 3.0);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * (min_scale + (1.0 - min_scale) * random.uniform());
    const double ratio = std::exp(log_lo + (log_hi - log_lo) * random.uniform());
    const auto w = static_cast<int64_t>(std::lround(std::sqrt(target * ratio)));
    const auto h = static_cast<int64_t>(std::lround(std::sqrt(target / ratio)));
    if (w > 0 && h > 0 && w <= width && h <= height) {
      const int64_t top = random.below(height - h + 1);
      const int64_t left = random.below(width - w + 1);
      return CropBox{top, left, h, w};
    }
  }
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  int64_t w = width;
  int64_t h = height;
  if (in_ratio < 3.0 / 4.0) {
    h = static_cast<int64_t>(std::lround(static_cast<double>(w) / (3.0 / 4.0)));
  } else if (in_ratio > 4.0 / 3.0) {
    w = static_cast<int64_t>(std::lround(static_cast<double>(h) * (4.0 / 3.0)));
  }
  h = std::min(h, height);
  w = std::min(w, width);
  return CropBox{(height - h) / 2, (width - w) / 2, h, w};
}

CropBox center_crop(int64_t height, int64_t width, int64_t size, double crop_fraction) {
  // Resizing the shorter side to `resized` scales the image by resized / shorter; the size x size centre
  // of the result covers size x shorter / resized source pixels.
  const auto resized = static_cast<double>(std::lround(static_cast<double>(size) / crop_fraction));
  const double shorter = static_cast<double>(std::min(height, width));
  const int64_t side = std::max<int64_t>(1, std::lround(static_cast<double>(size) * shorter / resized));
  const int64_t h = std::min(side, height);
  const int64_t w = std::min(side, width);
  return CropBox{(height - h) / 2, (width - w) / 2, h, w};
}

void crop_resize_normalise(const RgbImage& image, const CropBox& box, int64_t size, bool flip,
                           const Normalisation& norm, float* out) {
  const Taps xs = make_taps(box.left, box.width, size, image.width);
  const Taps ys = make_taps(box.top, box.height, size, image.height);
  // Horizontal pass over the rows the vertical taps read: rows [row0, row1) x size x 3.
  const int64_t row0 = ys.first.front();
  int64_t row1 = row0;
  for (int64_t i = 0; i < size; ++i) row1 = std::max(row1, ys.first[i] + ys.count[i]);
  std::vector<float> rows(static_cast<size_t>((row1 - row0) * size * 3));
  for (int64_t y = row0; y < row1; ++y) {
    const uint8_t* src = image.pixels.data() + y * image.width * 3;
    float* dst = rows.data() + (y - row0) * size * 3;
    for (int64_t i = 0; i < size; ++i) {
      const float* w = xs.weights.data() + i * xs.max_taps;
      const uint8_t* p = src + xs.first[i] * 3;
      float r = 0, g = 0, b = 0;
      for (int64_t k = 0; k < xs.count[i]; ++k) {
        r += w[k] * p[3 * k];
        g += w[k] * p[3 * k + 1];
        b += w[k] * p[3 * k + 2];
      }
      const int64_t x = flip ? size - 1 - i : i;
      dst[3 * x] = r;
      dst[3 * x + 1] = g;
      dst[3 * x + 2] = b;
    }
  }
  // Vertical pass, then (v / 255 - mean) / std into CHW.
  const int64_t plane = size * size;
  float scale[3];
  float shift[3];
  for (int c = 0; c < 3; ++c) {
    scale[c] = 1.0f / (255.0f * norm.std[c]);
    shift[c] = -norm.mean[c] / norm.std[c];
  }
  std::vector<float> line(static_cast<size_t>(size * 3));
  for (int64_t j = 0; j < size; ++j) {
    std::fill(line.begin(), line.end(), 0.0f);
    const float* w = ys.weights.data() + j * ys.max_taps;
    for (int64_t k = 0; k < ys.count[j]; ++k) {
      const float* src = rows.data() + (ys.first[j] + k - row0) * size * 3;
      for (int64_t t = 0; t < size * 3; ++t) line[t] += w[k] * src[t];
    }
    for (int64_t i = 0; i < size; ++i) {
      for (int c = 0; c < 3; ++c) out[c * plane + j * size + i] = line[3 * i + c] * scale[c] + shift[c];
    }
  }
}

}  // namespace dtrain
