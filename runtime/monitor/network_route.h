// Which network a multi-host run's traffic takes: the interface, address and MTU this host's kernel
// routes packets to another host through. For the run log's `network` record, so a study can tell a
// run over a cluster's fabric from one over a management network or an overlay.
#pragma once

#include <optional>
#include <string>

namespace dtrain {

struct NetworkRoute {
  std::string interface;  // "eth0", "vxlan0", "ib0"
  std::string address;    // this host's address on it, "10.213.0.1"
  int mtu = 0;            // 0: unknown
};

// The route from this host to `host` (a name the resolver knows, or an address), found the way the
// kernel would send a packet there: a UDP socket is connected to it (which sends nothing) and its local
// address is looked up among the interfaces. nullopt, with the reason in `why_not`, when the name does
// not resolve or no route leads there. Local, blocking on name resolution only.
std::optional<NetworkRoute> route_to_host(const std::string& host, std::string& why_not);

}  // namespace dtrain
