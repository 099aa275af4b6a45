// The safetensors layout (https://github.com/huggingface/safetensors), which any tool can open:
//   8 bytes   N, the header's length, unsigned little-endian
//   N bytes   a JSON object: name -> {"dtype": "F32", "shape": [64, 1, 3, 3], "data_offsets": [begin, end]},
//             and "__metadata__" -> {string: string}; padded with spaces so that the data starts at a
//             multiple of 8 bytes
//   the data  every tensor's raw little-endian bytes, row-major, back to back in the order of its offsets
//             (the format allows no gap), the widest element types first so that each tensor starts at a
//             multiple of its element size, as safetensors' own writer orders them.
// The reader trusts nothing in a file: the header's length, every offset, dtype and shape are checked
// against the file before a tensor is made, the JSON's nesting is bounded, and no name may appear twice.
// No LibTorch unpickler, zip reader or TorchScript importer is involved.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dtrain {

// The largest header dtrain reads: safetensors' own reader refuses larger ones too.
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// The bytes of a file holding `tensors` (host tensors of any layout; each is written row-major) and
// `metadata`. Throws Error for a dtype the format has no name for, or a name given twice.
std::string write_safetensors(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata);

// One tensor of a parsed file: its place in the data is checked against the file.
struct SafetensorsEntry {
  std::string name;
  at::ScalarType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // offsets into the data section
  uint64_t end = 0;
};

// A parsed file. Views `bytes`, which must outlive it.
struct SafetensorsFile {
  std::map<std::string, std::string> metadata;
  std::vector<SafetensorsEntry> entries;  // in the order of their data
  std::string_view data;

  // The entry of `name`, or null.
  const SafetensorsEntry* find(const std::string& name) const;
  std::string_view bytes_of(const SafetensorsEntry& entry) const { return data.substr(entry.begin, entry.end - entry.begin); }
  // A host tensor holding a copy of the entry's bytes.
  at::Tensor tensor(const SafetensorsEntry& entry) const;
};

// Parses `bytes` as a whole file. Throws DataError saying what is wrong, the same for the same bytes.
SafetensorsFile parse_safetensors(std::string_view bytes);

// What is wrong with a file of `file_size` bytes whose first bytes are `head` (at least 8 of them when
// the file has 8), judged before the file is read whole: too short for its header's length, or a header
// longer than any dtrain reads. "" when nothing is.
std::string safetensors_size_problem(std::string_view head, uint64_t file_size);

// Parses `text` as JSON nested at most `max_depth` levels (an object of objects of arrays: 3), whose
// objects name no key twice. Throws DataError naming `what` for text that is not such JSON: nesting is
// bounded while parsing (nlohmann-json's parser keeps its own stack), so that no input exhausts ours.
nlohmann::json parse_bounded_json(std::string_view text, int max_depth, const std::string& what);

}  // namespace dtrain
