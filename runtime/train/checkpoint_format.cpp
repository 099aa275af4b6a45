#include "runtime/train/checkpoint_format.h"

#include <ATen/ATen.h>
#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "runtime/util/error.h"

namespace dtrain {
namespace fs = std::filesystem;
namespace {

constexpr const char* kFormatName = "dtrain-checkpoint";
constexpr const char* kOptimizerPrefix = "optimizer.";

// Formats before 5: 1 to 3 (dtrain before 0.1.0) and 4 (dtrain 0.1) were LibTorch archives. 4 added the
// position inside an epoch, its partial training metrics, the global batch, the time written and the
// data's labels; 5 is the safetensors layout with optimizer state by parameter name.

uint32_t crc32_of(std::string_view bytes) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  // zlib takes at most UINT_MAX bytes a call.
  for (size_t done = 0; done < bytes.size();) {
    const size_t n = std::min<size_t>(bytes.size() - done, std::numeric_limits<uInt>::max());
    crc = ::crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + done), static_cast<uInt>(n));
    done += n;
  }
  return static_cast<uint32_t>(crc);
}

// A metric's figures as JSON: NaN and infinity, which JSON cannot hold, as null (read back as NaN).
nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }
double number_of(const nlohmann::json& v, const std::string& what) {
  if (v.is_null()) return std::nan("");
  if (!v.is_number()) throw DataError("it records " + what + " as " + v.dump() + ", expected a number");
  return v.get<double>();
}
int64_t integer_of(const nlohmann::json& v, const std::string& what) {
  if (!v.is_number_integer()) throw DataError("it records " + what + " as " + v.dump() + ", expected an integer");
  return v.get<int64_t>();
}

nlohmann::json metric_values_json(const MetricValues& values) {
  nlohmann::json out = nlohmann::json::array();
  for (const MetricValue& m : values.all()) out.push_back({m.name, number(m.value), number(m.sum), number(m.weight)});
  return out;
}

MetricValues metric_values_of(const nlohmann::json& j, const std::string& what) {
  if (!j.is_array()) throw DataError("it records " + what + " as " + j.dump() + ", expected a list");
  std::vector<MetricValue> values;
  for (const nlohmann::json& m : j) {
    if (!m.is_array() || m.size() != 4 || !m[0].is_string()) {
      throw DataError("it records a metric of " + what + " as " + m.dump() + ", expected [name, value, sum, weight]");
    }
    const std::string name = m[0].get<std::string>();
    values.push_back(MetricValue{name, number_of(m[1], name), number_of(m[2], name), number_of(m[3], name)});
  }
  return MetricValues(std::move(values));
}

nlohmann::json epoch_stats_json(const EpochStats& s) {
  return {{"epoch", s.epoch}, {"epochs", s.epochs}, {"lr", number(s.lr)}, {"train_samples", s.train_samples},
          {"test_samples", s.test_samples}, {"train", metric_values_json(s.train)}, {"test", metric_values_json(s.test)}};
}

EpochStats epoch_stats_of(const nlohmann::json& j) {
  if (!j.is_object()) throw DataError("it records metrics as " + j.dump() + ", expected an object");
  const auto field = [&j](const char* key) -> const nlohmann::json& {
    if (!j.contains(key)) throw DataError(std::string("its metrics lack '") + key + "'");
    return j[key];
  };
  EpochStats s;
  s.epoch = integer_of(field("epoch"), "metrics.epoch");
  s.epochs = integer_of(field("epochs"), "metrics.epochs");
  s.lr = number_of(field("lr"), "metrics.lr");
  s.train_samples = integer_of(field("train_samples"), "metrics.train_samples");
  s.test_samples = integer_of(field("test_samples"), "metrics.test_samples");
  s.train = metric_values_of(field("train"), "metrics.train");
  s.test = metric_values_of(field("test"), "metrics.test");
  return s;
}

std::string shape_text(at::IntArrayRef sizes, at::ScalarType type) {
  std::ostringstream os;
  os << sizes << " " << type;
  return os.str();
}

template <class T>
bool all_finite_values(const T* data, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(static_cast<double>(data[i]))) return false;
  }
  return true;
}

