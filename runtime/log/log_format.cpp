#include "runtime/log/log_format.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>

#include "runtime/util/strings.h"

namespace dtrain {
namespace {

std::string printf_string(const char* format, ...) __attribute__((format(printf, 1, 2)));

std::string printf_string(const char* format, ...) {
  char buffer[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof buffer, format, args);
  va_end(args);
  return buffer;
}

long long percent(int64_t part, int64_t whole) {
  return whole > 0 ? static_cast<long long>(100.0 * static_cast<double>(part) / static_cast<double>(whole)) : 0;
}

}  // namespace

std::string utc_timestamp_ms(double unix_s) {
  const double whole = std::floor(unix_s);
  const int ms = std::min(999, static_cast<int>(std::lround((unix_s - whole) * 1000.0)));
  return format_utc(static_cast<std::time_t>(whole), "%Y-%m-%dT%H:%M:%S") + printf_string(".%03dZ", ms);
}

std::vector<std::pair<std::string, std::string>> katib_metric_values(const MetricValues& test) {
  std::vector<std::pair<std::string, std::string>> values;
  for (const MetricValue& m : test.all()) values.emplace_back(m.name, printf_string("%.4f", m.value));
  return values;
}

std::string katib_metrics_line(const EpochStats& stats, std::time_t when) {
  std::string metrics;
  for (const auto& [name, value] : katib_metric_values(stats.test)) {
    metrics += (metrics.empty() ? "" : ";") + ("{metricName: " + name + ", metricValue: " + value + "}");
  }
  return utc_timestamp(when) + printf_string(" %-8s ", "INFO") + metrics;
}

namespace {

std::string progress_head(const ProgressInfo& p) {
  return printf_string("Train Epoch: %lld [%lld/%lld (%lld%%)]", static_cast<long long>(p.epoch),
                       static_cast<long long>(p.samples_done), static_cast<long long>(p.samples_total),
                       percent(p.samples_done, p.samples_total));
}

// " | test_acc 98.61% | test_loss 0.0456" for metrics of `split` ("train", "test"); accuracies as percentages.
std::string summary_metrics(const char* split, const MetricValues& metrics) {
  std::string text;
  for (const MetricValue& m : metrics.all()) {
    text += m.name == "accuracy" ? printf_string(" | %s_acc %.2f%%", split, 100.0 * m.value)
                                 : printf_string(" | %s_%s %.4f", split, m.name.c_str(), m.value);
  }
  return text;
}

}  // namespace

std::string katib_progress_line(const ProgressInfo& p) {
  std::string line = progress_head(p);
  for (const MetricValue& m : p.metrics.all()) line += printf_string("\t%s=%.4f", m.name.c_str(), m.value);
  return line;
}

std::string pytorch_progress_line(const ProgressInfo& p) {
  std::string line = progress_head(p);
  for (const MetricValue& m : p.metrics.all()) {
    line += printf_string("\t%s: %.6f", m.name == "loss" ? "Loss" : m.name.c_str(), m.value);
  }
  return line;
}

std::string pytorch_test_line(const EpochStats& s) {
  const MetricValue* loss = s.test.find("loss");
  const MetricValue* accuracy = s.test.find("accuracy");
  if (loss != nullptr && accuracy != nullptr) {
    // pytorch/examples rounds the percentage to an integer with "{:.0f}".
    return printf_string("Test set: Average loss: %.4f, Accuracy: %lld/%lld (%.0f%%)", loss->value,
                         static_cast<long long>(accuracy->sum), static_cast<long long>(accuracy->weight),
                         100.0 * accuracy->value);
  }
  std::string line = "Test set:";
  for (const MetricValue& m : s.test.all()) line += printf_string(" %s: %.4f", m.name.c_str(), m.value);
  return line;
}

std::string epoch_summary_line(const EpochStats& s) {
  return printf_string("epoch %lld/%lld", static_cast<long long>(s.epoch), static_cast<long long>(s.epochs)) +
         summary_metrics("train", s.train) + summary_metrics("test", s.test) +
         printf_string(" | %.1f s | %.0f samples/s", s.epoch_s, s.samples_per_s);
}

std::string finished_run_line(const EpochStats& s) {
  return printf_string("epoch %lld/%lld", static_cast<long long>(s.epoch), static_cast<long long>(s.epochs)) +
         summary_metrics("train", s.train) + summary_metrics("test", s.test) +
         " | from its checkpoint, nothing left to train";
}

std::string final_metrics_text(const MetricValues& metrics) {
  std::string text;
  for (const MetricValue& m : metrics.all()) {
    text += (text.empty() ? "" : " | ") +
            (m.name == "accuracy" ? printf_string("test_acc %.2f%%", 100.0 * m.value)
                                  : printf_string("test_%s %.4f", m.name.c_str(), m.value));
  }
  return text;
}

std::string run_summary_line(const RunSummary& summary) {
  int64_t peak = 0;
  for (int64_t bytes : summary.peak_rss_bytes) peak = std::max(peak, bytes);
  const std::string final_metrics = final_metrics_text(summary.final_test);
  return printf_string("done: %lld %s in %.1f s", static_cast<long long>(summary.epochs_run),
                       summary.epochs_run == 1 ? "epoch" : "epochs", summary.total_s) +
         (final_metrics.empty() ? "" : " | final " + final_metrics) +
         printf_string(" | peak memory per rank %lld MiB", static_cast<long long>(peak >> 20));
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const long long s = std::llround(seconds);
  if (s >= 3600) return printf_string("%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  return printf_string("%lld:%02lld", s / 60, s % 60);
}

namespace {

double fraction_done(const ProgressState& p) {
  return p.total > 0 ? std::clamp(static_cast<double>(p.done) / static_cast<double>(p.total), 0.0, 1.0) : 0.0;
}

// " | 1534 samples/s | 0:15 left", or " | 0:15 left" style placeholders while the rate is unknown; then
// " | run 9:40 left" once the run's time left is estimated.
std::string rate_and_time_left(const ProgressState& p) {
  const std::string run_left = p.run_left_s ? " | run " + format_duration(*p.run_left_s) + " left" : "";
  if (p.samples_per_s <= 0) return " | -- samples/s | --:-- left" + run_left;
  const double left_s = static_cast<double>(std::max<int64_t>(0, p.total - p.done)) / p.samples_per_s;
  return printf_string(" | %.0f samples/s | ", p.samples_per_s) + format_duration(left_s) + " left" + run_left;
}

}  // namespace

std::string progress_bar_text(const ProgressState& p, int width) {
  const double fraction = fraction_done(p);
  const int filled = static_cast<int>(fraction * width);
  std::string bar = p.phase + " [";
  for (int i = 0; i < width; ++i) bar += i < filled ? '#' : '.';
  return bar + printf_string("] %3d%% %lld/%lld", static_cast<int>(fraction * 100), static_cast<long long>(p.done),
                             static_cast<long long>(p.total)) +
         rate_and_time_left(p);
}

std::string progress_line_text(const ProgressState& p) {
  return "progress: " + p.phase +
         printf_string(" %d%% (%lld/%lld samples)", static_cast<int>(fraction_done(p) * 100),
                       static_cast<long long>(p.done), static_cast<long long>(p.total)) +
         rate_and_time_left(p);
}

std::string bucket_probe_line(const BucketProbeRecord& probe, const std::vector<GradientBuckets>& layouts) {
  const std::string cores = probe.compute_cores > 0 ? format_number(probe.compute_cores) + " cores per rank"
                                                    : std::string("a device (not counted)");
  std::string line = printf_string(
      "buckets from the network: allreduce latency %.2f ms, %.1f MB/s, %.2f ms CPU each on %s -> %.2f ms per bucket "
      "(probe %.2f s)",
      probe.latency_s * 1e3, probe.bytes_per_s / 1e6, probe.small_cpu_s * 1e3, cores.c_str(), probe.per_bucket_s * 1e3,
      probe.probe_s);
  for (const GradientBuckets& layout : layouts) {
    int64_t total = 0;
    int64_t largest = 0;
    for (int64_t bytes : layout.bucket_bytes) {
      total += bytes;
      largest = std::max(largest, bytes);
    }
    line += printf_string("; %s: %.1f MB in %zu bucket%s of up to %.2f MiB", layout.module.c_str(),
                          static_cast<double>(total) / 1e6, layout.bucket_bytes.size(),
                          layout.bucket_bytes.size() == 1 ? "" : "s", static_cast<double>(largest) / (1 << 20));
  }
  return line;
}

}  // namespace dtrain
