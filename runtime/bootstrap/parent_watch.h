// Ends a worker whose launcher died. torchrun's agent starts each worker as its child and is what stops
// and restarts them; when the agent itself is killed (kill -9, a lost container), its workers live on as
// orphans, keep their peers' collectives waiting, and the surviving agents never see them fail. A thread
// notices the parent change within a period and ends the process, so the peers' collectives fail at once
// and their agents restart the group without this node.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <thread>

namespace dtrain {

class ParentWatch final {
 public:
  // Checks getppid() every `period_s`; when it is no longer the parent at construction, calls `on_gone`
  // (from the watch thread; it should end the process).
  ParentWatch(double period_s, std::function<void(pid_t old_parent)> on_gone);
  ~ParentWatch();
  ParentWatch(const ParentWatch&) = delete;
  ParentWatch& operator=(const ParentWatch&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace dtrain
