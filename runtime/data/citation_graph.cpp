#include "runtime/data/citation_graph.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string_view>
#include <unordered_map>

#include "runtime/data/distributed_sampler.h"
#include "runtime/data/sample_random.h"
#include "runtime/util/error.h"
#include "runtime/util/strings.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;

std::string read_text(const std::string& path) {
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError("cannot read '" + path + "': " + (errno ? std::strerror(errno) : "not readable"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw DataError("cannot read '" + path + "': read error");
  // A UTF-8 byte order mark (editors on Windows write one) is no part of the first paper's id.
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);
  return text;
}

// Calls on_line(line_number, fields) for every line that is not blank; fields split on spaces and tabs.
template <class OnLine>
void for_each_line(const std::string& text, OnLine on_line) {
  std::vector<std::string_view> fields;
  int64_t number = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    ++number;
    std::string_view line(text.data() + start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    fields.clear();
    size_t at = 0;
    while (at < line.size()) {
      while (at < line.size() && (line[at] == ' ' || line[at] == '\t')) ++at;
      size_t stop = at;
      while (stop < line.size() && line[stop] != ' ' && line[stop] != '\t') ++stop;
      if (stop > at) fields.push_back(line.substr(at, stop - at));
      at = stop;
    }
    if (!fields.empty()) on_line(number, fields);
    start = end + 1;
  }
}

std::string shown(std::string_view value) {
  constexpr size_t kShown = 40;
  return "'" + std::string(value.substr(0, kShown)) + (value.size() > kShown ? "...'" : "'");
}

}  // namespace

CitationFiles find_citation_files(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw DataError("the citation graph directory '" + dir + "' does not exist; it must hold NAME.content and "
                    "NAME.cites in the LINQS format (bash scripts/fetch_data.sh cora), or use --synthetic");
  }
  std::vector<CitationFiles> found;
  std::vector<std::string> contents;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() != ".content") continue;
    contents.push_back(entry.path().filename().string());
    fs::path cites = entry.path();
    cites.replace_extension(".cites");
    if (fs::is_regular_file(cites, ec)) found.push_back({entry.path().string(), cites.string()});
  }
  if (found.size() == 1) return found.front();
  std::sort(found.begin(), found.end(), [](const CitationFiles& a, const CitationFiles& b) { return a.content < b.content; });
  if (found.empty()) {
    const std::string listed = join(contents);
    throw DataError("no citation graph in '" + dir + "': expected NAME.content with NAME.cites beside it (LINQS format)" +
                    (listed.empty() ? std::string(", found no .content file") : ", found " + listed + " without its .cites"));
  }
  const std::string listed =
      join(found, ", ", [](const CitationFiles& f) { return fs::path(f.content).filename().string(); });
  throw DataError("'" + dir + "' holds several citation graphs (" + listed + "); point --data-dir at a folder with one");
}

CitationGraph read_citation_graph(const CitationFiles& files, bool drop_dangling) {
  CitationGraph graph;
  std::unordered_map<std::string, int64_t> index_of;
  std::vector<float> features;
  std::vector<std::string> label_names;
  int64_t width = -1;
  int64_t width_line = 0;
  const std::string content = read_text(files.content);
  for_each_line(content, [&](int64_t line, const std::vector<std::string_view>& fields) {
    const std::string where = files.content + " line " + std::to_string(line);
    if (fields.size() < 3) {
      throw DataError(where + ": " + std::to_string(fields.size()) +
                      " fields; expected a paper id, its features and its class label");
    }
    const auto row_width = static_cast<int64_t>(fields.size()) - 2;
    if (width < 0) {
      width = row_width;
      width_line = line;
    } else if (row_width != width) {
      throw DataError(where + ": paper " + shown(fields.front()) + " has " + std::to_string(row_width) +
                      " features, expected " + std::to_string(width) + " (as on line " + std::to_string(width_line) +
                      "); its last field, " + shown(fields.back()) + ", is read as its class label");
    }
    const std::string id(fields.front());
    if (!index_of.emplace(id, graph.num_nodes()).second) {
      throw DataError(where + ": paper " + shown(id) + " is listed twice (first on line " +
                      std::to_string(index_of[id] + 1) + " of the papers)");
    }
    graph.node_ids.push_back(id);
    for (size_t i = 1; i + 1 < fields.size(); ++i) {
      float value = 0;
      const std::string_view text = fields[i];
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
      const bool whole = end == text.data() + text.size();
      if (ec == std::errc::result_out_of_range && whole) {
        // A number, but beyond a float's range (about 3.4e38), which the features are held in.
        throw DataError(where + ": feature " + std::to_string(i) + " of paper " + shown(id) + " is " + shown(text) +
                        ", beyond what a 32-bit float holds (magnitudes up to 3.4e38)");
      }
      if (ec != std::errc() || !whole || !std::isfinite(value)) {
        throw DataError(where + ": feature " + std::to_string(i) + " of paper " + shown(id) + " is " + shown(text) +
                        ", not a finite number");
      }
      features.push_back(value);
    }
    label_names.emplace_back(fields.back());
  });
  if (graph.node_ids.empty()) throw DataError("'" + files.content + "' lists no papers");

  graph.class_names = label_names;
  std::sort(graph.class_names.begin(), graph.class_names.end());
  graph.class_names.erase(std::unique(graph.class_names.begin(), graph.class_names.end()), graph.class_names.end());
  if (graph.class_names.size() < 2) {
    throw DataError("'" + files.content + "' labels all its " + std::to_string(graph.node_ids.size()) +
                    " papers with one class, '" + graph.class_names.front() +
                    "'; a classifier needs at least two (is the class label the last field of each line?)");
  }
  std::vector<int64_t> labels;
  labels.reserve(label_names.size());
  for (const std::string& name : label_names) {
    labels.push_back(std::lower_bound(graph.class_names.begin(), graph.class_names.end(), name) - graph.class_names.begin());
  }

  std::vector<int64_t> edges;
  const std::string cites = read_text(files.cites);
  for_each_line(cites, [&](int64_t line, const std::vector<std::string_view>& fields) {
    const std::string where = files.cites + " line " + std::to_string(line);
    if (fields.size() != 2) {
      throw DataError(where + ": " + std::to_string(fields.size()) + " fields; expected two paper ids (cited, citing)");
    }
    int64_t ends[2];
    for (int k = 0; k < 2; ++k) {
      const auto it = index_of.find(std::string(fields[static_cast<size_t>(k)]));
      if (it == index_of.end()) {
        if (drop_dangling) {
          ++graph.dropped_edges;
          return;
        }
        throw DataError(where + ": paper " + shown(fields[static_cast<size_t>(k)]) + " is not in " + files.content);
      }
      ends[k] = it->second;
    }
    edges.push_back(ends[0]);
    edges.push_back(ends[1]);
  });

  const int64_t n = graph.num_nodes();
  graph.features = at::from_blob(features.data(), {n, width}, at::kFloat).clone();
  graph.labels = at::from_blob(labels.data(), {n}, at::kLong).clone();
  const auto e = static_cast<int64_t>(edges.size() / 2);
  // A copy, always: with one edge the transposed view already counts as contiguous, and contiguous()
  // would return it still pointing into `edges`, freed on return.
  graph.edges = e > 0 ? at::from_blob(edges.data(), {e, 2}, at::kLong).t().clone(at::MemoryFormat::Contiguous)
                      : at::empty({2, 0}, at::kLong);
  return graph;
}

