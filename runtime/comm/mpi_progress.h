// Internal to runtime/comm (it pulls in mpi.h): a thread that moves the data of non-blocking MPI
// collectives while the training thread computes.
//
// Open MPI moves a non-blocking collective's data only inside MPI calls (it has no progress thread of its
// own for TCP), so an MPI_Iallreduce started during backward advanced only when the training thread
// polled it from an autograd hook, and the rest of it was left for after backward: exposed. This thread
// tests every request in flight, pausing between rounds (passive, the default: a pause that grows from
// 10 us to 100 us, so a node pays a few percent of a core for it) or not at all (active), and wakes the
// waiter when its request completes; the training thread never polls and its waits block. MPI is
// initialised with MPI_THREAD_MULTIPLE, and a request is tested only by this thread.
#pragma once

#include <mpi.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace dtrain::detail {

// One request in flight, shared by its Work and the progress thread.
struct MpiRequest {
  MPI_Request request = MPI_REQUEST_NULL;
  std::mutex mutex;
  std::condition_variable completed;
  bool done = false;         // under mutex; set once, by the progress thread
  int error = MPI_SUCCESS;   // MPI_Test's failure, when done through one
};

class MpiProgress {
 public:
  explicit MpiProgress(bool active);
  ~MpiProgress();  // stops the thread; requests still in flight are abandoned (an error path: the job ends)
  MpiProgress(const MpiProgress&) = delete;
  MpiProgress& operator=(const MpiProgress&) = delete;

  // Hands a started request to the thread, which tests it until it completes.
  void add(std::shared_ptr<MpiRequest> request);

 private:
  void run();

  const bool active_;
  std::mutex mutex_;
  std::condition_variable work_;
  std::vector<std::shared_ptr<MpiRequest>> incoming_;  // under mutex_
  bool stop_ = false;                                  // under mutex_
  std::thread thread_;
};

}  // namespace dtrain::detail
