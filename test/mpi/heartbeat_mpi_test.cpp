// The heartbeat across real ranks: every rank's activity reaches rank 0, ranks that are not in the
// collective the others wait in are named, a rank's fatal error reaches rank 0 before the job ends, and
// the goodbye leaves nothing in flight. (A rank that stops reporting altogether is tested end to end, by
// freezing a dtrain process: test/e2e/e2e_test.sh.)
#include "test/support/catch.h"

#include <chrono>
#include <functional>
#include <mutex>
#include <thread>

#include "runtime/bootstrap/heartbeat.h"
#include "test/mpi/mpi_test_support.h"
#include "test/support/skip.h"

using namespace dtrain;
using Catch::Matchers::Contains;

namespace {

// Fast timing, so that the tests take a second; the timeouts are long enough for loaded CI machines.
HeartbeatOptions quick() {
  HeartbeatOptions options;
  options.period_s = 0.05;
  options.stale_after_s = 5.0;
  options.warn_after_s = 0.3;
  options.timeout_s = 60.0;
  return options;
}

// Polls `done` for up to 20 s.
bool eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 400; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

constexpr const char* kNoThreadMultiple = "this MPI provides no MPI_THREAD_MULTIPLE, so dtrain runs no heartbeat";

std::string who(int rank) {
  return "rank " + std::to_string(rank) + "/" + std::to_string(test::session().world_size()) + " (host " +
         test::session().hostnames()[static_cast<size_t>(rank)] + ")";
}

}  // namespace

TEST_CASE("the heartbeat brings every rank's activity to rank 0 and ends cleanly", "[heartbeat][mpi]") {
  if (!test::session().has_thread_multiple()) DTRAIN_SKIP(kNoThreadMultiple);
  MpiSession& session = test::session();
  const int last = session.world_size() - 1;
  Activity activity;
  activity.set_phase(Phase::kTraining, 2, 5);
  Heartbeat heartbeat(session, activity, quick(), {});
  if (session.is_root()) {
    const std::string all = "every rank still sends its heartbeat (ranks 0-" + std::to_string(last) +
                            ": training, epoch 2, step 5)";
    CHECK(eventually([&] { return heartbeat.diagnose() == all; }));
    INFO(heartbeat.diagnose());
  } else {
    CHECK(eventually([&] { return heartbeat.diagnose().find("rank 0 reported training, epoch 2, step 5") == 0; }));
    INFO(heartbeat.diagnose());
  }
  test::make_mpi_comm()->barrier();  // every rank has looked before the digests stop
  heartbeat.stop();
}

TEST_CASE("the heartbeat names the rank the others wait for", "[heartbeat][mpi]") {
  if (!test::session().has_thread_multiple()) DTRAIN_SKIP(kNoThreadMultiple);
  MpiSession& session = test::session();
  const int last = session.world_size() - 1;
  Activity activity;
  std::mutex mutex;
  std::vector<std::string> warnings;
  HeartbeatCallbacks callbacks;
  callbacks.on_warning = [&](const std::string& message) {
    std::lock_guard<std::mutex> lock(mutex);
    warnings.push_back(message);
  };
  // Every rank but the last waits in a collective; the last one is busy writing a checkpoint.
  if (session.rank() == last) {
    activity.set_phase(Phase::kCheckpointing, 3);
  } else {
    activity.set_phase(Phase::kTraining, 3, 7);
    activity.begin_wait("MPI_Iallreduce of 64 bytes");
  }
  {
    Heartbeat heartbeat(session, activity, quick(), callbacks);
    const std::string lagging = who(last) + " is alive but not in a collective: checkpointing, epoch 3";
    if (session.is_root()) {
      CHECK(eventually([&] { return heartbeat.diagnose().find(lagging) == 0; }));
      INFO(heartbeat.diagnose());
      CHECK(eventually([&] {
        std::lock_guard<std::mutex> lock(mutex);
        return !warnings.empty();
      }));
      std::lock_guard<std::mutex> lock(mutex);
      if (!warnings.empty()) {
        CHECK_THAT(warnings.front(), Contains(" s in MPI_Iallreduce of 64 bytes; " + lagging));
        CHECK_THAT(warnings.front(), Contains("The wait fails after comm.timeout_s (60.0 s)."));
      }
    } else {
      // Rank 0 tells the others whom it suspects.
      CHECK(eventually([&] { return heartbeat.diagnose().find(lagging) == 0; }));
      INFO(heartbeat.diagnose());
      std::lock_guard<std::mutex> lock(mutex);
      CHECK(warnings.empty());  // only one rank speaks for the job, and rank 0 is alive
    }
    // Rank 0 may see the suspect before its next digest has reached the others: nobody ends the wait
    // (and so the digests) until every rank has looked.
    test::make_mpi_comm()->barrier();
    activity.end_wait();
    heartbeat.stop();
  }
}

TEST_CASE("a rank's fatal error reaches rank 0 before the job ends", "[heartbeat][mpi]") {
  if (!test::session().has_thread_multiple()) DTRAIN_SKIP(kNoThreadMultiple);
  MpiSession& session = test::session();
  const int last = session.world_size() - 1;
  Activity activity;
  activity.set_phase(Phase::kEvaluating, 4);
  std::mutex mutex;
  std::vector<std::string> recorded;
  HeartbeatCallbacks callbacks;
  callbacks.on_peer_fatal = [&](int rank, const std::string& message, const ActivitySnapshot& where) {
    std::lock_guard<std::mutex> lock(mutex);
    recorded.push_back("rank " + std::to_string(rank) + " (" + describe(where) + "): " + message);
  };
  Heartbeat heartbeat(session, activity, quick(), callbacks);
  auto comm = test::make_mpi_comm();
  if (session.rank() == last) CHECK(heartbeat.report_fatal("CUDA error: an illegal memory access was encountered"));
  if (session.is_root()) CHECK_FALSE(heartbeat.report_fatal("rank 0 writes its own record"));
  comm->barrier();
  if (session.is_root()) {
    std::lock_guard<std::mutex> lock(mutex);
    REQUIRE(recorded.size() == 1);
    CHECK(recorded[0] == "rank " + std::to_string(last) +
                             " (evaluating, epoch 4): CUDA error: an illegal memory access was encountered");
  }
  heartbeat.stop();
}
