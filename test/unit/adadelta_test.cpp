#include "test/support/catch.h"

#include <ATen/ATen.h>

#include <cmath>

#include "runtime/train/adadelta.h"
#include "runtime/train/optimizer_state.h"

using namespace dtrain;

TEST_CASE("Adadelta follows the published update rule", "[train]") {
  at::Tensor p = at::tensor(std::vector<float>{1.0f, -2.0f}).set_requires_grad(true);
  Adadelta optimizer({p}, AdadeltaOptions(1.0));
  double square_avg[2] = {0, 0};
  double acc_delta[2] = {0, 0};
  double value[2] = {1.0, -2.0};
  const double rho = 0.9;
  const double eps = 1e-6;
  for (int step = 0; step < 3; ++step) {
    const double grads[2] = {0.5 * (step + 1), -0.25};
    p.mutable_grad() = at::tensor(std::vector<float>{static_cast<float>(grads[0]), static_cast<float>(grads[1])});
    optimizer.step();
    for (int i = 0; i < 2; ++i) {
      square_avg[i] = rho * square_avg[i] + (1 - rho) * grads[i] * grads[i];
      const double delta = std::sqrt(acc_delta[i] + eps) / std::sqrt(square_avg[i] + eps) * grads[i];
      acc_delta[i] = rho * acc_delta[i] + (1 - rho) * delta * delta;
      value[i] -= delta;
      CHECK(p[i].item<double>() == Approx(value[i]).epsilon(1e-5));
    }
  }
}

TEST_CASE("Adadelta state survives save and load by name", "[train]") {
  at::Tensor p = at::ones({3}).set_requires_grad(true);
  Adadelta first({p}, AdadeltaOptions(1.0));
  p.mutable_grad() = at::full({3}, 0.3);
  first.step();
  // What a checkpoint holds of it: each state tensor by key (copies), and the options.
  std::map<std::string, at::Tensor> saved;
  for_each_optimizer_state(first, [](const at::Tensor& t) { return t.clone(); },
                           [&](const at::Tensor&, const std::string& key, at::Tensor t) { saved[key] = t; });
  CHECK(saved.size() == 3);
  CHECK(saved.at("step").item<int64_t>() == 1);

  at::Tensor p_a = p.detach().clone().set_requires_grad(true);
  at::Tensor p_b = p.detach().clone().set_requires_grad(true);
  Adadelta resumed({p_a}, AdadeltaOptions(0.5));
  set_optimizer_options(resumed, optimizer_options(first), "test");
  set_optimizer_state(resumed, {{p_a, saved}});
  p_a.mutable_grad() = at::full({3}, 0.3);
  resumed.step();
  first.step();  // continues from the same state
  CHECK(at::equal(p_a, p));
  Adadelta fresh({p_b}, AdadeltaOptions(1.0));
  p_b.mutable_grad() = at::full({3}, 0.3);
  fresh.step();
  CHECK_FALSE(at::equal(p_b, p));  // without the state the step differs: the state mattered
}