// Whether the bytes of a tensor of `type` hold only finite values, read in place.
bool bytes_finite(std::string_view bytes, at::ScalarType type) {
  const int64_t n = static_cast<int64_t>(bytes.size() / c10::elementSize(type));
  switch (type) {
    case at::kFloat: {
      std::vector<float> v(static_cast<size_t>(n));
      if (n > 0) std::memcpy(v.data(), bytes.data(), bytes.size());
      return all_finite_values(v.data(), n);
    }
    case at::kDouble: {
      std::vector<double> v(static_cast<size_t>(n));
      if (n > 0) std::memcpy(v.data(), bytes.data(), bytes.size());
      return all_finite_values(v.data(), n);
    }
    case at::kHalf: {
      std::vector<at::Half> v(static_cast<size_t>(n));
      if (n > 0) std::memcpy(v.data(), bytes.data(), bytes.size());
      return all_finite_values(v.data(), n);
    }
    case at::kBFloat16: {
      std::vector<at::BFloat16> v(static_cast<size_t>(n));
      if (n > 0) std::memcpy(v.data(), bytes.data(), bytes.size());
      return all_finite_values(v.data(), n);
    }
    default: return true;
  }
}

const std::string& record(const std::map<std::string, std::string>& metadata, const char* key) {
  const auto it = metadata.find(key);
  if (it == metadata.end()) throw DataError(std::string("it lacks the record '") + key + "'");
  return it->second;
}

int64_t int_record(const std::map<std::string, std::string>& metadata, const char* key) {
  const std::string& text = record(metadata, key);
  int64_t value = 0;
  const auto [ptr, err] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (err != std::errc() || ptr != text.data() + text.size() || text.empty()) {
    throw DataError(std::string("it records ") + key + " '" + text.substr(0, 40) + "', expected an integer");
  }
  return value;
}

nlohmann::json json_record(const std::map<std::string, std::string>& metadata, const char* key, int depth) {
  return parse_bounded_json(record(metadata, key), depth, std::string("its record '") + key + "'");
}

// Far beyond any run, and far enough below INT64_MAX that the position arithmetic of a resume
// (epoch + 1, epochs x samples per epoch) cannot overflow.
void check_meta_ranges(const CheckpointMeta& meta) {
  const auto check_range = [](const char* field, int64_t value, int64_t low, int64_t high) {
    if (value < low || value > high) {
      throw DataError(std::string("it records ") + field + " " + std::to_string(value) + ", expected " + std::to_string(low) +
                      " to " + std::to_string(high) + " (a damaged or foreign file)");
    }
  };
  check_range("epoch", meta.epoch, 0, kMaxCheckpointCount);
  check_range("epoch_samples", meta.epoch_samples, 0, kMaxCheckpointCount);
  check_range("epoch_steps", meta.epoch_steps, 0, kMaxCheckpointCount);
  check_range("global_batch", meta.global_batch, 0, kMaxCheckpointCount);
  check_range("partial_samples", meta.partial_samples, 0, kMaxCheckpointCount);
  check_range("world_size", meta.world_size, 1, kMaxCheckpointCount);
}

void read_meta(const std::map<std::string, std::string>& md, DecodedCheckpoint& decoded) {
  const auto format = md.find("format");
  if (format == md.end() || format->second != kFormatName) {
    throw DataError("it is a safetensors file but not a dtrain checkpoint (no __metadata__ format '" + std::string(kFormatName) +
                    "'); to start from weights PyTorch wrote, pass it to --init-from");
  }
  const int64_t version = int_record(md, "format_version");
  if (version != kCheckpointFormatVersion) {
    throw DataError("format version " + std::to_string(version) + ", expected " + std::to_string(kCheckpointFormatVersion) +
                    (version > kCheckpointFormatVersion ? " (written by a newer dtrain?)" : ""));
  }
  CheckpointMeta& meta = decoded.meta;
  meta.epoch = int_record(md, "epoch");
  meta.seed = int_record(md, "seed");
  meta.world_size = int_record(md, "world_size");
  meta.workload = record(md, "workload");
  meta.optimizer = record(md, "optimizer");
  meta.epoch_samples = int_record(md, "epoch_samples");
  meta.epoch_steps = int_record(md, "epoch_steps");
  meta.global_batch = int_record(md, "global_batch");
  meta.partial_samples = int_record(md, "partial_samples");
  const std::string& saved = record(md, "saved_unix_s");
  char* end = nullptr;
  meta.saved_unix_s = std::strtod(saved.c_str(), &end);
  if (saved.empty() || *end != '\0') throw DataError("it records saved_unix_s '" + saved.substr(0, 40) + "', expected a number");
  meta.partial_train = metric_values_of(json_record(md, "partial_train", 2), "partial_train");
  if (md.count("metrics") > 0) meta.metrics = epoch_stats_of(json_record(md, "metrics", 3));
  if (md.count("data_labels") > 0) meta.labels = md.at("data_labels");
  if (md.count("run_id") > 0) meta.run_id = md.at("run_id");
  decoded.optimizers = json_record(md, "optimizer_options", 5);
  if (!decoded.optimizers.is_object()) throw DataError("its optimizer_options is not an object");
  const nlohmann::json modules = json_record(md, "modules", 1);
  for (const nlohmann::json& m : modules.is_array() ? modules : nlohmann::json::array()) {
    if (!m.is_string()) throw DataError("its modules list holds " + m.dump() + ", expected names");
    decoded.modules.push_back(m.get<std::string>());
  }
  if (decoded.modules.empty()) throw DataError("it names no module");
}

