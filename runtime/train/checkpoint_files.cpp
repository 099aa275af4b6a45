#include "runtime/train/checkpoint_files.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/util/error.h"
#include "runtime/util/file_io.h"

namespace dtrain {
namespace fs = std::filesystem;
namespace {

constexpr const char* kPrefix = "checkpoint-epoch-";
constexpr const char* kStep = "-step-";
constexpr const char* kSuffix = ".pt";
constexpr const char* kPartialSuffix = ".pt.tmp";

// A decimal number filling [first, last), or nullopt; throws DataError when it overflows.
std::optional<int64_t> name_number(const char* first, const char* last, const std::string& where, const char* what) {
  if (first == last || !std::all_of(first, last, [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  int64_t value = 0;
  const auto [ptr, err] = std::from_chars(first, last, value);
  if (err != std::errc() || ptr != last) {
    throw DataError("checkpoint file '" + where + "' has " + what + " too large for any run; rename or remove it");
  }
  return value;
}

bool has_suffix(const std::string& name, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return name.size() > n && name.compare(name.size() - n, n, suffix) == 0;
}

}  // namespace

std::string position_text(const CheckpointPosition& position) {
  return "epoch " + std::to_string(position.first) +
         (position.second == kEpochEndSteps ? std::string(" (its end)") : ", step " + std::to_string(position.second));
}

std::string checkpoint_file_name(const CheckpointPosition& position) {
  char name[96];
  if (position.second == kEpochEndSteps) {
    std::snprintf(name, sizeof name, "%s%06lld%s", kPrefix, static_cast<long long>(position.first), kSuffix);
  } else {
    std::snprintf(name, sizeof name, "%s%06lld%s%08lld%s", kPrefix, static_cast<long long>(position.first), kStep,
                  static_cast<long long>(position.second), kSuffix);
  }
  return name;
}

std::optional<CheckpointPosition> checkpoint_position(const std::string& name, const std::string& where) {
  const size_t prefix = std::strlen(kPrefix);
  if (name.size() <= prefix + std::strlen(kSuffix) || name.compare(0, prefix, kPrefix) != 0 || !has_suffix(name, kSuffix)) {
    return std::nullopt;
  }
  const char* first = name.data() + prefix;
  const char* last = name.data() + name.size() - std::strlen(kSuffix);
  const char* step = std::search(first, last, kStep, kStep + std::strlen(kStep));
  const std::optional<int64_t> epoch = name_number(first, step, where, "an epoch number");
  if (!epoch) return std::nullopt;
  if (step == last) return CheckpointPosition{*epoch, kEpochEndSteps};
  const std::optional<int64_t> steps = name_number(step + std::strlen(kStep), last, where, "a step number");
  if (!steps) return std::nullopt;
  return CheckpointPosition{*epoch, *steps};
}

bool is_partial_checkpoint(const std::string& name) { return name.rfind(kPrefix, 0) == 0 && has_suffix(name, kPartialSuffix); }

std::vector<CheckpointFile> list_checkpoints(const std::string& dir) {
  std::vector<CheckpointFile> found;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return found;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_regular_file(ec)) continue;
    const std::string path = entry.path().string();
    if (const std::optional<CheckpointPosition> position = checkpoint_position(entry.path().filename().string(), path)) {
      found.push_back({*position, path});
    }
  }
  std::sort(found.begin(), found.end(), [](const CheckpointFile& a, const CheckpointFile& b) {
    return a.position != b.position ? a.position < b.position : a.path < b.path;
  });
  return found;
}

std::optional<std::string> latest_checkpoint(const std::string& dir) {
  const std::vector<CheckpointFile> found = list_checkpoints(dir);
  if (found.empty()) return std::nullopt;
  return found.back().path;
}

int remove_partial_checkpoints(const std::string& dir) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!is_partial_checkpoint(entry.path().filename().string())) continue;
    std::error_code remove_ec;
    if (fs::remove(entry.path(), remove_ec)) ++removed;
  }
  return removed;
}

void write_progress_mark(const std::string& dir, const ProgressMark& mark) {
  std::ostringstream text;
  text.precision(17);
  text << "dtrain-progress 1\n" << mark.epoch << " " << mark.epoch_samples << " " << mark.unix_s << "\n";
  try {
    std::error_code ec;
    fs::create_directories(dir, ec);
    // Rewritten at every progress line: replaced atomically, not synced (it costs microseconds, an fsync
    // milliseconds); a power loss can only make it older.
    write_file_atomically((fs::path(dir) / "progress").string(), text.str(), Durability::kReplaced);
  } catch (const IoError&) {
  }
}

std::optional<ProgressMark> read_progress_mark(const std::string& dir) {
  std::ifstream in(fs::path(dir) / "progress");
  std::string magic;
  int version = 0;
  ProgressMark mark;
  if (!(in >> magic >> version >> mark.epoch >> mark.epoch_samples >> mark.unix_s) || magic != "dtrain-progress" ||
      version != 1) {
    return std::nullopt;
  }
  // Only a cost report reads it: a mark out of any run's range is ignored, not trusted.
  if (mark.epoch < 1 || mark.epoch > kMaxCheckpointCount || mark.epoch_samples < 0 ||
      mark.epoch_samples > kMaxCheckpointCount || !std::isfinite(mark.unix_s)) {
    return std::nullopt;
  }
  return mark;
}

}  // namespace dtrain
