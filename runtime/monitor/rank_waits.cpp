#include "runtime/monitor/rank_waits.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "runtime/comm/communicator.h"

namespace dtrain {

std::vector<double> straggler_scores(const std::vector<double>& exposed_comm_s, double train_s) {
  std::vector<double> scores(exposed_comm_s.size(), 0.0);
  if (exposed_comm_s.size() < 2 || !(train_s > 0)) return scores;
  const double most = *std::max_element(exposed_comm_s.begin(), exposed_comm_s.end());
  for (size_t r = 0; r < scores.size(); ++r) scores[r] = std::clamp((most - exposed_comm_s[r]) / train_s, 0.0, 1.0);
  return scores;
}

RankWaits gather_rank_waits(Communicator& comm, double exposed_comm_s, double wait_cpu_s, double train_s) {
  const at::Tensor mine = at::tensor({exposed_comm_s, wait_cpu_s, train_s}, at::kDouble);
  const at::Tensor all = comm.allgather(mine).contiguous();  // [world, 3]
  const auto rows = all.accessor<double, 2>();
  RankWaits waits;
  double longest_train_s = 0.0;
  for (int64_t r = 0; r < all.size(0); ++r) {
    waits.exposed_comm_s.push_back(rows[r][0]);
    waits.wait_cpu_s.push_back(rows[r][1]);
    longest_train_s = std::max(longest_train_s, rows[r][2]);
  }
  waits.straggler = straggler_scores(waits.exposed_comm_s, longest_train_s);
  return waits;
}

std::string straggler_note(const std::vector<double>& straggler, const std::vector<std::string>& rank_hosts,
                           double threshold) {
  if (straggler.empty()) return "";
  const size_t worst = static_cast<size_t>(std::max_element(straggler.begin(), straggler.end()) - straggler.begin());
  if (!(straggler[worst] >= threshold)) return "";
  std::string text = "rank " + std::to_string(worst);
  if (worst < rank_hosts.size()) text += " (" + rank_hosts[worst] + ")";
  char score[16];
  std::snprintf(score, sizeof score, "%.2f", straggler[worst]);
  return text + " made the others wait " + std::to_string(std::lround(straggler[worst] * 100.0)) +
         "% of the epoch's training time (straggler score " + score + "): it computes slower than its peers "
         "(a slower node, a smaller CPU share, or other load on it)";
}

}  // namespace dtrain
