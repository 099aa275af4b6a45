// The session of ranks that torchrun or a Kubeflow PyTorchJob started: rank and world size from RANK and
// WORLD_SIZE, and a c10d TCPStore at MASTER_ADDR:MASTER_PORT (hosted by rank 0, or by torchrun's agent
// with TORCHELASTIC_USE_AGENT_STORE) in which the ranks meet, tell each other their hosts, agree on
// errors and hand over small values such as the NCCL id. No MPI is involved: the collectives are Gloo's
// (CPU) or NCCL's (GPU).
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/bootstrap/launcher_env.h"
#include "runtime/bootstrap/session.h"

namespace dtrain {

class ParentWatch;

class StoreSession final : public Session {
 public:
  // Connects to the store and waits, up to `timeout_s`, until all WORLD_SIZE ranks have joined. Throws
  // CommError naming the store's address, the variables and the ranks that did not join. Under
  // torchrun's agent, calls `on_agent_gone` (from a watcher thread) when the agent dies (see ParentWatch):
  // the program decides how the worker ends.
  StoreSession(const TorchEnv& env, double timeout_s, std::function<void(pid_t agent)> on_agent_gone = {});
  ~StoreSession() override;

  const TorchEnv& env() const { return env_; }

  BootstrapKind kind() const override { return BootstrapKind::kEnv; }
  bool elastic_agent() const override { return env_.elastic_agent; }
  int restart_count() const override { return env_.restart_count; }
  std::string description() const override;
  std::optional<StoreEndpoint> store_endpoint() const override {
    return StoreEndpoint{env_.master_addr, env_.master_port, env_.restart_count};
  }
  Failure first_error(const Failure& local, const WaitOptions& wait) const override;
  std::string broadcast(const std::string& bytes, int root, const WaitOptions& wait,
                        const std::string& what) const override;
  // The session's store, its keys under this restart's own prefix.
  c10::intrusive_ptr<c10d::Store> store(const WaitOptions& wait) override;
  // Exits: the launcher sees it and stops or restarts the other workers, whose collectives with this
  // rank fail as its connections close.
  [[noreturn]] void abort(int exit_code) override;

 private:
  // Waits until every key of `keys` exists, polling, marked on wait.activity. Throws CommError naming
  // `what` and the ranks whose key is missing (keys[r] belongs to rank r when `per_rank`).
  void wait_for(const std::vector<std::string>& keys, bool per_rank, const WaitOptions& wait, const std::string& what) const;
  std::string address() const;  // "MASTER_ADDR:MASTER_PORT"

  TorchEnv env_;
  c10::intrusive_ptr<c10d::Store> store_;  // null in a world of one
  mutable int64_t round_ = 0;              // of first_error and broadcast, the same sequence on every rank
  std::unique_ptr<ParentWatch> parent_watch_;
};

}  // namespace dtrain