// Every tensor's CRC-32 against the one recorded, and every tensor recorded.
void check_crcs(const DecodedCheckpoint& decoded) {
  const nlohmann::json crcs = json_record(decoded.file.metadata, "crc32", 1);
  if (!crcs.is_object() || crcs.size() != decoded.file.entries.size()) {
    throw DataError("its crc32 record lists " + std::to_string(crcs.is_object() ? crcs.size() : 0) + " tensors, the file holds " +
                    std::to_string(decoded.file.entries.size()));
  }
  for (const SafetensorsEntry& e : decoded.file.entries) {
    if (!crcs.contains(e.name) || !crcs[e.name].is_number_unsigned()) throw DataError("its crc32 record lacks tensor '" + e.name + "'");
    const uint32_t actual = crc32_of(decoded.file.bytes_of(e));
    if (crcs[e.name].get<uint64_t>() != actual) {
      throw DataError("tensor '" + e.name + "' fails its CRC-32 check (damaged)");
    }
  }
}

}  // namespace

// A contiguous host tensor is scanned on the calling thread: the check runs on the checkpoint writer's
// thread too, where an ATen reduction would start a second pool of threads beside training's.
bool holds_only_finite(const at::Tensor& t) {
  if (!t.is_floating_point()) return true;
  if (t.is_cpu() && t.is_contiguous()) {
    const int64_t n = t.numel();
    switch (t.scalar_type()) {
      case at::kFloat: return all_finite_values(t.data_ptr<float>(), n);
      case at::kDouble: return all_finite_values(t.data_ptr<double>(), n);
      case at::kHalf: return all_finite_values(t.data_ptr<at::Half>(), n);
      case at::kBFloat16: return all_finite_values(t.data_ptr<at::BFloat16>(), n);
      default: break;
    }
  }
  return at::isfinite(t).all().item<bool>();
}

CheckpointPosition checkpoint_position_of(const CheckpointMeta& meta) {
  return meta.epoch_samples > 0 ? CheckpointPosition{meta.epoch + 1, meta.epoch_steps}
                                : CheckpointPosition{meta.epoch, kEpochEndSteps};
}

void collect_module_state(const TrainedModule& module, const TensorCopy& take, const std::string& suffix,
                          CheckpointState& state) {
  if (module.name.empty() || module.name.find('.') != std::string::npos || module.name == "optimizer") {
    throw Error("module name '" + module.name + "' cannot name a checkpoint's tensors (no dot, not 'optimizer')");
  }
  state.modules.push_back(module.name);
  std::unordered_map<const void*, std::string> names;  // parameter -> its path, for the optimizer's state
  for (const auto& p : module.module->named_parameters()) {
    at::Tensor t = take(p.value());
    state.tensors.emplace_back(module.name + "." + p.key(), t);
    state.checked.emplace_back("parameter " + p.key() + suffix, std::move(t));
    names.emplace(p.value().unsafeGetTensorImpl(), p.key());
  }
  for (const auto& b : module.module->named_buffers()) {
    at::Tensor t = take(b.value());
    state.tensors.emplace_back(module.name + "." + b.key(), t);
    state.checked.emplace_back("buffer " + b.key() + suffix, std::move(t));
  }
  if (!module.optimizer) return;  // a module the step updates itself (a moving average)
  state.optimizers[module.name] = optimizer_options(*module.optimizer);
  for_each_optimizer_state(*module.optimizer, take, [&](const at::Tensor& param, const std::string& key, at::Tensor t) {
    const auto name = names.find(param.unsafeGetTensorImpl());
    if (name == names.end()) throw Error("the " + module.name + " optimizer updates a tensor that is not a parameter of it");
    state.tensors.emplace_back(kOptimizerPrefix + module.name + "." + name->second + "." + key, std::move(t));
  });
}

