// Where the waiting goes, per rank: each rank's exposed communication (the wall time it waited for the
// gradient allreduce after its backward) and the CPU its process used meanwhile, gathered
// at the epoch's end in one small allgather, and the straggler score that names a slow rank instead of
// averaging it away.
//
// A synchronous allreduce completes for everyone once the last rank has joined it, so a rank that
// reaches it later waits that much less: over an epoch, (most any rank waited - what this rank waited)
// is how much the others waited for it, and over the epoch's training time, the share of each step it
// cost them. The earliest rank scores 0; on a cluster of equal nodes all score near 0.
#pragma once

#include <string>
#include <vector>

namespace dtrain {

class Communicator;

struct RankWaits {
  std::vector<double> exposed_comm_s;  // index = rank
  std::vector<double> wait_cpu_s;
  std::vector<double> straggler;       // in [0, 1]
};

// Collective: every rank passes its own epoch sums and its training time, and gets every rank's figures.
RankWaits gather_rank_waits(Communicator& comm, double exposed_comm_s, double wait_cpu_s, double train_s);

// The scores from the ranks' waits and the epoch's training time (the longest of the ranks').
std::vector<double> straggler_scores(const std::vector<double>& exposed_comm_s, double train_s);

// "rank 3 (node4) made the others wait 23% of the epoch's training time", or "" when no rank's score
// reaches `threshold`.
std::string straggler_note(const std::vector<double>& straggler, const std::vector<std::string>& rank_hosts,
                           double threshold);

}  // namespace dtrain
