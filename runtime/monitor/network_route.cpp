#include "runtime/monitor/network_route.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace dtrain {
namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string numeric_address(const sockaddr* address, socklen_t length) {
  char text[NI_MAXHOST] = {};
  if (::getnameinfo(address, length, text, sizeof text, nullptr, 0, NI_NUMERICHOST) != 0) return {};
  return text;
}

bool same_address(const sockaddr* a, const sockaddr* b) {
  if (a == nullptr || b == nullptr || a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr == reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  }
  if (a->sa_family == AF_INET6) {
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr, &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr,
                       sizeof(in6_addr)) == 0;
  }
  return false;
}

}  // namespace

std::optional<NetworkRoute> route_to_host(const std::string& host, std::string& why_not) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (const int code = ::getaddrinfo(host.c_str(), "9", &hints, &found); code != 0) {
    why_not = "host '" + host + "' does not resolve (" + ::gai_strerror(code) + ")";
    return std::nullopt;
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(found, &::freeaddrinfo);

  sockaddr_storage local{};
  socklen_t local_length = sizeof local;
  bool routed = false;
  for (const addrinfo* a = found; a != nullptr && !routed; a = a->ai_next) {
    Fd sock{::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0)};
    if (sock.fd < 0) continue;
    // Connecting a datagram socket only picks the route and source address; no packet leaves.
    if (::connect(sock.fd, a->ai_addr, a->ai_addrlen) != 0) {
      why_not = "no route to host '" + host + "' (" + std::strerror(errno) + ")";
      continue;
    }
    local_length = sizeof local;
    routed = ::getsockname(sock.fd, reinterpret_cast<sockaddr*>(&local), &local_length) == 0;
  }
  if (!routed) {
    if (why_not.empty()) why_not = "no route to host '" + host + "'";
    return std::nullopt;
  }

  NetworkRoute route;
  route.address = numeric_address(reinterpret_cast<const sockaddr*>(&local), local_length);
  ifaddrs* interfaces = nullptr;
  if (::getifaddrs(&interfaces) != 0) {
    why_not = std::string("cannot list the network interfaces (") + std::strerror(errno) + ")";
    return std::nullopt;
  }
  for (const ifaddrs* i = interfaces; i != nullptr; i = i->ifa_next) {
    if (same_address(i->ifa_addr, reinterpret_cast<const sockaddr*>(&local))) {
      route.interface = i->ifa_name;
      break;
    }
  }
  ::freeifaddrs(interfaces);
  if (route.interface.empty()) {
    why_not = "the address " + route.address + " towards '" + host + "' is on no interface";
    return std::nullopt;
  }
  Fd probe{::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)};
  ifreq request{};
  std::strncpy(request.ifr_name, route.interface.c_str(), IFNAMSIZ - 1);
  if (probe.fd >= 0 && ::ioctl(probe.fd, SIOCGIFMTU, &request) == 0) route.mtu = request.ifr_mtu;
  return route;
}

}  // namespace dtrain
