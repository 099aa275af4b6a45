#include "runtime/data/image_files.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sys/stat.h>
#include <sstream>
#include <thread>
#include <utility>

#include "runtime/data/distributed_sampler.h"
#include "runtime/data/image_decode.h"
#include "runtime/data/sample_random.h"
#include "runtime/util/error.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;

bool is_image_name(const fs::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

std::vector<std::string> subdirectories(const fs::path& dir) {
  std::vector<std::string> names;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    if (entry.is_directory()) names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The real path of a directory (links resolved), or the path itself where it cannot be resolved.
fs::path real_path(const fs::path& path) {
  std::error_code ec;
  const fs::path real = fs::canonical(path, ec);
  return ec ? path : real;
}

// Whether `inner` is `outer` or lies under it (both real paths).
bool lies_in(const fs::path& inner, const fs::path& outer) {
  const auto [o, i] = std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end());
  return o == outer.end();
}

// Where a class folder's images may not come from: the folder that holds the class folders (and what
// holds it), and the other classes' folders. A link there would label their images with this class.
struct ClassBounds {
  fs::path split;                     // real path of the folder that holds the class folders
  std::vector<fs::path> other_classes;  // real paths
};

// The image files under `dir`, recursively, sorted by path. Directory symlinks are followed (datasets
// are often assembled from links), each real directory once: a link back to an ancestor (a loop) or to a
// directory already read adds nothing, where a plain walk would recurse until the path is too long. With
// `bounds`, a directory that leads to the split folder or into another class's folder is refused.
std::vector<std::string> images_under(const fs::path& dir, const ClassBounds* bounds = nullptr) {
  std::vector<std::string> paths;
  std::set<std::pair<dev_t, ino_t>> seen;
  const auto first_visit = [&seen](const fs::path& path) {
    struct stat info {};
    return ::stat(path.c_str(), &info) != 0 || seen.insert({info.st_dev, info.st_ino}).second;
  };
  const auto check_bounds = [&](const fs::path& path) {
    if (bounds == nullptr) return;
    const fs::path real = real_path(path);
    const bool above = lies_in(bounds->split, real);
    const auto other = std::find_if(bounds->other_classes.begin(), bounds->other_classes.end(),
                                    [&real](const fs::path& c) { return lies_in(real, c); });
    if (!above && other == bounds->other_classes.end()) return;
    throw DataError("'" + path.string() + "' in class folder '" + dir.string() + "' leads to '" + real.string() +
                    "', " + (above ? "the folder of all the classes (or above it)" : "inside class folder '" + other->string() + "'") +
                    ": its images would be labelled with this class too. Remove the link, or point it at images of "
                    "this class only");
  };
  try {
    first_visit(dir);
    fs::recursive_directory_iterator it(dir, fs::directory_options::follow_directory_symlink);
    for (; it != fs::recursive_directory_iterator(); ++it) {
      const fs::directory_entry& entry = *it;
      if (entry.is_directory()) {
        if (entry.is_symlink()) check_bounds(entry.path());
        if (!first_visit(entry.path())) it.disable_recursion_pending();
      } else if (entry.is_regular_file() && is_image_name(entry.path())) {
        paths.push_back(entry.path().string());
      }
    }
  } catch (const fs::filesystem_error& e) {
    throw DataError("cannot list the images under '" + dir.string() + "': " + e.code().message() + " at '" +
                    e.path1().string() + "'");
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

void require_directory(const fs::path& dir, const std::string& what) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw DataError(what + " '" + dir.string() + "' is not a directory");
}

std::vector<ImageSample> labelled(const fs::path& root, const std::vector<std::string>& classes, const std::string& split) {
  std::vector<ImageSample> samples;
  std::vector<fs::path> real_classes;
  for (const std::string& name : classes) real_classes.push_back(real_path(root / name));
  for (size_t label = 0; label < classes.size(); ++label) {
    const fs::path dir = root / classes[label];
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    ClassBounds bounds;
    bounds.split = real_path(root);
    for (size_t other = 0; other < classes.size(); ++other) {
      if (other == label) continue;
      if (real_classes[other] == real_classes[label]) {
        throw DataError("class folders '" + dir.string() + "' and '" + (root / classes[other]).string() +
                        "' are the same folder ('" + real_classes[label].string() + "'): its images would have two labels");
      }
      bounds.other_classes.push_back(real_classes[other]);
    }
    const std::vector<std::string> paths = images_under(dir, &bounds);
    if (paths.empty()) {
      throw DataError("class folder '" + dir.string() + "' of the " + split +
                      " split holds no .jpg, .jpeg or .png files; remove it or add its images");
    }
    for (const std::string& path : paths) samples.push_back({path, static_cast<int64_t>(label)});
  }
  return samples;
}

uint64_t hash_name(const std::string& name) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ULL;
  return h;
}

// --- the stream -----------------------------------------------------------------------------------

// Decodes batches in `workers` threads, at most `depth` batches ahead of the consumer, and hands them out
// in order. A worker's error (an unreadable image) is handed out in place of its batch.
class ImageBatchStream final : public BatchStream {
 public:
  ImageBatchStream(const ImageFileDataset& data, c10::Device device, std::vector<int64_t> indices, int64_t batch_size,
                   std::optional<uint64_t> augment_seed)
      : data_(data), device_(device), indices_(std::move(indices)), batch_size_(batch_size), augment_seed_(augment_seed) {
    const int64_t count = static_cast<int64_t>(indices_.size());
    batches_ = (count + batch_size_ - 1) / batch_size_;
    const ImageFileOptions& o = data_.options();
    depth_ = o.prefetch_batches > 0 ? o.prefetch_batches : 2 * o.workers;
    const int64_t workers = std::min<int64_t>(o.workers, std::max<int64_t>(batches_, 1));
    for (int64_t i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
  }

  ~ImageBatchStream() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  bool next(Batch& batch) override {
    if (consumed_ >= batches_) return false;
    Slot slot;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return ready_.count(consumed_) > 0; });
      slot = std::move(ready_.at(consumed_));
      ready_.erase(consumed_);
      ++consumed_;
    }
    changed_.notify_all();
    if (!slot.error.empty()) throw DataError(slot.error);
    const bool to_device = device_.type() != c10::DeviceType::CPU;
    batch.inputs = to_device ? slot.inputs.to(device_, /*non_blocking=*/true) : slot.inputs;
    batch.targets = to_device ? slot.targets.to(device_, /*non_blocking=*/true) : slot.targets;
    batch.size = slot.inputs.size(0);
    batch.indices = std::move(slot.indices);
    batch.bad_samples = std::move(slot.bad_samples);
    return true;
  }

 private:
  struct Slot {
    at::Tensor inputs;
    at::Tensor targets;
    std::vector<int64_t> indices;  // the dataset index of each row
    std::vector<std::string> bad_samples;
    std::string error;
  };

  void work() {
    for (;;) {
      int64_t b = 0;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return stopping_ || next_batch_ >= batches_ || next_batch_ < consumed_ + depth_; });
        if (stopping_ || next_batch_ >= batches_) return;
        b = next_batch_++;
      }
      Slot slot = load(b);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ready_.emplace(b, std::move(slot));
      }
      changed_.notify_all();
    }
  }

  Slot load(int64_t b) const {
    const ImageFileOptions& o = data_.options();
    const int64_t begin = b * batch_size_;
    const int64_t count = std::min(batch_size_, static_cast<int64_t>(indices_.size()) - begin);
    const int64_t s = o.image_size;
    const int64_t pixels = 3 * s * s;
    Slot slot;
    at::TensorOptions options = at::TensorOptions().dtype(at::kFloat);
    if (device_.is_cuda()) options = options.pinned_memory(true);
    slot.inputs = at::empty({count, 3, s, s}, options);
    slot.targets = at::empty({count}, at::TensorOptions().dtype(at::kLong).pinned_memory(device_.is_cuda()));
    slot.indices.assign(indices_.begin() + begin, indices_.begin() + begin + count);
    float* out = slot.inputs.data_ptr<float>();
    int64_t* targets = slot.targets.data_ptr<int64_t>();
    std::vector<bool> bad(static_cast<size_t>(count), false);
    try {
      for (int64_t i = 0; i < count; ++i) {
        const int64_t index = slot.indices[static_cast<size_t>(i)];
        const ImageSample& sample = data_.samples().at(static_cast<size_t>(index));
        RgbImage image;
        try {
          image = decode_image_file(sample.path);
        } catch (const DataError& e) {
          // A file whose header passed the start-up check but whose data does not decode (cut short,
          // corrupt): with skip_bad it is reported with the batch, not the end of the run.
          if (!o.skip_bad) throw;
          bad[static_cast<size_t>(i)] = true;
          slot.bad_samples.push_back(e.what());
          continue;
        }
        CropBox box;
        bool flip = false;
        if (augment_seed_) {
          SampleRandom random(*augment_seed_, index);
          box = random_resized_crop(image.height, image.width, random, o.min_crop_scale);
          flip = random.uniform() < 0.5;
        } else {
          box = center_crop(image.height, image.width, s);
        }
        crop_resize_normalise(image, box, s, flip, o.normalisation, out + i * pixels);
        targets[i] = sample.label;
      }
      if (!slot.bad_samples.empty()) stand_in_for_bad(slot, bad);
    } catch (const std::exception& e) {
      slot.error = e.what();
    }
    return slot;
  }

  // The rows of `slot` marked bad: in training each is replaced by the next good row of its batch
  // (cyclically), so every rank's batch keeps its size and the global batch is held; in evaluation they
  // are left out, so the metrics are those of the images that were read. A batch with no good row is an
  // error: there is nothing to stand in.
  void stand_in_for_bad(Slot& slot, const std::vector<bool>& bad) const {
    const int64_t count = slot.inputs.size(0);
    const int64_t pixels = slot.inputs.numel() / count;
    float* out = slot.inputs.data_ptr<float>();
    int64_t* targets = slot.targets.data_ptr<int64_t>();
    if (std::find(bad.begin(), bad.end(), false) == bad.end()) {
      throw DataError("no image of a batch of " + std::to_string(count) + " could be decoded, so none can stand in for "
                      "the others (--skip-bad-images); the first: " + slot.bad_samples.front());
    }
    if (augment_seed_) {
      for (int64_t i = 0; i < count; ++i) {
        if (!bad[static_cast<size_t>(i)]) continue;
        int64_t j = (i + 1) % count;
        while (bad[static_cast<size_t>(j)]) j = (j + 1) % count;
        std::copy(out + j * pixels, out + (j + 1) * pixels, out + i * pixels);
        targets[i] = targets[j];
      }
      return;
    }
    int64_t kept = 0;
    std::vector<int64_t> indices;
    for (int64_t i = 0; i < count; ++i) {
      if (bad[static_cast<size_t>(i)]) continue;
      if (kept != i) {
        std::copy(out + i * pixels, out + (i + 1) * pixels, out + kept * pixels);
        targets[kept] = targets[i];
      }
      indices.push_back(slot.indices[static_cast<size_t>(i)]);
      ++kept;
    }
    slot.inputs = slot.inputs.narrow(0, 0, kept);
    slot.targets = slot.targets.narrow(0, 0, kept);
    slot.indices = std::move(indices);
  }

  const ImageFileDataset& data_;
  c10::Device device_;
  std::vector<int64_t> indices_;
  int64_t batch_size_;
  std::optional<uint64_t> augment_seed_;
  int64_t batches_ = 0;
  int64_t depth_ = 1;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<int64_t, Slot> ready_;
  int64_t next_batch_ = 0;  // the next batch a worker takes
  int64_t consumed_ = 0;    // batches handed out
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace

