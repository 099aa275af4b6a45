// The process group as a launcher made it: which rank this is, where the others run, and the few
// collectives needed before a Communicator exists (agreeing on errors, handing small values from one
// rank to all, a shared key-value store). Two kinds: MpiSession (mpirun, srun: MPI bootstraps) and
// StoreSession (torchrun, a PyTorchJob: RANK, WORLD_SIZE and a c10d store at MASTER_ADDR:MASTER_PORT).
// Neither MPI nor c10d types appear here beyond a forward declaration.
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <optional>
#include <string>
#include <vector>

#include "runtime/bootstrap/wait_options.h"
#include "runtime/config/config.h"
#include "runtime/util/error.h"

namespace c10d {
class Store;
}

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

// What MPI offers code that runs over the ranks' MPI world (MpiCommunicator, the Heartbeat), when MPI
// started the ranks. Both duplicate MPI_COMM_WORLD for themselves.
struct MpiWorld {
  bool thread_multiple = false;  // threads other than the main one may call MPI (MPI_THREAD_MULTIPLE)
};

// Where the launcher's c10d store listens (torchrun's MASTER_ADDR:MASTER_PORT), for code that opens a
// connection of its own to it (the store heartbeat), and which start of the group this is.
struct StoreEndpoint {
  std::string host;
  int port = 0;
  int restart_count = 0;  // keys of one start of the group carry it
};

class Session {
 public:
  virtual ~Session() = default;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int local_rank() const { return local_rank_; }  // rank among the processes of this node
  int local_world_size() const { return local_world_size_; }
  bool is_root() const { return rank_ == 0; }
  const std::string& hostname() const { return hostnames_[static_cast<size_t>(rank_)]; }
  const std::vector<std::string>& hostnames() const { return hostnames_; }  // indexed by rank
  std::vector<std::string> unique_hosts() const;                             // in rank order
  ErrorOrigin origin() const { return ErrorOrigin{rank_, world_size_, {}}; }  // this rank, for messages

  virtual BootstrapKind kind() const = 0;  // kMpi or kEnv
  // Whether an elastic agent (torchrun) started this process and restarts its group after failures, and
  // how often it has so far.
  virtual bool elastic_agent() const { return false; }
  virtual int restart_count() const { return 0; }
  // For the run header: "Open MPI v4.1.4", "torchrun (store at node-0:29500, restart 1 of 3)".
  virtual std::string description() const = 0;
  // The capabilities a kind of session has: the MPI world when MPI started the ranks, the launcher's
  // store when the ranks met through one. Empty otherwise.
  virtual std::optional<MpiWorld> mpi_world() const { return std::nullopt; }
  virtual std::optional<StoreEndpoint> store_endpoint() const { return std::nullopt; }

  // Collective. Every rank passes its own failure (exit_code 0 for none); every rank gets the same
  // result: the failure of the lowest failing rank, with its origin (that rank, unless the failure had
  // none and it is rank 0: an error every rank meets alike needs no rank), or no failure if all
  // succeeded. Lets a bad config or a missing file fail all ranks with one message and one exit status
  // instead of hanging the healthy ones. Throws CommError when a rank does not take part within
  // wait.timeout_s.
  virtual Failure first_error(const Failure& local, const WaitOptions& wait) const = 0;

  // Collective, for small values (an NCCL id, a port): returns `root`'s `bytes` on every rank. `what`
  // names the value in a timeout's message.
  virtual std::string broadcast(const std::string& bytes, int root, const WaitOptions& wait,
                                const std::string& what) const = 0;

  // Collective on first use: a c10d store that every rank of the group reaches (Gloo forms its
  // connections through it). Its keys are this group's own; operations wait at most wait.timeout_s.
  virtual c10::intrusive_ptr<c10d::Store> store(const WaitOptions& wait) = 0;

  // Ends this process with `exit_code` and makes sure no peer waits for it forever: MPI_Abort kills the
  // whole MPI job; under torchrun the agent sees the exit and stops or restarts the others.
  [[noreturn]] virtual void abort(int exit_code) = 0;

 protected:
  Session() = default;

  int rank_ = 0;
  int world_size_ = 1;
  int local_rank_ = 0;
  int local_world_size_ = 1;
  std::vector<std::string> hostnames_;
};

}  // namespace dtrain
