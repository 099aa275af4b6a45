// Main of the multi-rank tests: MPI init, Catch2, MPI finalize. Run under mpirun with 2 and 3 ranks.
// Rank 0 reports on stdout. Other ranks report into a file of their own, which goes to stderr, under a
// "rank N" heading, only when that rank had a failure: a failure on any rank is seen, and fails the
// process (and so the test); where every rank skipped every case (test/support/skip.h) it exits 77.
// Catch2's implementation is in test/support/catch_session.cpp.
#include <mpi.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include <unistd.h>

#include "test/mpi/mpi_test_support.h"
#include "test/support/catch_session.h"

namespace dtrain::test {
namespace {
MpiSession* g_session = nullptr;
}
MpiSession& session() { return *g_session; }
}  // namespace dtrain::test

int main(int argc, char** argv) {
  dtrain::MpiSession session(&argc, &argv);
  dtrain::test::g_session = &session;
  const int rank = session.rank();

  std::string report_path;
  if (!session.is_root()) {
    report_path = (std::filesystem::temp_directory_path() /
                   ("dtrain_mpi_tests.rank" + std::to_string(rank) + "." + std::to_string(::getpid()) + ".log"))
                      .string();
  }
  const int status = dtrain::test::run_catch_session(argc, argv, {report_path});
  const int failed = status == dtrain::test::kAllSkipped ? 0 : status;

  if (!report_path.empty()) {
    if (failed != 0) {
      std::ifstream report(report_path);
      std::cerr << "---- rank " << rank << " (its own report; rank 0's is on stdout) ----\n"
                << report.rdbuf() << "---- end of rank " << rank << " ----\n";
    }
    std::error_code ignored;
    std::filesystem::remove(report_path, ignored);
  }
  int any_failed = failed != 0;
  MPI_Allreduce(MPI_IN_PLACE, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any_failed && failed == 0 && session.is_root()) std::fprintf(stderr, "a test failed on another rank\n");
  // Skipped as a whole only where every rank skipped every case it ran.
  int all_skipped = status == dtrain::test::kAllSkipped;
  MPI_Allreduce(MPI_IN_PLACE, &all_skipped, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (any_failed) return 1;
  return all_skipped ? dtrain::test::kAllSkipped : 0;
}