ImageSplits scan_image_folder(const std::string& root_text, double val_fraction, uint64_t seed) {
  const fs::path root(root_text);
  require_directory(root, "image folder");
  ImageSplits splits;
  std::error_code ec;
  if (fs::is_directory(root / "train", ec)) {
    splits.classes = subdirectories(root / "train");
    if (splits.classes.size() < 2) {
      throw DataError("image folder '" + (root / "train").string() + "' has " + std::to_string(splits.classes.size()) +
                      " class folder(s); a classifier needs at least two (train/<class>/<image>)");
    }
    splits.train = labelled(root / "train", splits.classes, "train");
    require_directory(root / "val", "with train/, the validation folder");
    const std::set<std::string> known(splits.classes.begin(), splits.classes.end());
    for (const std::string& name : subdirectories(root / "val")) {
      if (known.count(name) == 0) {
        throw DataError("validation class folder '" + (root / "val" / name).string() + "' has no counterpart in '" +
                        (root / "train").string() + "'");
      }
    }
    splits.test = labelled(root / "val", splits.classes, "val");
    splits.description = "image folder " + root.string() + " (train/ and val/)";
    return splits;
  }
  splits.classes = subdirectories(root);
  if (splits.classes.size() < 2) {
    throw DataError("image folder '" + root.string() + "' has " + std::to_string(splits.classes.size()) +
                    " class folder(s); a classifier needs at least two (root/<class>/<image>, or train/ and val/)");
  }
  const std::vector<ImageSample> all = labelled(root, splits.classes, "train");
  std::map<int64_t, std::vector<ImageSample>> by_class;
  for (const ImageSample& s : all) by_class[s.label].push_back(s);
  for (auto& [label, samples] : by_class) {
    const auto n = static_cast<int64_t>(samples.size());
    int64_t held = static_cast<int64_t>(std::lround(val_fraction * static_cast<double>(n)));
    if (n >= 2) held = std::clamp<int64_t>(held, 1, n - 1);
    const std::vector<int64_t> order = seeded_permutation(n, seed ^ hash_name(splits.classes[static_cast<size_t>(label)]));
    for (int64_t i = 0; i < n; ++i) {
      (i < held ? splits.test : splits.train).push_back(samples[static_cast<size_t>(order[static_cast<size_t>(i)])]);
    }
  }
  std::ostringstream description;
  description << "image folder " << root.string() << " (" << val_fraction << " of each class held out, seed " << seed << ")";
  splits.description = description.str();
  return splits;
}

