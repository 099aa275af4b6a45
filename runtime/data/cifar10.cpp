#include "runtime/data/cifar10.h"

#include <ATen/ATen.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "runtime/util/error.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kImageBytes = 3 * 32 * 32;
constexpr int64_t kRecordBytes = 1 + kImageBytes;

// Appends the records of `path` to `images` and `labels`.
void read_batch(const fs::path& path, std::vector<uint8_t>& images, std::vector<int64_t>& labels) {
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError("cannot read CIFAR-10 file '" + path.string() + "': " + (errno ? std::strerror(errno) : "not readable"));
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw DataError("cannot read CIFAR-10 file '" + path.string() + "': read error");
  const auto size = static_cast<int64_t>(bytes.size());
  if (size == 0 || size % kRecordBytes != 0) {
    throw DataError("CIFAR-10 file '" + path.string() + "' holds " + std::to_string(size) +
                    " bytes, not a whole number of 3073-byte records (a label byte and a 32x32x3 image)");
  }
  for (int64_t r = 0; r < size / kRecordBytes; ++r) {
    const auto* record = reinterpret_cast<const uint8_t*>(bytes.data() + r * kRecordBytes);
    if (record[0] > 9) {
      throw DataError("CIFAR-10 file '" + path.string() + "' record " + std::to_string(r) + " has label " +
                      std::to_string(record[0]) + "; expected classes 0..9");
    }
    labels.push_back(record[0]);
    images.insert(images.end(), record + 1, record + kRecordBytes);
  }
}

TensorDataset read_split(const fs::path& dir, const std::vector<std::string>& names) {
  std::vector<uint8_t> images;
  std::vector<int64_t> labels;
  for (const std::string& name : names) read_batch(dir / name, images, labels);
  const auto n = static_cast<int64_t>(labels.size());
  TensorDataset split;
  split.inputs = at::from_blob(images.data(), {n, 3, 32, 32}, at::kByte).clone();
  split.targets = at::from_blob(labels.data(), {n}, at::kLong).clone();
  split.mean = cifar10_mean();
  split.std = cifar10_std();
  split.value_scale = 255.0;
  return split;
}

}  // namespace

at::Tensor cifar10_mean() { return at::tensor({0.4914f, 0.4822f, 0.4465f}).view({3, 1, 1}); }
at::Tensor cifar10_std() { return at::tensor({0.2470f, 0.2435f, 0.2616f}).view({3, 1, 1}); }

Cifar10 read_cifar10(const std::string& dir_text) {
  const std::vector<std::string> train_files{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                             "data_batch_4.bin", "data_batch_5.bin"};
  fs::path dir(dir_text);
  std::error_code ec;
  if (!fs::exists(dir / "test_batch.bin", ec) && fs::exists(dir / "cifar-10-batches-bin" / "test_batch.bin", ec)) {
    dir /= "cifar-10-batches-bin";
  }
  std::string missing;
  std::vector<std::string> names = train_files;
  names.emplace_back("test_batch.bin");
  for (const std::string& name : names) {
    const fs::file_status status = fs::status(dir / name, ec);
    if (!fs::exists(status)) {
      missing += " " + name;
    } else if (!fs::is_regular_file(status)) {
      // There, but a directory (an archive unpacked one level too deep, say) or a device: not "missing".
      throw DataError("CIFAR-10 batch file '" + (dir / name).string() + "' is " +
                      (fs::is_directory(status) ? "a directory" : "not a regular file") +
                      ", not one of the dataset's binary files; point --data-dir at the folder holding the files");
    }
  }
  if (!missing.empty()) {
    throw DataError("CIFAR-10 binary files missing in '" + dir.string() + "':" + missing +
                    ". Run scripts/fetch_data.sh cifar10, pass --data-dir DIR (the cifar-10-batches-bin folder or "
                    "its parent), or use --synthetic.");
  }
  Cifar10 data;
  data.train = read_split(dir, train_files);
  data.train.crop_padding = 4;
  data.train.random_flip = true;
  data.test = read_split(dir, {"test_batch.bin"});
  return data;
}

}  // namespace dtrain
