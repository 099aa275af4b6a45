#include "test/support/catch.h"

#include <ATen/ATen.h>

#include <fstream>
#include <set>
#include <string>

#include "runtime/data/citation_graph.h"
#include "runtime/train/autocast_scope.h"
#include "runtime/util/error.h"
#include "test/support/temp_dir.h"
#include "workloads/gcn/gcn.h"
#include "workloads/gcn/gcn_workload.h"
#include "workloads/gcn/graph_inputs.h"

using namespace dtrain;
using Catch::Matchers::Contains;

namespace {

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// Five papers with string ids, three words, two classes; citations including a duplicate and a self-loop.
const char* kContent =
    "p31\t1\t0\t0\tTheory\n"
    "p2\t0\t1\t1\tAI\n"
    "x-7\t1\t1\t0\tTheory\n"
    "p4\t0\t0\t1\tAI\n"
    "p5\t0\t0\t0\tAI\n";
const char* kCites =
    "p31\tp2\n"
    "p2\tx-7\n"
    "p2 x-7\n"
    "p4\tp4\n";

CitationFiles write_graph(const test::TempDir& dir, const std::string& content, const std::string& cites) {
  write_file(dir.file("g.content"), content);
  write_file(dir.file("g.cites"), cites);
  return find_citation_files(dir.path());
}

std::string read_error(const CitationFiles& files, bool drop_dangling = false) {
  try {
    read_citation_graph(files, drop_dangling);
  } catch (const DataError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("LINQS citation files are read exactly, with sorted class names", "[gcn][data]") {
  test::TempDir dir;
  const CitationGraph g = read_citation_graph(write_graph(dir, kContent, kCites), false);
  CHECK(g.node_ids == std::vector<std::string>{"p31", "p2", "x-7", "p4", "p5"});
  CHECK(g.class_names == std::vector<std::string>{"AI", "Theory"});
  CHECK(at::equal(g.labels, at::tensor({1, 0, 1, 0, 0}, at::kLong)));
  CHECK(at::equal(g.features, at::tensor({1, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 0}, at::kFloat).view({5, 3})));
  CHECK(at::equal(g.edges, at::tensor({0, 1, 1, 3, 1, 2, 2, 3}, at::kLong).view({2, 4})));
  CHECK(g.dropped_edges == 0);
}

TEST_CASE("broken citation files are errors naming the file, the line and the value", "[gcn][data]") {
  test::TempDir dir;
  const std::string content = dir.file("g.content");
  const std::string cites = dir.file("g.cites");
  SECTION("a citation of a paper the content file lacks") {
    const CitationFiles files = write_graph(dir, kContent, "p31\tp2\np2\tp99\n");
    CHECK_THAT(read_error(files), Contains(cites + " line 2: paper 'p99' is not in " + content));
    // Dropped and counted where the published data needs it (CiteSeer).
    const CitationGraph g = read_citation_graph(files, /*drop_dangling=*/true);
    CHECK(g.dropped_edges == 1);
    CHECK(g.edges.size(1) == 1);
  }
  SECTION("a paper without its class label") {
    const CitationFiles files = write_graph(dir, "a\t1\t0\tTheory\nb\t0\t1\nc\t1\t1\tAI\n", "a\tb\n");
    CHECK_THAT(read_error(files), Contains(content + " line 2: paper 'b' has 1 features, expected 2 (as on line 1); "
                                                     "its last field, '1', is read as its class label"));
  }
  SECTION("a feature row of the wrong width") {
    const CitationFiles files = write_graph(dir, "a\t1\t0\tTheory\nb\t0\t1\t1\tAI\n", "a\tb\n");
    CHECK_THAT(read_error(files), Contains(content + " line 2: paper 'b' has 3 features, expected 2"));
  }
  SECTION("a feature that is not a number") {
    const CitationFiles files = write_graph(dir, "a\t1\t0\tTheory\nb\t0\tyes\tAI\n", "a\tb\n");
    CHECK_THAT(read_error(files), Contains(content + " line 2: feature 2 of paper 'b' is 'yes', not a finite number"));
  }
  SECTION("a feature beyond a float's range") {
    const CitationFiles files = write_graph(dir, "a\t1\t0\tTheory\nb\t0\t1e39\tAI\n", "a\tb\n");
    CHECK_THAT(read_error(files), Contains(content + " line 2: feature 2 of paper 'b' is '1e39', beyond what a 32-bit "
                                                     "float holds (magnitudes up to 3.4e38)"));
  }
  SECTION("a paper listed twice") {
    const CitationFiles files = write_graph(dir, "a\t1\t0\tTheory\nb\t0\t1\tAI\na\t1\t1\tAI\n", "a\tb\n");
    CHECK_THAT(read_error(files), Contains(content + " line 3: paper 'a' is listed twice (first on line 1"));
  }
  SECTION("a citation line with three fields") {
    const CitationFiles files = write_graph(dir, kContent, "p31\tp2\tp4\n");
    CHECK_THAT(read_error(files), Contains(cites + " line 1: 3 fields; expected two paper ids"));
  }
  SECTION("an empty content file") {
    CHECK_THAT(read_error(write_graph(dir, "\n", "")), Contains("'" + content + "' lists no papers"));
  }
  SECTION("a folder without the pair of files") {
    write_file(dir.file("g.content"), kContent);
    CHECK_THROWS_WITH(find_citation_files(dir.path()), Contains("found g.content without its .cites"));
  }
}

TEST_CASE("the Planetoid split takes 20 nodes per class, then validation and test nodes, by seed", "[gcn][data]") {
  const CitationGraph g = make_community_graph(GraphSpec{}, 3);
  const NodeSplit split = planetoid_split(g.labels, g.num_classes(), 20, 500, 1000, 7);
  REQUIRE(split.train.size(0) == 140);
  CHECK(split.val.size(0) == 500);
  CHECK(split.test.size(0) == 1000);
  CHECK(at::equal(at::bincount(g.labels.index_select(0, split.train)), at::full({7}, 20, at::kLong)));
  std::set<int64_t> seen;
  for (const at::Tensor& part : {split.train, split.val, split.test}) {
    for (int64_t i = 0; i < part.size(0); ++i) seen.insert(part[i].item<int64_t>());
  }
  CHECK(seen.size() == 1640);  // disjoint
  CHECK(at::equal(planetoid_split(g.labels, 7, 20, 500, 1000, 7).train, split.train));
  CHECK_FALSE(at::equal(planetoid_split(g.labels, 7, 20, 500, 1000, 8).train, split.train));
  CHECK_THROWS_WITH(planetoid_split(g.labels, 7, 20, 2000, 1000, 7), Contains("too few for 2000 validation and 1000 test"));
  CHECK_THROWS_WITH(planetoid_split(g.labels, 7, 400, 0, 0, 7), Contains("fewer than the 400 labelled training nodes"));
}

TEST_CASE("the normalised adjacency is D^-1/2 (A + I) D^-1/2 of the undirected 0/1 graph", "[gcn][data]") {
  test::TempDir dir;
  const CitationGraph g = read_citation_graph(write_graph(dir, kContent, kCites), false);
  const at::Tensor a_hat = normalized_adjacency(g.edges, g.num_nodes()).to_dense();
  // By hand: edges 0-1, 1-2 (listed twice), 3-3 (a self-citation), then self-loops everywhere.
  at::Tensor a = at::eye(5, at::kFloat);
  for (auto [i, j] : {std::pair{0, 1}, std::pair{1, 2}}) {
    a[i][j] = 1;
    a[j][i] = 1;
  }
  const at::Tensor d = a.sum(1).rsqrt();
  const at::Tensor expected = d.unsqueeze(1) * a * d.unsqueeze(0);
  CHECK(at::allclose(a_hat, expected, 1e-6, 1e-7));
  CHECK(at::allclose(row_normalized(g.features).sum(1), at::tensor({1, 1, 1, 1, 0}, at::kFloat)));
}

TEST_CASE("generated community graphs are deterministic and homophilous", "[gcn][data]") {
  const CitationGraph a = make_community_graph(GraphSpec{}, 5);
  const CitationGraph b = make_community_graph(GraphSpec{}, 5);
  CHECK(at::equal(a.edges, b.edges));
  CHECK(at::equal(a.features, b.features));
  CHECK(a.num_nodes() == 2708);
  CHECK(a.features.size(1) == 1433);
  const at::Tensor same = a.labels.index_select(0, a.edges[0]) == a.labels.index_select(0, a.edges[1]);
  const double homophily = same.to(at::kDouble).mean().item<double>();
  CHECK(homophily > 0.75);
  CHECK(homophily < 0.9);
}

TEST_CASE("the GCN has the paper's shapes and computes its formula", "[gcn][model]") {
  at::manual_seed(0);
  const CitationGraph g = make_community_graph(GraphSpec{200, 30, 4}, 1);
  const at::Tensor x = row_normalized(g.features);
  const at::Tensor adjacency = normalized_adjacency(g.edges, g.num_nodes());
  Gcn model(x, adjacency, 16, 4, 0.5);
  int64_t count = 0;
  for (const at::Tensor& p : model.parameters()) count += p.numel();
  CHECK(count == 30 * 16 + 16 + 16 * 4 + 4);
  // Cora's sizes: 1433 words, 7 classes (as PyTorch Geometric's GCN example reports: 23,063).
  Gcn cora(at::zeros({3, 1433}), normalized_adjacency(at::zeros({2, 0}, at::kLong), 3), 16, 7, 0.5);
  count = 0;
  for (const at::Tensor& p : cora.parameters()) count += p.numel();
  CHECK(count == 23063);

  model.eval();
  const at::Tensor nodes = at::tensor({3, 0, 199}, at::kLong);
  const at::Tensor out = model.forward(nodes);
  const auto named = model.named_parameters();
  const at::Tensor dense = adjacency.to_dense();
  const at::Tensor h = at::relu(at::mm(dense, at::mm(x, named["conv1.weight"])) + named["conv1.bias"]);
  const at::Tensor logits = at::mm(dense, at::mm(h, named["conv2.weight"])) + named["conv2.bias"];
  CHECK(at::allclose(out, at::log_softmax(logits, 1).index_select(0, nodes), 1e-5, 1e-6));
  // Under bf16 autocast the sparse products stay fp32 (CUDA has no 16-bit sparse-dense product): the
  // same output as without it.
  {
    AutocastScope bf16(at::kCPU, Precision::kBf16);
    const at::Tensor mixed = model.forward(nodes);
    CHECK(mixed.scalar_type() == at::kFloat);
    CHECK(at::allclose(mixed, out, 1e-5, 1e-6));
  }
  // Training mode drops features and hidden units.
  model.train();
  CHECK_FALSE(at::allclose(model.forward(nodes), out));
}

TEST_CASE("the gcn workload's data: node batches, the graph the model holds, the split's sizes", "[gcn]") {
  GcnOptions options;
  options.synthetic = GraphSpec{300, 40, 3};
  const auto workload = make_gcn_workload(options);
  TrainConfig config;
  config.workload = "gcn";
  config.data.synthetic = true;
  auto& split = config.workload_options.edit<GcnSplitOptions>();
  split.val_nodes = 50;
  split.test_nodes = 100;
  const WorkloadData data = workload->load_data(config);
  CHECK(data.num_classes == 3);
  CHECK(data.train->size() == 60);
  CHECK(data.test->size() == 100);
  const std::vector<NamedModule> modules = workload->make_modules(data, config);
  REQUIRE(modules.size() == 1);
  // The model classifies every node of the graph it was built with.
  {
    at::NoGradGuard no_grad;
    modules[0].module->eval();
    CHECK(std::dynamic_pointer_cast<Model>(modules[0].module)->forward(at::arange(300)).sizes() == at::IntArrayRef{300, 3});
  }
  CHECK(modules[0].no_weight_decay == std::vector<std::string>{"conv2.weight", "conv2.bias", "conv1.bias"});
  Batch batch;
  REQUIRE(data.train->stream({0, 1, 2}, 3, std::nullopt)->next(batch));
  CHECK(batch.inputs.scalar_type() == at::kLong);
  CHECK(batch.targets.sizes() == at::IntArrayRef{3});
}
