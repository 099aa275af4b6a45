#include "runtime/train/checkpoint.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <torch/serialize/archive.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <vector>

#include "runtime/util/error.h"

namespace dtrain {
namespace fs = std::filesystem;
namespace {

constexpr int64_t kFormatVersion = 1;
const std::regex kCheckpointName(R"(checkpoint-epoch-(\d+)\.pt)");

at::Tensor string_tensor(const std::string& text) {
  at::Tensor t = at::empty({static_cast<int64_t>(text.size())}, at::kByte);
  std::memcpy(t.data_ptr(), text.data(), text.size());
  return t;
}

std::string tensor_string(const at::Tensor& t) {
  return std::string(reinterpret_cast<const char*>(t.data_ptr()), static_cast<size_t>(t.numel()));
}

int64_t read_int(torch::serialize::InputArchive& archive, const char* key) {
  at::Tensor t;
  archive.read(key, t);
  return t.item<int64_t>();
}

std::string read_string(torch::serialize::InputArchive& archive, const char* key) {
  at::Tensor t;
  archive.read(key, t);
  return tensor_string(t);
}

void write_file_durably(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw DataError("cannot write checkpoint '" + path + "': " + std::strerror(errno));
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string reason = std::strerror(errno);
      ::close(fd);
      throw DataError("cannot write checkpoint '" + path + "': " + reason);
    }
    written += static_cast<size_t>(n);
  }
  // The data must be on disk before the rename makes it the checkpoint of record.
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    throw DataError("cannot write checkpoint '" + path + "': " + std::strerror(errno));
  }
}

void sync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

