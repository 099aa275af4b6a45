#include "runtime/monitor/peak_flops.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace dtrain {
namespace {

struct PeakRow {
  const char* model;
  std::vector<const char*> words;  // each must occur in the device name as a whole token
  double fp32;
  double fp16;
  double bf16;  // 0 = no bf16 tensor cores
};

// First match wins: the more specific variants of a family come before its general entry.
const std::vector<PeakRow>& peak_rows() {
  static const std::vector<PeakRow> rows = {
      {"H100 PCIe", {"H100", "PCIE"}, 51.2, 756.0, 756.0},
      {"H100 NVL", {"H100", "NVL"}, 60.0, 835.0, 835.0},
      {"H100 SXM", {"H100"}, 66.9, 989.4, 989.4},
      {"H200", {"H200"}, 66.9, 989.4, 989.4},
      {"A100", {"A100"}, 19.5, 312.0, 312.0},
      {"L40S", {"L40S"}, 91.6, 362.1, 362.1},
      {"L4", {"L4"}, 30.3, 121.0, 121.0},
      {"A10", {"A10"}, 31.2, 125.0, 125.0},
      {"V100S PCIe", {"V100S"}, 16.4, 130.0, 0.0},
      {"V100 PCIe", {"V100", "PCIE"}, 14.0, 112.0, 0.0},
      {"V100 SXM2", {"V100"}, 15.7, 125.0, 0.0},
      {"T4", {"T4"}, 8.1, 65.0, 0.0},
      {"P100 PCIe", {"P100", "PCIE"}, 9.3, 18.7, 0.0},
      {"P100 SXM2", {"P100"}, 10.6, 21.2, 0.0},
  };
  return rows;
}

// `word` occurs in `name` as a whole token, not preceded or followed by a letter or digit: "A10" matches
// "NVIDIA A10" but neither "A100" nor "A10G", "L4" not "L40S".
bool has_token(const std::string& name, const std::string& word) {
  for (size_t at = name.find(word); at != std::string::npos; at = name.find(word, at + 1)) {
    const size_t end = at + word.size();
    const bool left = at == 0 || !std::isalnum(static_cast<unsigned char>(name[at - 1]));
    const bool right = end == name.size() || !std::isalnum(static_cast<unsigned char>(name[end]));
    if (left && right) return true;
  }
  return false;
}

// Upper case, dashes and underscores as spaces: "Tesla V100-SXM2-32GB" has the tokens V100 and SXM2.
std::string normalised(const std::string& device_name) {
  std::string name = device_name;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) {
    return c == '-' || c == '_' ? ' ' : static_cast<char>(std::toupper(c));
  });
  return name;
}

}  // namespace

std::optional<GpuPeak> gpu_peak_tflops(const std::string& device_name, Precision precision) {
  const std::string name = normalised(device_name);
  for (const PeakRow& row : peak_rows()) {
    bool all = true;
    for (const char* word : row.words) all = all && has_token(name, word);
    if (!all) continue;
    const double tflops = precision == Precision::kFp32 ? row.fp32 : precision == Precision::kFp16 ? row.fp16 : row.bf16;
    if (tflops <= 0.0) return std::nullopt;
    return GpuPeak{row.model, tflops};
  }
  return std::nullopt;
}

}  // namespace dtrain
