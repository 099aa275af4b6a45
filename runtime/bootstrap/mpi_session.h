// The session of ranks that an MPI launcher started (mpirun, srun) or of one process started alone:
// MPI_Init/MPI_Finalize, the rank facts from MPI, and the session's collectives over MPI_COMM_WORLD.
// No MPI types appear here.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/bootstrap/session.h"

namespace dtrain {

class MpiSession final : public Session {
 public:
  // Initialises MPI, asking for thread level MULTIPLE: the heartbeat thread talks to other ranks while
  // the main thread (or autograd's backward thread) is inside a collective. Needs at least SERIALIZED;
  // with less than MULTIPLE, has_thread_multiple() is false and no heartbeat can run. Works without
  // mpirun (a singleton), under mpirun and under srun. Throws CommError.
  // started_alone: no MPI launcher's variables were found (LauncherEnv::mpi_variable is empty), so this
  // process is a world of one. Open MPI's singleton then runs without the daemon (orted) it otherwise
  // forks for MPI_Comm_spawn and MPI_Comm_connect, which dtrain never calls: 0.15-0.25 CPU-s and 0.25 s
  // less at every start (`dtrain --version`: 0.70-0.81 CPU-s, 0.95-1.06 s before; 0.54, 0.75 s after).
  // OMPI_MCA_ess_singleton_isolated=0 in the environment keeps the daemon.
  MpiSession(int* argc, char*** argv, bool started_alone = false);
  ~MpiSession() override;  // MPI_Finalize, unless abort() ran

  const std::string& mpi_library_version() const { return mpi_library_version_; }
  bool has_thread_multiple() const { return thread_multiple_; }

  BootstrapKind kind() const override { return BootstrapKind::kMpi; }
  std::string description() const override { return mpi_library_version_; }
  std::optional<MpiWorld> mpi_world() const override { return MpiWorld{thread_multiple_}; }
  Failure first_error(const Failure& local, const WaitOptions& wait) const override;
  std::string broadcast(const std::string& bytes, int root, const WaitOptions& wait,
                        const std::string& what) const override;
  // A c10d TCPStore that rank 0 hosts on a free port of its host; MPI tells the others where.
  c10::intrusive_ptr<c10d::Store> store(const WaitOptions& wait) override;
  // Kills every rank of the job (MPI_Abort). For errors after the ranks stopped agreeing.
  [[noreturn]] void abort(int exit_code) override;

 private:
  std::string mpi_library_version_;
  bool thread_multiple_ = false;
  bool aborted_ = false;
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace dtrain