std::vector<std::pair<int64_t, fs::path>> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return found;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::smatch match;
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && std::regex_match(name, match, kCheckpointName)) {
      found.emplace_back(std::stoll(match[1].str()), entry.path());
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

Checkpointer::Checkpointer(CheckpointOptions options, Communicator& comm) : options_(std::move(options)), comm_(comm) {}

std::optional<std::string> Checkpointer::latest(const std::string& dir) {
  auto found = list_checkpoints(dir);
  if (found.empty()) return std::nullopt;
  return found.back().second.string();
}

std::string Checkpointer::save(const CheckpointMeta& meta, const torch::nn::Module& model,
                               const torch::optim::Optimizer& optimizer) const {
  if (!comm_.is_root()) return "";
  torch::serialize::OutputArchive archive;
  archive.write("format_version", at::tensor(kFormatVersion));
  archive.write("epoch", at::tensor(meta.epoch));
  archive.write("seed", at::tensor(meta.seed));
  archive.write("world_size", at::tensor(meta.world_size));
  archive.write("workload", string_tensor(meta.workload));
  archive.write("optimizer_name", string_tensor(meta.optimizer));
  torch::serialize::OutputArchive model_archive;
  model.save(model_archive);
  archive.write("model", model_archive);
  torch::serialize::OutputArchive optimizer_archive;
  optimizer.save(optimizer_archive);
  archive.write("optimizer", optimizer_archive);

  std::string bytes;
  archive.save_to([&bytes](const void* data, size_t size) {
    bytes.append(static_cast<const char*>(data), size);
    return size;
  });

  std::error_code ec;
  fs::create_directories(options_.dir, ec);
  if (ec) throw DataError("cannot create checkpoint directory '" + options_.dir + "': " + ec.message());
  char name[64];
  std::snprintf(name, sizeof name, "checkpoint-epoch-%06lld.pt", static_cast<long long>(meta.epoch));
  const fs::path final_path = fs::path(options_.dir) / name;
  const fs::path temp_path = final_path.string() + ".tmp";
  write_file_durably(temp_path.string(), bytes);
  fs::rename(temp_path, final_path, ec);
  if (ec) throw DataError("cannot rename '" + temp_path.string() + "' to '" + final_path.string() + "': " + ec.message());
  sync_directory(options_.dir);

  if (options_.keep > 0) {
    auto found = list_checkpoints(options_.dir);
    for (size_t i = 0; i + static_cast<size_t>(options_.keep) < found.size(); ++i) fs::remove(found[i].second, ec);
  }
  return final_path.string();
}

std::optional<CheckpointMeta> Checkpointer::restore(torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                                                    const std::string& workload,
                                                    const std::string& optimizer_name) const {
  // Rank 0 decides and reads; a size of -1 means "no checkpoint", -2 "unreadable" (the message follows).
  std::string bytes;
  std::string path;
  int64_t size = -1;
  if (comm_.is_root()) {
    if (auto newest = latest(options_.dir)) {
      path = *newest;
      std::ifstream in(path, std::ios::binary);
      if (in) {
        bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
        size = static_cast<int64_t>(bytes.size());
      } else {
        bytes = "cannot read checkpoint '" + path + "': " + std::strerror(errno);
        size = -2;
      }
    }
  }
  at::Tensor header = at::tensor(std::vector<int64_t>{size, static_cast<int64_t>(bytes.size())}, at::kLong);
  comm_.broadcast(header, 0);
  size = header[0].item<int64_t>();
  const int64_t length = header[1].item<int64_t>();
  if (size == -1) return std::nullopt;
  at::Tensor payload = comm_.is_root() ? string_tensor(bytes) : at::empty({length}, at::kByte);
  comm_.broadcast(payload, 0);
  if (size == -2) throw DataError(tensor_string(payload));
  // Every rank now holds the same bytes, so every rank reaches the same verdict below.
  torch::serialize::InputArchive archive;
  CheckpointMeta meta;
  try {
    // Tensors land on this rank's device whatever device wrote them: a checkpoint from a CPU run resumes
    // on GPUs and the reverse, and rank 3's state never ends up on rank 0's GPU.
    const c10::Device device = model.parameters().empty() ? c10::Device(c10::DeviceType::CPU)
                                                          : model.parameters().front().device();
    archive.load_from(static_cast<const char*>(payload.data_ptr()), static_cast<size_t>(payload.numel()), device);
    const int64_t version = read_int(archive, "format_version");
    if (version != kFormatVersion) {
      throw DataError("checkpoint format version " + std::to_string(version) + ", expected " +
                      std::to_string(kFormatVersion));
    }
    meta.epoch = read_int(archive, "epoch");
    meta.seed = read_int(archive, "seed");
    meta.world_size = read_int(archive, "world_size");
    meta.workload = read_string(archive, "workload");
    meta.optimizer = read_string(archive, "optimizer_name");
  } catch (const DataError& e) {
    throw DataError("checkpoint in '" + options_.dir + "' is unusable: " + e.what());
  } catch (const c10::Error& e) {
    throw DataError("checkpoint in '" + options_.dir + "' is corrupt or not a dtrain checkpoint: " +
                    e.what_without_backtrace());
  }
  if (meta.workload != workload) {
    throw DataError("newest checkpoint in '" + options_.dir + "' is for workload '" + meta.workload +
                    "', this run trains '" + workload + "'; use another checkpoint.dir");
  }
  if (meta.optimizer != optimizer_name) {
    throw DataError("newest checkpoint in '" + options_.dir + "' holds " + meta.optimizer +
                    " optimizer state, this run uses " + optimizer_name + "; use another checkpoint.dir");
  }
  try {
    torch::serialize::InputArchive model_archive;
    archive.read("model", model_archive);
    model.load(model_archive);
    torch::serialize::InputArchive optimizer_archive;
    archive.read("optimizer", optimizer_archive);
    optimizer.load(optimizer_archive);
  } catch (const c10::Error& e) {
    throw DataError("checkpoint in '" + options_.dir + "' does not match the " + workload +
                    " model: " + e.what_without_backtrace());
  }
  return meta;
}

}  // namespace dtrain
