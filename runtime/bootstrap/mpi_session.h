// The MPI process group: init/finalize, rank facts and the few collectives needed before a
// Communicator exists (agreeing on errors, rank 0's summary). No MPI types appear here.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace dtrain {

class MpiSession final {
 public:
  // Initialises MPI (thread level SERIALIZED: autograd hooks may call MPI from the backward thread, never
  // two threads at once). Works without mpirun (a singleton), under mpirun and under srun. Throws CommError.
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
  std::string rank_prefix() const;  // "[rank r/n] "

  // Collective. Every rank passes its own error ("" for none); every rank gets the same result: the
  // error of the lowest failing rank, prefixed with that rank, or "" if all succeeded. Lets a bad
  // config or a missing file fail all ranks with one message instead of hanging the healthy ones.
  std::string first_error(const std::string& local_error, double timeout_s) const;

  // Kills every rank of the job (MPI_Abort). For errors after the ranks stopped agreeing.
  [[noreturn]] void abort(int exit_code);

 private:
  int rank_ = 0;
  int world_size_ = 1;
  int local_rank_ = 0;
  int local_world_size_ = 1;
  std::vector<std::string> hostnames_;
  std::string mpi_library_version_;
  bool aborted_ = false;
};

}  // namespace dtrain
