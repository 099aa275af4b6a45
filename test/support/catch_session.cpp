// Catch2's implementation, compiled once for every test binary (the single header's implementation is
// about half a minute of compiling on 2 cores; each binary's main calls run_catch_session).
#define CATCH_CONFIG_RUNNER
#include "test/support/catch.h"

#include "test/support/catch_session.h"

namespace dtrain::test {

int run_catch_session(int argc, char** argv, const CatchRunOptions& options) {
  Catch::Session session;
  if (const int status = session.applyCommandLine(argc, argv); status != 0) return status;
  if (!options.report_path.empty()) {
    session.configData().outputFilename = options.report_path;
    session.configData().useColour = Catch::UseColour::No;
  }
  return session.run();
}

}  // namespace dtrain::test
