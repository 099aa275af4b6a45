// The console line formats, as pure functions so tests can check them against the grammars that
// downstream analysis tools parse. No line may contain the substring "real": those tools take the first
// line containing it as bash `time` output.
#pragma once

#include <ctime>
#include <string>
#include <utility>
#include <vector>

#include "runtime/log/run_events.h"
#include "runtime/util/timer.h"  // format_utc, utc_timestamp

namespace dtrain {

// "2026-11-21T10:00:00.123Z" (RFC 3339 with milliseconds) for seconds since 1970.
std::string utc_timestamp_ms(double unix_s);

// The evaluation metrics as the Katib line prints them: each name with its value as text ("0.8101"), in
// the line's order. The run log's epoch records carry the same pairs for Katib's File collector.
std::vector<std::pair<std::string, std::string>> katib_metric_values(const MetricValues& test);

// Kubeflow Katib metrics line, one entry per evaluation metric:
// "2026-11-21T10:00:00Z INFO     {metricName: accuracy, metricValue: 0.8101};{metricName: loss, metricValue: 0.5212}"
std::string katib_metrics_line(const EpochStats& stats, std::time_t when);

// "Train Epoch: 1 [1280/60000 (2%)]\tloss=0.6931", one name=value per training metric
std::string katib_progress_line(const ProgressInfo& progress);

// pytorch/examples style: "Train Epoch: 1 [1280/60000 (2%)]\tLoss: 0.693147"
std::string pytorch_progress_line(const ProgressInfo& progress);

// pytorch/examples style: "Test set: Average loss: 0.0456, Accuracy: 9861/10000 (99%)" for classifiers,
// "Test set: d_loss: 0.6931 g_loss: 0.6931" for other metrics
std::string pytorch_test_line(const EpochStats& stats);

// "epoch 3/10 | train_loss 0.1234 | test_acc 98.61% | test_loss 0.0456 | 12.3 s | 48213 samples/s"
std::string epoch_summary_line(const EpochStats& stats);

// A finished run's last epoch, restored from its checkpoint (training metrics left out when unknown):
// "epoch 3/3 | train_loss 0.1234 | test_acc 98.61% | test_loss 0.0456 | from its checkpoint, nothing left to train"
std::string finished_run_line(const EpochStats& stats);

// "buckets from the network: allreduce latency 0.42 ms, 96.1 MB/s, 0.31 ms CPU each on 0.25 cores per rank
// -> 1.66 ms per bucket (probe 0.21 s); model: 46.8 MB in 18 buckets of up to 2.90 MiB"
std::string bucket_probe_line(const BucketProbeRecord& probe, const std::vector<GradientBuckets>& layouts);

// "test_acc 98.61% | test_loss 0.0456"
std::string final_metrics_text(const MetricValues& metrics);

// The run's last console line, its figures formatted as the epoch lines format them:
// "done: 3 epochs in 69.0 s | final test_acc 98.61% | test_loss 0.0456 | peak memory per rank 844 MiB"
std::string run_summary_line(const RunSummary& summary);

// Where a phase of a run is (an epoch's training, an evaluation) for the live progress display: how far
// in samples (over all ranks), how fast, and how long until the phase ends. A rate of 0 is not known yet.
struct ProgressState {
  std::string phase;  // "epoch 2/10", "evaluation 2/10"
  int64_t done = 0;
  int64_t total = 0;
  double samples_per_s = 0.0;
  std::optional<double> run_left_s;  // the whole run's time left, when estimated
};

// "1:05", "12:03:09": a duration in whole seconds; "--:--" when unknown (negative or not finite).
std::string format_duration(double seconds);

// The progress bar, redrawn in place on a terminal:
// "epoch 2/10 [############........] 60% 36000/60000 | 1534 samples/s | 0:15 left | run 9:40 left"
// The progress line, printed every few seconds elsewhere:
// "progress: epoch 2/10 60% (36000/60000 samples) | 1534 samples/s | 0:15 left | run 9:40 left"
// (the run's time left once it is estimated)
// Neither holds "=" (Katib's StdOut filter takes "name=number" for a metric) nor "real".
std::string progress_bar_text(const ProgressState& state, int width);
std::string progress_line_text(const ProgressState& state);

}  // namespace dtrain