ImageSplits scan_tiny_imagenet(const std::string& root_text) {
  const fs::path root(root_text);
  require_directory(root, "tiny-imagenet-200 directory");
  const fs::path wnids_path = root / "wnids.txt";
  std::ifstream wnids_file(wnids_path);
  if (!wnids_file) throw DataError("'" + wnids_path.string() + "' cannot be read; a tiny-imagenet-200 directory has wnids.txt");
  ImageSplits splits;
  for (std::string line; std::getline(wnids_file, line);) {
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (!line.empty()) splits.classes.push_back(line);
  }
  std::sort(splits.classes.begin(), splits.classes.end());
  if (splits.classes.size() < 2) throw DataError("'" + wnids_path.string() + "' lists fewer than two classes");
  std::map<std::string, int64_t> label_of;
  for (size_t i = 0; i < splits.classes.size(); ++i) label_of[splits.classes[i]] = static_cast<int64_t>(i);
  for (const std::string& wnid : splits.classes) {
    const fs::path dir = root / "train" / wnid / "images";
    require_directory(dir, "the training images of class " + wnid + ",");
    for (const std::string& path : images_under(dir)) splits.train.push_back({path, label_of[wnid]});
  }
  const fs::path annotations_path = root / "val" / "val_annotations.txt";
  std::ifstream annotations(annotations_path);
  if (!annotations) throw DataError("'" + annotations_path.string() + "' cannot be read; tiny-imagenet-200 labels its validation images there");
  int64_t line_number = 0;
  for (std::string line; std::getline(annotations, line);) {
    ++line_number;
    if (line.empty()) continue;
    std::istringstream fields(line);
    std::string file;
    std::string wnid;
    if (!std::getline(fields, file, '\t') || !std::getline(fields, wnid, '\t')) {
      throw DataError("'" + annotations_path.string() + "' line " + std::to_string(line_number) +
                      " is not 'FILE<tab>WNID<tab>box'");
    }
    auto it = label_of.find(wnid);
    if (it == label_of.end()) {
      throw DataError("'" + annotations_path.string() + "' line " + std::to_string(line_number) + " names class '" + wnid +
                      "', which wnids.txt does not list");
    }
    const fs::path path = root / "val" / "images" / file;
    if (!fs::is_regular_file(path)) {
      throw DataError("'" + annotations_path.string() + "' line " + std::to_string(line_number) + " names '" +
                      path.string() + "', which does not exist");
    }
    splits.test.push_back({path.string(), it->second});
  }
  splits.description = "tiny-imagenet-200 in " + root.string();
  return splits;
}

ImageFileDataset::ImageFileDataset(std::vector<ImageSample> samples, ImageFileOptions options)
    : samples_(std::move(samples)), options_(options) {}

std::unique_ptr<BatchStream> ImageFileDataset::stream(std::vector<int64_t> indices, int64_t batch_size,
                                                      std::optional<uint64_t> augment_seed) const {
  return std::make_unique<ImageBatchStream>(*this, device_, std::move(indices), batch_size, augment_seed);
}

std::vector<BadImage> check_image_files(const std::vector<ImageSample>& samples, int64_t workers) {
  std::vector<std::string> problems(samples.size());
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t i = next++; i < samples.size(); i = next++) {
      try {
        (void)read_image_size(samples[i].path);
      } catch (const std::exception& e) {
        problems[i] = e.what();
      }
    }
  };
  std::vector<std::thread> threads;
  const int64_t count = std::max<int64_t>(1, std::min<int64_t>(workers, static_cast<int64_t>(samples.size())));
  for (int64_t t = 1; t < count; ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  std::vector<BadImage> bad;
  for (size_t i = 0; i < problems.size(); ++i) {
    if (!problems[i].empty()) bad.push_back(BadImage{i, std::move(problems[i])});
  }
  return bad;
}

}  // namespace dtrain