std::string encode_checkpoint(const CheckpointState& state, const CheckpointMeta& meta) {
  NamedTensors host;
  host.reserve(state.tensors.size());
  nlohmann::json crcs = nlohmann::json::object();
  for (const auto& [name, t] : state.tensors) {
    at::Tensor h = t.is_cpu() ? t : t.to(at::kCPU);
    if (!h.is_contiguous()) h = h.contiguous();
    crcs[name] = crc32_of(std::string_view(static_cast<const char*>(h.data_ptr()), h.numel() * h.element_size()));
    host.emplace_back(name, std::move(h));
  }
  std::map<std::string, std::string> md{
      {"format", kFormatName},
      {"format_version", std::to_string(kCheckpointFormatVersion)},
      {"dtrain_version", DTRAIN_VERSION},
      {"workload", meta.workload},
      {"modules", nlohmann::json(state.modules).dump()},
      {"optimizer", meta.optimizer},
      {"optimizer_options", state.optimizers.dump()},
      {"epoch", std::to_string(meta.epoch)},
      {"seed", std::to_string(meta.seed)},
      {"world_size", std::to_string(meta.world_size)},
      {"epoch_samples", std::to_string(meta.epoch_samples)},
      {"epoch_steps", std::to_string(meta.epoch_steps)},
      {"partial_train", metric_values_json(meta.partial_train).dump()},
      {"partial_samples", std::to_string(meta.partial_samples)},
      {"global_batch", std::to_string(meta.global_batch)},
      {"saved_unix_s", nlohmann::json(meta.saved_unix_s).dump()},
      {"crc32", crcs.dump()},
  };
  if (!meta.labels.empty()) md["data_labels"] = meta.labels;
  if (!meta.run_id.empty()) md["run_id"] = meta.run_id;
  if (meta.metrics) md["metrics"] = epoch_stats_json(*meta.metrics).dump();
  return write_safetensors(host, md);
}

DecodedCheckpoint decode_checkpoint(const std::string& path, std::string bytes) {
  DecodedCheckpoint decoded;
  decoded.meta.path = path;
  if (bytes.rfind("PK\x03\x04", 0) == 0) {
    throw DataError("it is a LibTorch archive (format 4, dtrain 0.1), which this dtrain does not read: convert it once with "
                    "scripts/convert_checkpoint.py");
  }
  decoded.bytes = std::make_shared<std::string>(std::move(bytes));
  decoded.file = parse_safetensors(*decoded.bytes);
  read_meta(decoded.file.metadata, decoded);
  check_meta_ranges(decoded.meta);
  check_crcs(decoded);
  const std::optional<CheckpointPosition> named = checkpoint_position(fs::path(path).filename().string(), path);
  const CheckpointPosition recorded = checkpoint_position_of(decoded.meta);
  if (named && *named != recorded) {
    throw DataError("its name says " + position_text(*named) + " but it records " + position_text(recorded) +
                    " (renamed, or another run's)");
  }
  return decoded;
}

