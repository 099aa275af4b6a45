// Main of the multi-rank tests: MPI init, Catch2, MPI finalize. Run under mpirun with 2 and 3 ranks.
// Catch2's output comes from rank 0 only; a failure on any rank fails the process (and so the test).
#define CATCH_CONFIG_RUNNER
#include "test/support/catch.h"

#include <mpi.h>

#include <cstdio>

#include "test/mpi/mpi_test_support.h"

namespace dtrain::test {
namespace {
MpiSession* g_session = nullptr;
}
MpiSession& session() { return *g_session; }
}  // namespace dtrain::test

int main(int argc, char** argv) {
  dtrain::MpiSession session(&argc, &argv);
  dtrain::test::g_session = &session;
  if (!session.is_root()) {
    // Keep other ranks' reports off stdout but visible: Catch prints failures with their rank's context.
    std::freopen("/dev/null", "w", stdout);
  }
  const int failed = Catch::Session().run(argc, argv);
  int any_failed = failed != 0;
  MPI_Allreduce(MPI_IN_PLACE, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any_failed && failed == 0 && session.is_root()) std::fprintf(stderr, "a test failed on another rank\n");
  return any_failed ? 1 : 0;
}
