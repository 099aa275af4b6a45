// Progress in `kubectl get trainjob`: rank 0 posts the run's progress, time left and metrics to Kubeflow
// Trainer's status server (Trainer >= 2.2 with the TrainJobStatus feature gate, KEP-2779), which writes
// them into the TrainJob's status.trainerStatus. Trainer injects where and how:
//   KUBEFLOW_TRAINER_SERVER_URL      the HTTPS endpoint of this TrainJob's status
//   KUBEFLOW_TRAINER_SERVER_TOKEN    a file with the bearer token (a projected service-account token that
//                                    rotates: read afresh for every post)
//   KUBEFLOW_TRAINER_SERVER_CA_CERT  a file with the CA that signed the server's certificate
// Posting runs on a thread of its own, at most every min_interval_s, the newest update replacing one not
// yet sent; a slow, refusing or absent server never slows or stops training: the failures are counted,
// and the first one is said once. libcurl does the HTTP (and TLS).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <ctime>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/log/run_observer.h"

namespace dtrain {

class RunLogger;

struct TrainerStatusEndpoint {
  std::string url;
  std::string token_file;  // "" : no Authorization header
  std::string ca_file;     // "" : the system's CAs
};

// The endpoint from Trainer's variables, or nullopt where KUBEFLOW_TRAINER_SERVER_URL is unset or empty.
std::optional<TrainerStatusEndpoint> trainer_status_endpoint_from_env();

// Why `endpoint` must not be posted to, or "": a bearer token (or a password in the URL) over plain http
// would cross the network in the clear, so dtrain sends credentials over https only.
std::string insecure_credentials(const TrainerStatusEndpoint& endpoint);

// `url` as messages show it: a password in it replaced by "***", control characters escaped.
std::string shown_url(const std::string& url);

// Text from a server (or any text from outside) as messages show it: control characters (a terminal's
// escape sequences, newlines that would forge a log line) as \xNN, at most `max_chars` characters.
std::string printable(const std::string& text, size_t max_chars = 200);

// One update, in the request's terms (Trainer's UpdateTrainJobStatusRequest).
struct TrainerStatus {
  std::optional<int> progress_percent;    // 0..100
  std::optional<int64_t> remaining_s;     // >= 0
  std::vector<std::pair<std::string, std::string>> metrics;  // name, value as text (1..64 characters each)
};

// The request body: {"trainerStatus": {"progressPercentage": ..., "estimatedRemainingSeconds": ...,
// "metrics": [{"name": ..., "value": ...}], "lastUpdatedTime": "2026-11-27T21:00:00Z"}}.
std::string trainer_status_body(const TrainerStatus& status, std::time_t now);

struct TrainerStatusCounts {
  int64_t posted = 0;  // answered 200
  int64_t failed = 0;  // not sent, or answered otherwise
  std::string first_error;
};

class TrainerStatusPoster {
 public:
  TrainerStatusPoster(TrainerStatusEndpoint endpoint, double min_interval_s, double timeout_s);
  // Waits for a post under way (at most timeout_s); an update not yet sent is dropped: call flush() first.
  ~TrainerStatusPoster();
  TrainerStatusPoster(const TrainerStatusPoster&) = delete;
  TrainerStatusPoster& operator=(const TrainerStatusPoster&) = delete;

  // Non-blocking: the newest update is sent once min_interval_s has passed since the last post.
  void offer(TrainerStatus status);
  // Sends the newest update now (without waiting for the interval) and returns once it was answered or
  // failed, or after timeout_s + 1 s (a post still under way then is left to finish or fail).
  void flush();
  TrainerStatusCounts counts() const;

 private:
  void loop();
  bool post(const TrainerStatus& status, std::string& error) const;

  TrainerStatusEndpoint endpoint_;
  std::chrono::duration<double> min_interval_;
  double timeout_s_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::optional<TrainerStatus> pending_;  // guarded by mutex_
  bool urgent_ = false;                   // guarded: flush() asked
  bool busy_ = false;                     // guarded: a post is under way
  bool stopping_ = false;                 // guarded
  TrainerStatusCounts counts_;            // guarded
  std::thread thread_;
};

// The observer rank 0 runs where Trainer's variables are set: an update at each progress line (the
// epoch's share of the run, the run's time left, the training loss and samples/s), at each epoch's end
// (its test metrics too) and the last one at the run's end, sent before the run_end record, which
// counts the posts (trainer_status_posts, trainer_status_failures). The first failure is one warning. An
// endpoint whose credentials would travel in the clear (insecure_credentials) is not posted to at all,
// and said so at the start.
class TrainerStatusReporter final : public RunObserver {
 public:
  TrainerStatusReporter(TrainerStatusEndpoint endpoint, int64_t epochs, RunLogger& logger,
                        double min_interval_s = 10.0, double timeout_s = 5.0);

  void progress(const ProgressInfo& progress) override;
  void epoch_ended(const EpochStats& stats) override;
  void run_ending(RunSummary& summary) override;

 private:
  void warn_once();

  std::string refused_;  // insecure_credentials(): nothing is posted
  std::optional<TrainerStatusPoster> poster_;
  int64_t epochs_;
  RunLogger& logger_;
  bool warned_ = false;
};

}  // namespace dtrain