CheckpointLoad plan_checkpoint_load(const DecodedCheckpoint& decoded, const std::vector<TrainedModule>& modules,
                                   const std::string& workload) {
  const CheckpointMeta& meta = decoded.meta;
  const std::string where = "checkpoint '" + meta.path + "'";
  const std::string mismatch = where + " (workload " + meta.workload + ", world size " + std::to_string(meta.world_size) +
                               ") does not match this " + workload + " model: ";
  std::vector<std::string> names;
  for (const TrainedModule& m : modules) names.push_back(m.name);
  for (const std::string& m : decoded.modules) {
    if (std::find(names.begin(), names.end(), m) == names.end()) {
      throw CheckpointMismatch(where + " (workload " + meta.workload + ") holds a module '" + m + "', which this " + workload +
                               " run does not train");
    }
  }
  // Every tensor of the file is claimed by exactly one live tensor or optimizer-state entry.
  CheckpointLoad plan;
  plan.file = &decoded.file;
  plan.optimizer_states.resize(modules.size());
  std::set<std::string> claimed;
  for (size_t i = 0; i < modules.size(); ++i) {
    const TrainedModule& m = modules[i];
    if (std::find(decoded.modules.begin(), decoded.modules.end(), m.name) == decoded.modules.end()) {
      throw CheckpointMismatch(where + " holds no module '" + m.name + "'");
    }
    const std::string prefix = modules.size() > 1 ? m.name + "." : "";
    const auto claim = [&](const std::string& path, const at::Tensor& live, const char* kind) {
      const std::string name = m.name + "." + path;
      const SafetensorsEntry* e = decoded.file.find(name);
      if (e == nullptr) throw CheckpointMismatch(mismatch + "the model's " + kind + " " + prefix + path + " is not in the file");
      if (at::IntArrayRef(e->shape) != live.sizes() || e->dtype != live.scalar_type()) {
        throw CheckpointMismatch(mismatch + kind + " " + prefix + path + " is " + shape_text(e->shape, e->dtype) +
                                 " in the file but " + shape_text(live.sizes(), live.scalar_type()) + " in the model");
      }
      // dtrain never writes one (Checkpointer::persist refuses): a file that holds one is not its own.
      if (!bytes_finite(decoded.file.bytes_of(*e), e->dtype)) {
        throw DataError(kind + std::string(" ") + prefix + path + " holds NaN or infinite values");
      }
      claimed.insert(name);
      plan.tensors.push_back({live, e});
    };
    std::unordered_map<const void*, std::string> param_names;
    for (const auto& p : m.module->named_parameters()) {
      claim(p.key(), p.value(), "parameter");
      param_names.emplace(p.value().unsafeGetTensorImpl(), p.key());
    }
    for (const auto& b : m.module->named_buffers()) claim(b.key(), b.value(), "buffer");
    if (!m.optimizer) continue;
    if (!decoded.optimizers.contains(m.name)) throw DataError("it holds no optimizer options for module '" + m.name + "'");
    // Each parameter has all of its optimizer's state keys or none (it never stepped). What is wrong
    // here is wrong with the file (its model matched), which a resume passes over.
    const std::vector<std::string> keys = optimizer_state_keys(*m.optimizer);
    for (const auto& group : m.optimizer->param_groups()) {
      for (const at::Tensor& param : group.params()) {
        const std::string base = kOptimizerPrefix + m.name + "." + param_names.at(param.unsafeGetTensorImpl()) + ".";
        std::pair<at::Tensor, std::map<std::string, at::Tensor>> state{param, {}};
        for (const std::string& key : keys) {
          const SafetensorsEntry* e = decoded.file.find(base + key);
          if (e == nullptr) continue;
          const bool step = key == "step";
          const bool fits = step ? e->shape.empty() && e->dtype == at::kLong
                                 : at::IntArrayRef(e->shape) == param.sizes() && e->dtype == param.scalar_type();
          if (!fits) {
            throw DataError("optimizer state " + base + key + " is " + shape_text(e->shape, e->dtype) + ", expected " +
                            (step ? std::string("[] Long") : shape_text(param.sizes(), param.scalar_type())));
          }
          if (!bytes_finite(decoded.file.bytes_of(*e), e->dtype)) {
            throw DataError("optimizer state " + base + key + " holds NaN or infinite values");
          }
          state.second.emplace(key, decoded.file.tensor(*e));
          claimed.insert(base + key);
        }
        for (const std::string& key : keys) {
          if (!state.second.empty() && state.second.count(key) == 0) {
            throw DataError("optimizer state " + base + key + " is missing (the parameter's other state is there)");
          }
        }
        if (state.second.count("step") > 0 && state.second.at("step").item<int64_t>() < 0) {
          throw DataError("optimizer state " + base + "step is negative");
        }
        if (!state.second.empty()) plan.optimizer_states[i].push_back(std::move(state));
      }
    }
    // The options are tried on the optimizer and put back: a record that does not set is the file's fault.
    const nlohmann::json& options = decoded.optimizers[m.name];
    const nlohmann::json before = optimizer_options(*m.optimizer);
    try {
      set_optimizer_options(*m.optimizer, options, "the " + m.name + " optimizer's record");
    } catch (const DataError&) {
      set_optimizer_options(*m.optimizer, before, "");
      throw;
    }
    set_optimizer_options(*m.optimizer, before, "");
    plan.optimizer_options.push_back(options);
  }
  for (const SafetensorsEntry& e : decoded.file.entries) {
    if (claimed.count(e.name) > 0) continue;
    if (e.name.rfind(kOptimizerPrefix, 0) == 0) throw DataError("it holds " + e.name + ", which no parameter's optimizer has");
    throw CheckpointMismatch(mismatch + "the file holds " + e.name + ", which the model does not have");
  }
  return plan;
}

