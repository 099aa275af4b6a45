// Catch2's implementation, compiled once for every test binary (the single header's implementation is
// about half a minute of compiling on 2 cores; each binary's main calls run_catch_session).
#define CATCH_CONFIG_RUNNER
#include "test/support/catch.h"

#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "test/support/catch_session.h"
#include "test/support/skip.h"

namespace dtrain::test {
namespace {

// The cases run and those that skipped, by name (a case with sections runs once per section).
std::set<std::string>& cases_run() {
  static std::set<std::string> names;
  return names;
}
std::map<std::string, std::string>& cases_skipped() {  // case -> why
  static std::map<std::string, std::string> reasons;
  return reasons;
}

class CaseCounter : public Catch::TestEventListenerBase {
 public:
  using TestEventListenerBase::TestEventListenerBase;
  void testCaseStarting(const Catch::TestCaseInfo& info) override { cases_run().insert(info.name); }
};
CATCH_REGISTER_LISTENER(CaseCounter)

}  // namespace

void note_skip(const std::string& reason) {
  cases_skipped().emplace(Catch::getResultCapture().getCurrentTestName(), reason);
}

int run_catch_session(int argc, char** argv, const CatchRunOptions& options) {
  Catch::Session session;
  if (const int status = session.applyCommandLine(argc, argv); status != 0) return status;
  if (!options.report_path.empty()) {
    session.configData().outputFilename = options.report_path;
    session.configData().useColour = Catch::UseColour::No;
  }
  const int failed = session.run();
  if (options.report_path.empty()) {
    for (const auto& [name, reason] : cases_skipped()) std::printf("SKIP: %s: %s\n", name.c_str(), reason.c_str());
  }
  if (failed == 0 && !cases_run().empty() && cases_skipped().size() == cases_run().size()) return kAllSkipped;
  return failed;
}

}  // namespace dtrain::test
