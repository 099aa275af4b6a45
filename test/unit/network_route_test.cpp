#include <catch2/catch.hpp>

#include "runtime/monitor/network_route.h"

using dtrain::NetworkRoute;
using dtrain::route_to_host;

TEST_CASE("the route to a host names the interface, address and MTU the kernel sends through", "[monitor]") {
  std::string why_not;
  const std::optional<NetworkRoute> route = route_to_host("127.0.0.1", why_not);
  REQUIRE(route.has_value());
  CHECK(route->interface == "lo");
  CHECK(route->address == "127.0.0.1");
  CHECK(route->mtu > 0);
  CHECK(why_not.empty());
}

TEST_CASE("a host that does not resolve has no route, and the reason names it", "[monitor]") {
  std::string why_not;
  CHECK_FALSE(route_to_host("no-such-host.invalid", why_not).has_value());
  CHECK_THAT(why_not, Catch::Contains("'no-such-host.invalid' does not resolve"));
}
