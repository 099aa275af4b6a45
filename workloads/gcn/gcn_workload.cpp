#include "workloads/gcn/gcn_workload.h"

#include <ATen/ATen.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>

#include "runtime/data/citation_graph.h"
#include "runtime/util/check.h"
#include "runtime/util/error.h"
#include "runtime/util/strings.h"
#include "workloads/gcn/gcn.h"
#include "workloads/gcn/graph_inputs.h"

namespace dtrain {
namespace {

// What the GCN's outputs mean on this graph: its classes in label order, and the graph itself (an FNV-1a
// digest of its papers' ids, their labels and the citations: the same on every build and machine).
std::string graph_labels(const CitationGraph& graph) {
  uint64_t digest = 0xcbf29ce484222325ULL;
  const auto mix = [&digest](const void* data, size_t size) {
    for (size_t i = 0; i < size; ++i) digest = (digest ^ static_cast<const unsigned char*>(data)[i]) * 0x100000001b3ULL;
  };
  for (const std::string& id : graph.node_ids) mix(id.c_str(), id.size() + 1);
  const at::Tensor labels = graph.labels.contiguous();
  const at::Tensor edges = graph.edges.contiguous();
  mix(labels.data_ptr(), static_cast<size_t>(labels.nbytes()));
  mix(edges.data_ptr(), static_cast<size_t>(edges.nbytes()));
  char hex[24];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(digest));
  return "classes: " + join(graph.class_names, ", ") + "\ngraph: " + std::to_string(graph.num_nodes()) + " papers, " +
         std::to_string(graph.edges.size(1)) + " citations, digest " + hex;
}

// Where scripts/fetch_data.sh cora puts the graph when data.dir is not set.
constexpr const char* kCoraDir = "data/cora";

// The graph the model is built with (WorkloadData::context): row-normalised features and the normalised
// adjacency.
struct GraphInputs {
  at::Tensor features;
  at::Tensor adjacency;
};

// A split's nodes as a dataset: the inputs of a batch are node indices, its targets their classes.
std::shared_ptr<TensorDataset> node_dataset(const at::Tensor& nodes, const at::Tensor& labels) {
  auto dataset = std::make_shared<TensorDataset>();
  dataset->inputs = nodes;
  dataset->targets = labels.index_select(0, nodes);
  return dataset;
}

class GcnWorkload final : public ClassifierWorkload {
 public:
  explicit GcnWorkload(GcnOptions options) : options_(std::move(options)) {}

  std::string name() const override { return "gcn"; }

  std::string data_format() const override {
    return std::string("a citation graph in the LINQS format, NAME.content (id, binary features, label) and "
                       "NAME.cites (cited id, citing id) in --data-dir; default ") +
           kCoraDir + " (Cora: 2708 papers, 1433 words, 7 classes); Planetoid split (gcn.*): 20 labelled nodes per "
           "class, 500 validation, 1000 test, drawn from --seed";
  }

  // Kipf & Welling: Adam at 0.01, weight decay 5e-4 on the first layer, 200 epochs, the whole graph in
  // every step (the batch covers every rank's share of the training nodes).
  void apply_defaults(TrainConfig& config) const override {
    TrainOptions& t = config.train;
    t.epochs = 200;
    t.batch_size = 140;  // Cora's 7 x 20 labelled nodes: one full-graph step per epoch at any world size
    t.eval_batch_size = GcnSplitOptions{}.test_nodes;
    t.optimizer = OptimizerKind::kAdam;
    t.lr = 0.01;
    t.weight_decay = 5e-4;
    config.log.interval = 0;  // one step per epoch: the epoch line says it all
  }

  std::vector<NamedModule> make_modules(const WorkloadData& data, const TrainConfig&) const override {
    NamedModule model{"model", make_model(data)};
    model.no_weight_decay = {"conv2.weight", "conv2.bias", "conv1.bias"};
    return {model};
  }

  std::shared_ptr<Model> make_model(const WorkloadData& data) const override {
    const auto* graph = std::any_cast<GraphInputs>(&data.context);
    DTRAIN_CHECK(graph != nullptr, Error, "the gcn workload's data has no graph (features and adjacency)");
    return std::make_shared<Gcn>(graph->features, graph->adjacency, options_.hidden, data.num_classes,
                                 options_.dropout);
  }

