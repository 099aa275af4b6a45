#include "runtime/bootstrap/wait_options.h"

#include <sstream>

namespace dtrain {

std::string timed_out_text(const WaitOptions& wait, const std::string& what) {
  std::ostringstream os;
  os << what << " did not complete within " << wait.timeout_s << " s (comm.timeout_s)";
  return os.str();
}

std::string with_stall(const WaitOptions& wait, std::string message, bool guess) {
  const std::string stall = wait.explain_stall ? wait.explain_stall() : "";
  if (!stall.empty()) return message + "; " + stall;
  if (guess) message += "; a peer rank is dead, stuck or far behind";
  return message;
}

}  // namespace dtrain