CitationGraph make_community_graph(const GraphSpec& spec, uint64_t seed) {
  const int64_t n = spec.nodes;
  const int64_t c = spec.classes;
  CitationGraph graph;
  // Communities of equal size (up to one), in a random order over the nodes.
  const std::vector<int64_t> order = seeded_permutation(n, seed ^ 0xbb67ae8584caa73bULL);
  SampleRandom rng(seed, /*index=*/-1);  // SplitMix64: the same graph on every platform and build
  std::vector<int64_t> labels(static_cast<size_t>(n));
  std::vector<std::vector<int64_t>> members(static_cast<size_t>(c));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t node = order[static_cast<size_t>(i)];
    labels[static_cast<size_t>(node)] = i % c;
  }
  for (int64_t node = 0; node < n; ++node) members[static_cast<size_t>(labels[static_cast<size_t>(node)])].push_back(node);

  std::vector<int64_t> edges;
  const auto whole = static_cast<int64_t>(spec.degree);
  const double fraction = spec.degree - static_cast<double>(whole);
  for (int64_t node = 0; node < n; ++node) {
    const int64_t k = whole + (rng.uniform() < fraction ? 1 : 0);
    const auto& own = members[static_cast<size_t>(labels[static_cast<size_t>(node)])];
    for (int64_t j = 0; j < k; ++j) {
      const int64_t other = rng.uniform() < spec.homophily ? own[static_cast<size_t>(rng.below(static_cast<int64_t>(own.size())))]
                                                          : rng.below(n);
      if (other == node) continue;
      edges.push_back(other);  // cited
      edges.push_back(node);   // citing
    }
  }

  const int64_t f = spec.features;
  const int64_t vocabulary = std::max<int64_t>(1, f / c);
  std::vector<float> features(static_cast<size_t>(n * f), 0.0f);
  for (int64_t node = 0; node < n; ++node) {
    const int64_t label = labels[static_cast<size_t>(node)];
    const auto words = static_cast<int64_t>(spec.words);
    for (int64_t w = 0; w < words; ++w) {
      const int64_t word = rng.uniform() < spec.topical ? (label * vocabulary + rng.below(vocabulary)) % f : rng.below(f);
      features[static_cast<size_t>(node * f + word)] = 1.0f;
    }
  }

  graph.features = at::from_blob(features.data(), {n, f}, at::kFloat).clone();
  graph.labels = at::from_blob(labels.data(), {n}, at::kLong).clone();
  const auto e = static_cast<int64_t>(edges.size() / 2);
  graph.edges = at::from_blob(edges.data(), {e, 2}, at::kLong).t().clone(at::MemoryFormat::Contiguous);
  for (int64_t node = 0; node < n; ++node) graph.node_ids.push_back(std::to_string(node));
  for (int64_t k = 0; k < c; ++k) graph.class_names.push_back("class_" + std::to_string(k));
  return graph;
}

}  // namespace dtrain
