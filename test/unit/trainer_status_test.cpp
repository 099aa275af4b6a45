// The request body dtrain posts to Kubeflow Trainer's status server (runtime/monitor/trainer_status.h):
// the shape of Trainer's UpdateTrainJobStatusRequest and the limits its TrainJob status schema sets. The
// HTTP side runs against a local HTTPS server in test/e2e/trainer_status_test.sh.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <string>

#include "runtime/monitor/trainer_status.h"

using namespace dtrain;

TEST_CASE("a progress update is Trainer's UpdateTrainJobStatusRequest", "[monitor][trainer_status]") {
  TrainerStatus status;
  status.progress_percent = 45;
  status.remaining_s = 120;
  status.metrics = {{"loss", "0.15"}, {"accuracy", "0.92"}};
  const auto body = nlohmann::json::parse(trainer_status_body(status, 1795813200));  // 2026-11-27T21:00:00Z
  CHECK(body == nlohmann::json::parse(R"({"trainerStatus": {"progressPercentage": 45, "estimatedRemainingSeconds": 120,
      "metrics": [{"name": "loss", "value": "0.15"}, {"name": "accuracy", "value": "0.92"}],
      "lastUpdatedTime": "2026-11-27T21:00:00Z"}})"));
}

TEST_CASE("a progress update stays inside Trainer's limits", "[monitor][trainer_status]") {
  TrainerStatus status;
  status.progress_percent = 130;
  status.remaining_s = int64_t{1} << 40;
  for (int i = 0; i < 300; ++i) status.metrics.emplace_back("metric_" + std::to_string(i), std::string(80, '7'));
  const auto trainer = nlohmann::json::parse(trainer_status_body(status, 0))["trainerStatus"];
  CHECK(trainer["progressPercentage"] == 100);
  CHECK(trainer["estimatedRemainingSeconds"] == 2147483647);
  REQUIRE(trainer["metrics"].size() == 256);
  CHECK(trainer["metrics"][0]["value"].get<std::string>().size() == 64);
  CHECK(trainer["lastUpdatedTime"] == "1970-01-01T00:00:00Z");

  const auto empty = nlohmann::json::parse(trainer_status_body(TrainerStatus{}, 0))["trainerStatus"];
  CHECK(empty == nlohmann::json::parse(R"({"lastUpdatedTime": "1970-01-01T00:00:00Z"})"));  // unknowns left out
}
