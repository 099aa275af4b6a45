#include "test/support/format4_archive.h"

#include <ATen/ATen.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/serialize/output-archive.h>

#include <cstring>

#include "runtime/train/adadelta.h"

namespace dtrain::test {
namespace {

at::Tensor string_tensor(const std::string& text) {
  at::Tensor t = at::empty({static_cast<int64_t>(text.size())}, at::kByte);
  if (!text.empty()) std::memcpy(t.data_ptr(), text.data(), text.size());
  return t;
}

void write_metric_values(torch::serialize::OutputArchive& archive, const char* key, const MetricValues& values) {
  torch::serialize::OutputArchive nested;
  std::string names;
  for (const MetricValue& m : values.all()) {
    names += (names.empty() ? "" : "\n") + m.name;
    nested.write(m.name, at::tensor(std::vector<double>{m.value, m.sum, m.weight}, at::kDouble));
  }
  nested.write("names", string_tensor(names));
  archive.write(key, nested);
}

void write_module(const torch::nn::Module& module, torch::serialize::OutputArchive& archive) {
  for (const auto& p : module.named_parameters(/*recurse=*/false)) archive.write(p.key(), p.value());
  for (const auto& b : module.named_buffers(/*recurse=*/false)) archive.write(b.key(), b.value(), /*is_buffer=*/true);
  for (const auto& child : module.named_children()) {
    if (!child.value()->is_serializable()) continue;
    torch::serialize::OutputArchive child_archive(archive.compilation_unit());
    write_module(*child.value(), child_archive);
    archive.write(child.key(), child_archive);
  }
}

// Optimizer::save of LibTorch 1.x, which keys the state by the parameters' printed addresses.
void write_optimizer(const torch::optim::Optimizer& optimizer, torch::serialize::OutputArchive& archive) {
  using namespace torch::optim;
  if (auto* o = dynamic_cast<const SGD*>(&optimizer)) return o->save(archive);
  if (auto* o = dynamic_cast<const AdamW*>(&optimizer)) return o->save(archive);
  if (auto* o = dynamic_cast<const Adam*>(&optimizer)) return o->save(archive);
  if (auto* o = dynamic_cast<const Adadelta*>(&optimizer)) return o->save(archive);
}

}  // namespace

std::string format4_archive(const CheckpointMeta& meta, const std::vector<TrainedModule>& modules) {
  torch::serialize::OutputArchive archive;
  torch::serialize::OutputArchive modules_archive;
  torch::serialize::OutputArchive optimizers_archive;
  for (const TrainedModule& m : modules) {
    torch::serialize::OutputArchive module_archive;
    write_module(*m.module, module_archive);
    modules_archive.write(m.name, module_archive);
    if (!m.optimizer) continue;
    torch::serialize::OutputArchive optimizer_archive;
    write_optimizer(*m.optimizer, optimizer_archive);
    optimizers_archive.write(m.name, optimizer_archive);
  }
  archive.write("modules", modules_archive);
  archive.write("optimizers", optimizers_archive);
  archive.write("format_version", at::tensor(int64_t{4}));
  archive.write("epoch", at::tensor(meta.epoch));
  archive.write("seed", at::tensor(meta.seed));
  archive.write("world_size", at::tensor(meta.world_size));
  archive.write("workload", string_tensor(meta.workload));
  archive.write("optimizer_name", string_tensor(meta.optimizer));
  archive.write("epoch_samples", at::tensor(meta.epoch_samples));
  archive.write("epoch_steps", at::tensor(meta.epoch_steps));
  archive.write("global_batch", at::tensor(meta.global_batch));
  archive.write("saved_unix_s", at::tensor(meta.saved_unix_s, at::kDouble));
  write_metric_values(archive, "partial_train", meta.partial_train);
  archive.write("partial_samples", at::tensor(meta.partial_samples));
  if (!meta.labels.empty()) archive.write("data_labels", string_tensor(meta.labels));
  std::string bytes;
  archive.save_to([&bytes](const void* data, size_t size) {
    bytes.append(static_cast<const char*>(data), size);
    return size;
  });
  return bytes;
}

}  // namespace dtrain::test
