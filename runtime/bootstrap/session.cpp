#include "runtime/bootstrap/session.h"

#include <algorithm>

namespace dtrain {

std::vector<std::string> Session::unique_hosts() const {
  std::vector<std::string> hosts;
  for (const std::string& host : hostnames_) {
    if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
  }
  return hosts;
}

}  // namespace dtrain
