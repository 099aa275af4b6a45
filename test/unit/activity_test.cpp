// What a rank reports about itself, and the heartbeat's timing as it follows comm.timeout_s.
#include "test/support/catch.h"

#include <thread>

#include "runtime/bootstrap/heartbeat.h"
#include "runtime/util/activity.h"

using namespace dtrain;

TEST_CASE("a rank's activity reads as phase, epoch, step and the collective it waits in", "[activity]") {
  Activity activity;
  CHECK(describe(activity.snapshot()) == "starting");
  activity.set_phase(Phase::kTraining, 2);
  activity.set_step(17);
  CHECK(describe(activity.snapshot()) == "training, epoch 2, step 17");
  {
    WaitScope wait(&activity, "MPI_Iallreduce of 4724264 bytes");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const ActivitySnapshot s = activity.snapshot();
    CHECK(s.waiting_for == "MPI_Iallreduce of 4724264 bytes");
    CHECK(s.waiting_s >= 0.02);
    CHECK_THAT(describe(s), Catch::Matchers::StartsWith("training, epoch 2, step 17; waiting 0.") &&
                                Catch::Matchers::EndsWith(" s in MPI_Iallreduce of 4724264 bytes"));
  }
  CHECK(activity.snapshot().waiting_for.empty());
  activity.set_phase(Phase::kCheckpointing, 3);
  CHECK(describe(activity.snapshot()) == "checkpointing, epoch 3");
  WaitScope nothing(nullptr, "ignored");  // no activity to mark: a no-op
}

TEST_CASE("heartbeat timing follows the collective timeout", "[activity]") {
  // The default five minutes: a report a second, silence noticed after 10 s, lagging ranks named after 60 s.
  const HeartbeatOptions standard = heartbeat_options_for(300.0);
  CHECK(standard.period_s == 1.0);
  CHECK(standard.stale_after_s == 10.0);
  CHECK(standard.warn_after_s == 60.0);
  CHECK(standard.timeout_s == 300.0);
  // Short timeouts (tests): faster reports, but a frozen rank is called silent before anyone is named as
  // lagging, so a stopped process is never reported as "alive but elsewhere".
  const HeartbeatOptions quick = heartbeat_options_for(10.0);
  CHECK(quick.period_s == Approx(1.0 / 3.0));
  CHECK(quick.stale_after_s == Approx(10.0 / 3.0));
  CHECK(quick.warn_after_s > quick.stale_after_s);
  CHECK(heartbeat_options_for(1.0).period_s == 0.1);
  CHECK(heartbeat_options_for(1.0).stale_after_s == 2.0);
}
