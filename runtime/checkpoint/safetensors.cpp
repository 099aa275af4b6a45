#include "runtime/checkpoint/safetensors.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>
#include <tuple>

#include "runtime/util/error.h"

namespace dtrain {
namespace {

static_assert(sizeof(double) == 8 && sizeof(float) == 4, "the layout's element sizes");

// The file is little-endian; so are x86-64, aarch64 and ppc64le, the hosts dtrain runs on. A big-endian
// host is refused rather than written wrongly.
void require_little_endian() {
  const uint16_t probe = 1;
  unsigned char first = 0;
  std::memcpy(&first, &probe, 1);
  if (first != 1) throw Error("checkpoints are little-endian; this host is big-endian, which dtrain does not support");
}

struct DtypeName {
  at::ScalarType type;
  const char* name;
};
constexpr DtypeName kDtypes[] = {
    {at::kDouble, "F64"}, {at::kFloat, "F32"}, {at::kHalf, "F16"}, {at::kBFloat16, "BF16"}, {at::kLong, "I64"},
    {at::kInt, "I32"},    {at::kShort, "I16"}, {at::kChar, "I8"},  {at::kByte, "U8"},       {at::kBool, "BOOL"},
};

const char* dtype_name(at::ScalarType type) {
  for (const DtypeName& d : kDtypes) {
    if (d.type == type) return d.name;
  }
  return nullptr;
}

void put_u64_le(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t get_u64_le(std::string_view bytes) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  return v;
}

}  // namespace

nlohmann::json parse_bounded_json(std::string_view text, int max_depth, const std::string& what) {
  // The callback sees every value as it is parsed, with its depth: deeper nesting or a key named twice
  // (which nlohmann-json would quietly resolve to the last) ends the parse.
  std::vector<std::set<std::string>> keys;
  const auto callback = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (depth > max_depth) throw DataError(what + " nests deeper than " + std::to_string(max_depth) + " levels");
    // An object starting at depth d reports its keys at depth d + 1.
    const auto level = static_cast<size_t>(depth);
    if (event == Event::object_start) {
      if (keys.size() < level + 2) keys.resize(level + 2);
      keys[level + 1].clear();
    }
    if (event == Event::key && level < keys.size() && !keys[level].insert(parsed.get<std::string>()).second) {
      throw DataError(what + " names '" + parsed.get<std::string>() + "' twice");
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), callback);
  } catch (const nlohmann::json::exception& e) {
    throw DataError(what + " is not JSON: " + e.what());
  }
}

