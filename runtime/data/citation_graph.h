// Citation graphs in the LINQS text format (Cora, CiteSeer as published by LINQS): NAME.content has one
// paper per line, "<paper id> <feature>... <class label>" (whitespace-separated, binary bag-of-words
// features), and NAME.cites one citation per line, "<cited paper id> <citing paper id>". Also generated
// graphs with communities in the same form for tests and --synthetic.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dtrain {

struct CitationGraph {
  at::Tensor features;  // [N, F] float32, as stored
  at::Tensor labels;    // [N] int64: index into class_names
  at::Tensor edges;     // [2, E] int64 node indices (cited, citing), as the file lists them
  std::vector<std::string> node_ids;     // the papers' ids, in file order
  std::vector<std::string> class_names;  // sorted, so that the label indices do not depend on line order
  int64_t dropped_edges = 0;  // citations of papers absent from the content file (read with drop_dangling)

  int64_t num_nodes() const { return static_cast<int64_t>(node_ids.size()); }
  int64_t num_classes() const { return static_cast<int64_t>(class_names.size()); }
};

struct CitationFiles {
  std::string content;  // DIR/NAME.content
  std::string cites;    // DIR/NAME.cites
};

// The one NAME.content in `dir` that has a NAME.cites beside it. Throws DataError when there is none or
// more than one, listing what is there.
CitationFiles find_citation_files(const std::string& dir);

// Reads both files. Throws DataError naming the file, the line and the value for: a feature row of
// another width than the first, a value that is not a number, a paper listed twice, a line with too few
// fields, a citation of a paper the content file lacks (unless `drop_dangling`: then such citations are
// left out and counted, as CiteSeer's published files need), an empty file.
CitationGraph read_citation_graph(const CitationFiles& files, bool drop_dangling);

// A graph with communities: `classes` communities of about equal size, each node citing `degree` others
// on average, a fraction `homophily` of them in its own community; binary features, each class favouring
// its own words. Same (spec, seed) -> same graph.
struct GraphSpec {
  int64_t nodes = 2708;
  int64_t features = 1433;
  int64_t classes = 7;
  double degree = 2.0;      // citations per node (Cora: 5429 / 2708)
  double homophily = 0.8;   // Cora's edge homophily is about 0.81
  double words = 18.0;      // words per paper (Cora: about 18)
  double topical = 0.5;     // share of a paper's words drawn from its class's vocabulary
};
CitationGraph make_community_graph(const GraphSpec& spec, uint64_t seed);

}  // namespace dtrain
