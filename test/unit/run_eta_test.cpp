// The whole run's time left (runtime/train/run_eta.h) against runs whose step and evaluation times are
// known exactly: a clock the test advances.
#include <catch2/catch.hpp>

#include "runtime/train/run_eta.h"

using namespace dtrain;

namespace {

struct FakeClock {
  double now = 1000.0;
  std::function<double()> fn() {
    return [this] { return now; };
  }
};

}  // namespace

TEST_CASE("the run's time left is its steps and epoch ends left at their measured times", "[train][eta]") {
  FakeClock clock;
  // 3 epochs of 10 steps; 100 test samples, 10 training samples a step.
  RunEta eta(RunPlan{3, 10, 100, 10}, clock.fn());
  eta.training_begins(1, 0, 10);
  clock.now += 5.0;  // the run's first step: start-up work, not timed
  eta.step_done(1);
  CHECK_FALSE(eta.left_s().has_value());
  clock.now += 1.0;  // then 1 s a step
  eta.step_done(2);
  // Before an epoch's end is timed, one evaluation is a third of a step per sample: 100 / 10 / 3 steps.
  const double eval_estimate = 100.0 / 10.0 / 3.0;
  REQUIRE(eta.left_s().has_value());
  CHECK(*eta.left_s() == Approx(8 * 1.0 + eval_estimate + 2 * (10 * 1.0 + eval_estimate)));
  for (int64_t step = 3; step <= 10; ++step) {
    clock.now += 1.0;
    eta.step_done(step);
  }
  eta.training_ended();
  clock.now += 2.0;  // inside the evaluation: what is left of its estimate
  CHECK(*eta.left_s() == Approx(eval_estimate - 2.0 + 2 * (10 + eval_estimate)));
  clock.now += 2.0;  // the end of epoch 1 took 4 s: the measured figure replaces the estimate
  eta.epoch_ended();
  CHECK(*eta.left_s() == Approx(2 * (10 + 4.0)));

  eta.training_begins(2, 0, 10);
  clock.now += 3.0;  // a slower step now counts: 12 s over 10 timed steps (the run's first is not)
  eta.step_done(1);
  const double step_s = 12.0 / 10.0;
  CHECK(*eta.left_s() == Approx(9 * step_s + 4.0 + 1 * (10 * step_s + 4.0)));
}

TEST_CASE("the run's time left counts only what a resumed run has left", "[train][eta]") {
  FakeClock clock;
  // Resumed inside epoch 2 of 3 after 6 of its 10 steps, at 2 s a step.
  RunEta eta(RunPlan{3, 10, 100, 10}, clock.fn());
  eta.training_begins(2, 6, 10);
  clock.now += 9.0;
  eta.step_done(7);
  clock.now += 2.0;
  eta.step_done(8);
  const double eval_estimate = 100.0 * 2.0 / 10.0 / 3.0;
  CHECK(*eta.left_s() == Approx(2 * 2.0 + eval_estimate + 1 * (10 * 2.0 + eval_estimate)));
}

TEST_CASE("the run's time left follows train.max_steps and ends at zero", "[train][eta]") {
  FakeClock clock;
  // train.max_steps 4: every epoch is 4 steps, whatever the dataset holds.
  RunEta eta(RunPlan{2, 4, 0, 8}, clock.fn());
  eta.training_begins(1, 0, 4);
  for (int64_t step = 1; step <= 4; ++step) {
    clock.now += 0.5;
    eta.step_done(step);
  }
  CHECK(*eta.left_s() == Approx(0.0 + 0.0 + 1 * (4 * 0.5)));  // no test samples: no evaluation time
  eta.training_ended();
  eta.epoch_ended();
  eta.training_begins(2, 0, 4);
  for (int64_t step = 1; step <= 4; ++step) {
    clock.now += 0.5;
    eta.step_done(step);
  }
  eta.training_ended();
  eta.epoch_ended();
  CHECK(*eta.left_s() == Approx(0.0));
}