void apply_checkpoint_load(const CheckpointLoad& plan, std::vector<TrainedModule>& modules) {
  size_t next = 0;
  for (TrainedModule& m : modules) {
    if (m.optimizer) set_optimizer_options(*m.optimizer, plan.optimizer_options.at(next++), "");
  }
  at::NoGradGuard no_grad;
  for (const auto& [live, entry] : plan.tensors) {
    at::Tensor target = live;
    target.copy_(plan.file->tensor(*entry));
  }
  for (size_t i = 0; i < modules.size(); ++i) {
    if (modules[i].optimizer) set_optimizer_state(*modules[i].optimizer, plan.optimizer_states[i]);
  }
}

CheckpointLoad plan_initial_weights(const SafetensorsFile& file, const std::vector<TrainedModule>& modules) {
  const bool dtrain_checkpoint = file.metadata.count("format") > 0 && file.metadata.at("format") == kFormatName;
  // The file's entries by the live name they map to, "<module>.<path>".
  std::map<std::string, const SafetensorsEntry*> mapped;
  std::vector<std::string> unmapped;
  for (const SafetensorsEntry& e : file.entries) {
    if (dtrain_checkpoint && e.name.rfind(kOptimizerPrefix, 0) == 0) continue;
    std::string name = e.name.rfind("module.", 0) == 0 ? e.name.substr(7) : e.name;
    const auto owner = std::find_if(modules.begin(), modules.end(),
                                    [&name](const TrainedModule& m) { return name.rfind(m.name + ".", 0) == 0; });
    if (owner == modules.end()) {
      if (modules.size() != 1) {
        unmapped.push_back(e.name);
        continue;
      }
      name = modules.front().name + "." + name;
    }
    if (!mapped.emplace(name, &e).second) unmapped.push_back(e.name + " (a second entry for " + name + ")");
  }
  CheckpointLoad plan;
  plan.file = &file;
  std::vector<std::string> missing;
  std::vector<std::string> misshapen;
  for (const TrainedModule& m : modules) {
    const auto claim = [&](const std::string& path, const at::Tensor& live) {
      const std::string name = m.name + "." + path;
      const auto it = mapped.find(name);
      if (it == mapped.end()) {
        missing.push_back(name);
        return;
      }
      const SafetensorsEntry& e = *it->second;
      const bool convertible = e.dtype == live.scalar_type() || (at::isFloatingType(e.dtype) && at::isFloatingType(live.scalar_type()));
      if (at::IntArrayRef(e.shape) != live.sizes() || !convertible) {
        misshapen.push_back(e.name + " is " + shape_text(e.shape, e.dtype) + ", " + name + " " + shape_text(live.sizes(), live.scalar_type()));
      } else if (!bytes_finite(file.bytes_of(e), e.dtype)) {
        misshapen.push_back(e.name + " holds NaN or infinite values");
      } else {
        plan.tensors.push_back({live, &e});
      }
      mapped.erase(it);
    };
    for (const auto& p : m.module->named_parameters()) claim(p.key(), p.value());
    for (const auto& b : m.module->named_buffers()) claim(b.key(), b.value());
  }
  for (const auto& [name, e] : mapped) unmapped.push_back(e->name);
  const auto list = [](const char* what, const std::vector<std::string>& names) -> std::string {
    if (names.empty()) return "";
    std::string out = std::string("\n  ") + what + " (" + std::to_string(names.size()) + "):";
    for (size_t i = 0; i < names.size() && i < 8; ++i) out += " " + names[i] + (i + 1 < names.size() && i < 7 ? "," : "");
    return out + (names.size() > 8 ? " ..." : "");
  };
  const std::string problems = list("not in the file", missing) + list("in the file but not in the model", unmapped) +
                               list("of another shape or type", misshapen);
  if (!problems.empty()) throw DataError("its tensors do not match the model (docs/usage.md, \"Starting from PyTorch weights\"):" + problems);
  plan.optimizer_states.resize(modules.size());
  for (const TrainedModule& m : modules) {
    if (m.optimizer) plan.optimizer_options.push_back(optimizer_options(*m.optimizer));  // unchanged
  }
  return plan;
}

void load_checkpoint_modules(const DecodedCheckpoint& decoded, std::vector<TrainedModule>& modules, const std::string& workload) {
  try {
    apply_checkpoint_load(plan_checkpoint_load(decoded, modules, workload), modules);
  } catch (const CheckpointMismatch&) {
    throw;
  } catch (const DataError& e) {
    throw DataError("checkpoint '" + decoded.meta.path + "' is unusable: " + e.message());
  }
}

}  // namespace dtrain
