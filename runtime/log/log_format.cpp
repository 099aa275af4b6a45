#include "runtime/log/log_format.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>

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

std::string format_utc(std::time_t when, const char* strftime_format) {
  std::tm utc{};
  gmtime_r(&when, &utc);
  char text[64];
  std::strftime(text, sizeof text, strftime_format, &utc);
  return text;
}

std::string utc_timestamp(std::time_t when) { return format_utc(when, "%Y-%m-%dT%H:%M:%SZ"); }

std::string katib_metrics_line(const EpochStats& stats, std::time_t when) {
  return utc_timestamp(when) + printf_string(" %-8s {metricName: accuracy, metricValue: %.4f};"
                                             "{metricName: loss, metricValue: %.4f}",
                                             "INFO", stats.test_accuracy, stats.test_loss);
}

std::string katib_progress_line(const ProgressInfo& p) {
  return printf_string("Train Epoch: %lld [%lld/%lld (%lld%%)]\tloss=%.4f", static_cast<long long>(p.epoch),
                       static_cast<long long>(p.samples_done), static_cast<long long>(p.samples_total),
                       percent(p.samples_done, p.samples_total), p.loss);
}

std::string pytorch_progress_line(const ProgressInfo& p) {
  return printf_string("Train Epoch: %lld [%lld/%lld (%lld%%)]\tLoss: %.6f", static_cast<long long>(p.epoch),
                       static_cast<long long>(p.samples_done), static_cast<long long>(p.samples_total),
                       percent(p.samples_done, p.samples_total), p.loss);
}

std::string pytorch_test_line(const EpochStats& s) {
  // pytorch/examples rounds the percentage to an integer with "{:.0f}".
  return printf_string("Test set: Average loss: %.4f, Accuracy: %lld/%lld (%.0f%%)", s.test_loss,
                       static_cast<long long>(s.test_correct), static_cast<long long>(s.test_samples),
                       100.0 * s.test_accuracy);
}

std::string epoch_summary_line(const EpochStats& s) {
  return printf_string("epoch %lld/%lld | train_loss %.4f | test_loss %.4f | test_acc %.2f%% | %.1f s | %.0f samples/s",
                       static_cast<long long>(s.epoch), static_cast<long long>(s.epochs), s.train_loss, s.test_loss,
                       100.0 * s.test_accuracy, s.epoch_s, s.samples_per_s);
}

std::string finished_run_line(const EpochStats& s) {
  const std::string train = std::isfinite(s.train_loss) ? printf_string(" | train_loss %.4f", s.train_loss) : "";
  return printf_string("epoch %lld/%lld", static_cast<long long>(s.epoch), static_cast<long long>(s.epochs)) + train +
         printf_string(" | test_loss %.4f | test_acc %.2f%% | from its checkpoint, nothing left to train", s.test_loss,
                       100.0 * s.test_accuracy);
}

std::string progress_bar(int64_t done, int64_t total, int width) {
  const double fraction = total > 0 ? std::min(1.0, static_cast<double>(done) / static_cast<double>(total)) : 0.0;
  const int filled = static_cast<int>(fraction * width);
  std::string bar = "[";
  for (int i = 0; i < width; ++i) bar += i < filled ? '=' : (i == filled ? '>' : ' ');
  return bar + printf_string("] %3d%% %lld/%lld steps", static_cast<int>(fraction * 100), static_cast<long long>(done),
                             static_cast<long long>(total));
}

}  // namespace dtrain
