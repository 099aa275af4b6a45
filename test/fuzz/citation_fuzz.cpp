// LINQS citation graphs (Cora, CiteSeer): the input up to its first NUL byte is NAME.content, the rest
// NAME.cites; its length's parity picks whether dangling citations are dropped (CiteSeer) or refused.
#include <ATen/ATen.h>

#include <cstdlib>
#include <cstring>

#include "runtime/data/citation_graph.h"
#include "runtime/util/error.h"
#include "test/fuzz/fuzz_target.h"

namespace dtrain::fuzz::citation_target {
namespace {

void write_seeds(const std::string& dir) {
  const std::string content =
      "31336\t0\t1\t0\t1\tNeural_Networks\n"
      "1061127\t1\t0\t0\t1\tRule_Learning\n"
      "1106406\t0\t0\t1\t0\tReinforcement_Learning\n"
      "13195\t1\t1\t0\t0\tNeural_Networks\n";
  const std::string cites = "31336\t1061127\n1061127\t1106406\n13195\t31336\n31336\t13195\n";
  write_bytes(dir + "/cora", content + std::string(1, '\0') + cites);
  write_bytes(dir + "/citeseer-dangling", content + std::string(1, '\0') + cites + "31336\tgone-paper\n");
  write_bytes(dir + "/bom", "\xEF\xBB\xBF" + content + std::string(1, '\0') + cites);
}

int test_one_input(const uint8_t* data, size_t size) {
  const char* text = reinterpret_cast<const char*>(data);
  const void* nul = std::memchr(data, 0, size);
  const size_t split = nul ? static_cast<size_t>(static_cast<const uint8_t*>(nul) - data) : size;
  const std::string dir = dtrain::fuzz::scratch_dir();
  dtrain::fuzz::write_bytes(dir + "/graph.content", text, split);
  dtrain::fuzz::write_bytes(dir + "/graph.cites", split < size ? text + split + 1 : text, split < size ? size - split - 1 : 0);
  try {
    const dtrain::CitationGraph g = dtrain::read_citation_graph(dtrain::find_citation_files(dir), size % 2 == 1);
    const int64_t n = g.num_nodes();
    if (g.features.size(0) != n || g.labels.size(0) != n || g.edges.size(0) != 2) std::abort();
    if (n > 0 && (g.labels.min().item<int64_t>() < 0 || g.labels.max().item<int64_t>() >= g.num_classes())) std::abort();
    if (g.edges.size(1) > 0 && (g.edges.min().item<int64_t>() < 0 || g.edges.max().item<int64_t>() >= n)) std::abort();
  } catch (const dtrain::DataError& e) {
    dtrain::fuzz::refused(e);
  }
  return 0;
}

}  // namespace
}  // namespace dtrain::fuzz::citation_target

DTRAIN_FUZZ_TARGET(citation, dtrain::fuzz::citation_target::write_seeds, dtrain::fuzz::citation_target::test_one_input)