std::string write_safetensors(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
  require_little_endian();
  // The widest element types first, then by name: every tensor starts at a multiple of its element size.
  std::vector<const std::pair<std::string, at::Tensor>*> order;
  for (const auto& t : tensors) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    return a->second.element_size() > b->second.element_size();
  });
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto* t : order) {
    const char* dtype = dtype_name(t->second.scalar_type());
    if (dtype == nullptr) {
      throw Error("tensor '" + t->first + "' is of type " + std::string(c10::toString(t->second.scalar_type())) +
                  ", which a checkpoint cannot hold");
    }
    if (header.contains(t->first)) throw Error("tensor '" + t->first + "' is written twice");
    const uint64_t bytes = static_cast<uint64_t>(t->second.numel()) * t->second.element_size();
    header[t->first] = {{"dtype", dtype}, {"shape", t->second.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + text.size() + offset);
  put_u64_le(out, text.size());
  out += text;
  for (const auto* t : order) {
    const at::Tensor host = t->second.is_contiguous() ? t->second : t->second.contiguous();
    const size_t bytes = static_cast<size_t>(host.numel()) * host.element_size();
    if (bytes > 0) out.append(static_cast<const char*>(host.data_ptr()), bytes);
  }
  return out;
}

std::string safetensors_size_problem(std::string_view head, uint64_t file_size) {
  if (file_size < 8 || head.size() < 8) {
    return "it is " + std::to_string(file_size) + " bytes, shorter than a checkpoint's 8-byte header length";
  }
  const uint64_t n = get_u64_le(head);
  if (n > kMaxSafetensorsHeaderBytes) {
    return "its header would be " + std::to_string(n) + " bytes, more than the " +
           std::to_string(kMaxSafetensorsHeaderBytes) + " a checkpoint's may have";
  }
  if (n < 2 || 8 + n > file_size) {
    return "its header would be " + std::to_string(n) + " bytes, but the file is " + std::to_string(file_size) +
           " (truncated, or not a checkpoint)";
  }
  return "";
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  for (const SafetensorsEntry& e : entries) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

at::Tensor SafetensorsFile::tensor(const SafetensorsEntry& entry) const {
  at::Tensor t = at::empty(entry.shape, at::TensorOptions().dtype(entry.dtype));
  const std::string_view bytes = bytes_of(entry);
  if (!bytes.empty()) std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  return t;
}

SafetensorsFile parse_safetensors(std::string_view bytes) {
  require_little_endian();
  const std::string size_problem = safetensors_size_problem(bytes.substr(0, 8), bytes.size());
  if (!size_problem.empty()) throw DataError(size_problem);
  const uint64_t n = get_u64_le(bytes);
  const std::string_view text = bytes.substr(8, n);
  if (text.front() != '{') throw DataError("its header does not start with '{' (not a safetensors file)");
  const nlohmann::json header = parse_bounded_json(text, 3, "its header");
  if (!header.is_object()) throw DataError("its header is not a JSON object");
  SafetensorsFile file;
  file.data = bytes.substr(8 + n);
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) throw DataError("its __metadata__ is not an object");
      for (const auto& [key, text_value] : value.items()) {
        if (!text_value.is_string()) throw DataError("its __metadata__ '" + key + "' is not a string");
        file.metadata[key] = text_value.get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + name + "'";
    if (!value.is_object() || !value.contains("dtype") || !value.contains("shape") || !value.contains("data_offsets") ||
        value.size() != 3) {
      throw DataError(where + " is not described by exactly dtype, shape and data_offsets");
    }
    SafetensorsEntry entry;
    entry.name = name;
    const nlohmann::json& dtype = value["dtype"];
    const auto known = std::find_if(std::begin(kDtypes), std::end(kDtypes),
                                    [&](const DtypeName& d) { return dtype.is_string() && dtype.get<std::string>() == d.name; });
    if (known == std::end(kDtypes)) throw DataError(where + " has dtype " + dtype.dump() + ", which dtrain does not read");
    entry.dtype = known->type;
    const nlohmann::json& shape = value["shape"];
    const nlohmann::json& offsets = value["data_offsets"];
    if (!shape.is_array() || shape.size() > 16) throw DataError(where + " has shape " + shape.dump() + ", expected up to 16 sizes");
    // The product of the sizes (a zero counted as one), bounded by the data's size at every step so that
    // neither it nor the strides LibTorch derives from the shape can overflow.
    uint64_t product = 1;
    bool empty = false;
    for (const nlohmann::json& size : shape) {
      if (!size.is_number_unsigned()) throw DataError(where + " has shape " + shape.dump() + ", expected non-negative integers");
      const uint64_t s = size.get<uint64_t>();
      if (s > file.data.size() / product + 1) throw DataError(where + " has shape " + shape.dump() + ", more elements than the file holds");
      entry.shape.push_back(static_cast<int64_t>(s));
      empty = empty || s == 0;
      product *= std::max<uint64_t>(s, 1);
    }
    const uint64_t elements = empty ? 0 : product;
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) {
      throw DataError(where + " has data_offsets " + offsets.dump() + ", expected [begin, end]");
    }
    entry.begin = offsets[0].get<uint64_t>();
    entry.end = offsets[1].get<uint64_t>();
    const uint64_t element_size = c10::elementSize(entry.dtype);
    if (entry.begin > entry.end || entry.end > file.data.size()) {
      throw DataError(where + " has data_offsets " + offsets.dump() + ", outside the " + std::to_string(file.data.size()) +
                      " bytes of data");
    }
    if (elements > file.data.size() / element_size || entry.end - entry.begin != elements * element_size) {
      throw DataError(where + " of shape " + shape.dump() + " and dtype " + known->name + " takes " +
                      std::to_string(entry.end - entry.begin) + " bytes, expected " +
                      (elements > file.data.size() / element_size ? std::string("more than the file holds")
                                                                  : std::to_string(elements * element_size)));
    }
    file.entries.push_back(std::move(entry));
  }
  // The data is the tensors' bytes back to back, as safetensors requires: no gap, no overlap, no tail.
  std::sort(file.entries.begin(), file.entries.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) { return std::tie(a.begin, a.end) < std::tie(b.begin, b.end); });
  uint64_t expected = 0;
  for (const SafetensorsEntry& e : file.entries) {
    if (e.begin != expected) {
      throw DataError("tensor '" + e.name + "' starts at byte " + std::to_string(e.begin) + " of the data, expected " +
                      std::to_string(expected) + " (a gap or an overlap)");
    }
    expected = e.end;
  }
  if (expected != file.data.size()) {
    throw DataError("its tensors take " + std::to_string(expected) + " bytes but the data is " +
                    std::to_string(file.data.size()) + " (truncated or extended)");
  }
  return file;
}

}  // namespace dtrain
