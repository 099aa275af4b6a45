// Datasets of image files on disk, read as they are needed (a dataset larger than memory streams from
// disk): ImageFileDataset decodes and transforms the images of each batch in `workers` threads, a few
// batches ahead of the training step, into pinned host memory when the device is a GPU.
// Layouts: an image folder (root/<class>/<image>, torchvision's ImageFolder, with a val/ folder or a
// seeded hold-out) and tiny-imagenet-200 as published.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/data/dataset.h"
#include "runtime/data/image_transform.h"

namespace dtrain {

struct ImageSample {
  std::string path;
  int64_t label = 0;
};

struct ImageSplits {
  std::vector<std::string> classes;  // label i is classes[i]
  std::vector<ImageSample> train;
  std::vector<ImageSample> test;
  std::string description;
};

struct ImageFileOptions {
  int64_t image_size = 224;  // side of the square images the model sees
  int64_t workers = 4;
  int64_t prefetch_batches = 0;  // batches decoded ahead of the step; 0 = 2 x workers
  Normalisation normalisation;
  double min_crop_scale = 0.08;  // RandomResizedCrop's smallest area, as a share of the image
  // data.skip_bad_images: files the start-up check finds bad are left out (image_file_data); one that
  // fails to decode later (its header was whole, its data is not) is reported in Batch::bad_samples and
  // stood in for: by another image of its batch in training, by nothing in evaluation.
  bool skip_bad = false;
};

// The image folder at `root`: JPEG and PNG files (by extension, any case; other files are ignored) under
// root/<class>/, classes sorted by name. With root/train/ and root/val/, those are the splits (val/ may
// only use classes train/ has); otherwise `val_fraction` of each class (rounded, at least one image for
// a class of two or more) is held out, chosen by `seed`. Throws DataError for a missing or empty root,
// fewer than two classes, or an empty class.
ImageSplits scan_image_folder(const std::string& root, double val_fraction, uint64_t seed);

// tiny-imagenet-200 at `root`: wnids.txt, train/<wnid>/images/*.JPEG, val/images/*.JPEG labelled by
// val/val_annotations.txt (file, wnid, box); classes are the wnids sorted. Throws DataError naming the
// file that is missing or malformed.
ImageSplits scan_tiny_imagenet(const std::string& root);

// Checks every sample's file from its header (read_image_size), in `workers` threads: a dataset's bad
// files (empty, unreadable, not an image, a size no decoder takes) are found at start-up, not at the step
// that reads them hours later. Returns each bad file's sample index and what is wrong with it (the
// message names the path), in sample order.
struct BadImage {
  size_t index = 0;
  std::string problem;
};
std::vector<BadImage> check_image_files(const std::vector<ImageSample>& samples, int64_t workers);

class ImageFileDataset final : public Dataset {
 public:
  ImageFileDataset(std::vector<ImageSample> samples, ImageFileOptions options);

  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  void to(c10::Device device) override { device_ = device; }
  // With `augment_seed`: the training transforms; without: the evaluation ones.
  std::unique_ptr<BatchStream> stream(std::vector<int64_t> indices, int64_t batch_size,
                                      std::optional<uint64_t> augment_seed) const override;

  const std::vector<ImageSample>& samples() const { return samples_; }
  const ImageFileOptions& options() const { return options_; }

 private:
  std::vector<ImageSample> samples_;
  ImageFileOptions options_;
  c10::Device device_{c10::DeviceType::CPU};
};

}  // namespace dtrain
