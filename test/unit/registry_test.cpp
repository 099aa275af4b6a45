#include "test/support/catch.h"

#include "runtime/util/error.h"
#include "workloads/registry.h"

using namespace dtrain;

TEST_CASE("the builtin registry creates mnist and lists it", "[registry]") {
  WorkloadRegistry registry;
  register_builtin_workloads(registry);
  CHECK(registry.contains("mnist"));
  CHECK(registry.create("mnist")->name() == "mnist");
  CHECK(registry.names() == std::vector<std::string>{"mnist"});
}

TEST_CASE("an unknown workload lists the available ones", "[registry]") {
  WorkloadRegistry registry;
  register_builtin_workloads(registry);
  registry.add("cifar10", "test entry", [] { return std::unique_ptr<Workload>(); });
  CHECK_THROWS_WITH(registry.create("mnsit"), "unknown workload 'mnsit'; available: cifar10, mnist");
  CHECK_THROWS_AS(registry.create("mnsit"), ConfigError);
}

TEST_CASE("registering a name twice is an error", "[registry]") {
  WorkloadRegistry registry;
  register_builtin_workloads(registry);
  CHECK_THROWS_WITH(registry.add("mnist", "again", [] { return std::unique_ptr<Workload>(); }),
                    "workload 'mnist' is registered twice");
}
