// The straggler scores (rank_waits.h): what each rank's waits say about who kept the others waiting.
#include "test/support/catch.h"

#include "runtime/comm/local_communicator.h"
#include "runtime/monitor/rank_waits.h"

using namespace dtrain;

TEST_CASE("the rank that waited least scores what it cost the others", "[monitor]") {
  // Ranks 0 and 2 waited 3 s of a 10 s epoch for rank 1, which waited 0.5 s (the allreduce's own time).
  const std::vector<double> scores = straggler_scores({3.5, 0.5, 3.4}, 10.0);
  REQUIRE(scores.size() == 3);
  CHECK(scores[0] == Approx(0.0));
  CHECK(scores[1] == Approx(0.30));
  CHECK(scores[2] == Approx(0.01));
  CHECK(straggler_note(scores, {"node1", "node2", "node3"}, 0.10) ==
        "rank 1 (node2) made the others wait 30% of the epoch's training time (straggler score 0.30): it computes "
        "slower than its peers (a slower node, a smaller CPU share, or other load on it)");
}

TEST_CASE("ranks alike score near 0, and no note is written below the threshold", "[monitor]") {
  const std::vector<double> scores = straggler_scores({1.00, 1.02, 0.99, 1.01}, 20.0);
  for (double s : scores) CHECK(s < 0.01);
  CHECK(straggler_note(scores, {"a", "b", "c", "d"}, 0.10).empty());
}

TEST_CASE("one rank, no training time or unknown hosts give defined scores", "[monitor]") {
  CHECK(straggler_scores({2.0}, 10.0) == std::vector<double>{0.0});
  CHECK(straggler_scores({2.0, 0.0}, 0.0) == std::vector<double>{0.0, 0.0});
  // A score never exceeds 1, even where a wait outlasted the training time it is compared with.
  CHECK(straggler_scores({30.0, 0.0}, 10.0)[1] == Approx(1.0));
  CHECK(straggler_note({0.0, 0.5}, {}, 0.10).rfind("rank 1 made the others wait 50%", 0) == 0);
  LocalCommunicator comm;
  const RankWaits waits = gather_rank_waits(comm, 1.5, 0.1, 10.0);
  CHECK(waits.exposed_comm_s == std::vector<double>{1.5});
  CHECK(waits.wait_cpu_s == std::vector<double>{0.1});
  CHECK(waits.straggler == std::vector<double>{0.0});
}