  Outputs outputs() const override { return Outputs::kLogProbabilities; }
  // Both graph convolutions run over every node whatever the batch: the batch picks the labelled nodes.
  bool whole_input_passes() const override { return true; }

  WorkloadData load_data(const TrainConfig& config) const override {
    const DataOptions& options = config.data;
    const auto seed = static_cast<uint64_t>(config.train.seed);
    CitationGraph graph;
    std::string description;
    if (options.synthetic) {
      graph = make_community_graph(options_.synthetic, seed);
      description = "a generated citation graph with " + std::to_string(options_.synthetic.classes) +
                    " communities (seed " + std::to_string(seed) + ")";
    } else {
      std::string dir = options.dir;
      if (dir.empty()) {
        std::error_code ec;
        if (!std::filesystem::exists(kCoraDir, ec)) {
          throw DataError(std::string("no data for the gcn workload: data.dir is not set and '") + kCoraDir +
                          "' does not exist. Run scripts/fetch_data.sh cora (it downloads to data/), pass --data-dir DIR "
                          "with NAME.content and NAME.cites, or use --synthetic.");
        }
        dir = kCoraDir;
      }
      const CitationFiles files = find_citation_files(dir);
      // CiteSeer's published cites file names papers its content file lacks; everyone drops those.
      const std::string stem = std::filesystem::path(files.content).stem().string();
      graph = read_citation_graph(files, /*drop_dangling=*/stem == "citeseer");
      description = "citation graph " + files.content + " and .cites";
      if (graph.dropped_edges > 0) {
        description += " (" + std::to_string(graph.dropped_edges) + " citations of absent papers left out)";
      }
    }
    const auto& sizes = config.workload_options.get<GcnSplitOptions>();
    const NodeSplit split = planetoid_split(graph.labels, graph.num_classes(), sizes.train_per_class,
                                            sizes.val_nodes, sizes.test_nodes, seed);
    WorkloadData data;
    data.num_classes = graph.num_classes();
    data.labels = graph_labels(graph);
    data.train = node_dataset(split.train, graph.labels);
    data.test = node_dataset(split.test, graph.labels);
    data.context = GraphInputs{row_normalized(graph.features), normalized_adjacency(graph.edges, graph.num_nodes())};
    data.description = description + ": " + std::to_string(graph.num_nodes()) + " nodes, " +
                       std::to_string(graph.edges.size(1)) + " citations, " + std::to_string(graph.features.size(1)) +
                       " features, " + std::to_string(graph.num_classes()) + " classes; " +
                       std::to_string(split.train.size(0)) + " training, " + std::to_string(split.val.size(0)) +
                       " validation (held out), " + std::to_string(split.test.size(0)) + " test nodes";
    return data;
  }

 private:
  GcnOptions options_;
};

}  // namespace

std::unique_ptr<Workload> make_gcn_workload(GcnOptions options) { return std::make_unique<GcnWorkload>(std::move(options)); }

std::vector<ConfigField> gcn_config_fields() {
  return {
      int_field("gcn.train_per_class", "train-per-class", "the Planetoid split: labelled training nodes of each class",
                option_ref(&GcnSplitOptions::train_per_class), 1, kMaxConfigCount),
      int_field("gcn.val_nodes", "val-nodes", "the Planetoid split: validation nodes, held out from training",
                option_ref(&GcnSplitOptions::val_nodes), 0, kMaxConfigCount),
      int_field("gcn.test_nodes", "test-nodes", "the Planetoid split: test nodes, which evaluation scores",
                option_ref(&GcnSplitOptions::test_nodes), 1, kMaxConfigCount),
  };
}

void register_gcn_workloads(WorkloadRegistry& registry) {
  registry.add("gcn", "Kipf & Welling's two-layer GCN on a citation graph (Cora by default), Planetoid split",
               [] { return make_gcn_workload(); }, gcn_config_fields());
}

}  // namespace dtrain
