// The MPI process group: init/finalize, rank facts and the few collectives needed before a
// Communicator exists (agreeing on errors, rank 0's summary). No MPI types appear here.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/bootstrap/wait_options.h"
#include "runtime/util/error.h"

namespace dtrain {

// An error as ranks agree on it: the exit status it ends the run with (0: no error), the message and
// where it happened.
struct Failure {
  int exit_code = 0;
  std::string message;  // without the origin
  ErrorOrigin origin;
  bool failed() const { return exit_code != 0; }
  std::string text() const { return origin.prefix() + message; }  // as printed
};

class MpiSession final {
 public:
  // Initialises MPI, asking for thread level MULTIPLE: the heartbeat thread talks to other ranks while
  // the main thread (or autograd's backward thread) is inside a collective. Needs at least SERIALIZED;
  // with less than MULTIPLE, has_thread_multiple() is false and no heartbeat can run. Works without
  // mpirun (a singleton), under mpirun and under srun. Throws CommError.
  MpiSession(int* argc, char*** argv);
  ~MpiSession();  // MPI_Finalize, unless abort() ran
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int local_rank() const { return local_rank_; }            // rank among the processes of this node
  int local_world_size() const { return local_world_size_; }
  bool is_root() const { return rank_ == 0; }
  const std::string& hostname() const { return hostnames_[rank_]; }
  const std::vector<std::string>& hostnames() const { return hostnames_; }  // indexed by rank
  std::vector<std::string> unique_hosts() const;                             // in rank order
  const std::string& mpi_library_version() const { return mpi_library_version_; }
  bool has_thread_multiple() const { return thread_multiple_; }
  ErrorOrigin origin() const { return ErrorOrigin{rank_, world_size_, {}}; }  // this rank, for messages

  // Collective. Every rank passes its own failure (exit_code 0 for none); every rank gets the same
  // result: the failure of the lowest failing rank, with its origin (that rank, unless the failure had
  // none and it is rank 0: an error every rank meets alike needs no rank), or no failure if all
  // succeeded. Lets a bad config or a missing file fail all ranks with one
  // message and one exit status instead of hanging the healthy ones.
  Failure first_error(const Failure& local, const WaitOptions& wait) const;

  // Kills every rank of the job (MPI_Abort). For errors after the ranks stopped agreeing.
  [[noreturn]] void abort(int exit_code);

 private:
  int rank_ = 0;
  int world_size_ = 1;
  int local_rank_ = 0;
  int local_world_size_ = 1;
  std::vector<std::string> hostnames_;
  std::string mpi_library_version_;
  bool thread_multiple_ = false;
  bool aborted_ = false;
};

}  // namespace dtrain
