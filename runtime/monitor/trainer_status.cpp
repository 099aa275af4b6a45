#include "runtime/monitor/trainer_status.h"

#include <curl/curl.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "runtime/log/run_logger.h"
#include "runtime/util/error.h"
#include "runtime/util/file_io.h"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;

// A response body is read for its error message only.
constexpr size_t kMaxResponseBytes = 4096;
// A projected service-account token (a JWT) is 1-2 KiB.
constexpr size_t kMaxTokenBytes = 65536;

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

size_t keep_response(char* data, size_t size, size_t count, void* user) {
  auto* response = static_cast<std::string*>(user);
  const size_t bytes = size * count;
  response->append(data, std::min(bytes, kMaxResponseBytes - std::min(kMaxResponseBytes, response->size())));
  return bytes;
}

// The server's error: a metav1.Status-style object's message, else the start of the body; printable.
std::string response_message(const std::string& body) {
  const nlohmann::json parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object() && parsed.contains("message") && parsed["message"].is_string()) {
    return printable(parsed["message"].get<std::string>());
  }
  return printable(body);
}

// A part of a URL as libcurl's parser sees it, or "" where it has none (or the URL does not parse).
std::string url_part(const std::string& url, CURLUPart part) {
  CURLU* handle = curl_url();
  if (handle == nullptr) return "";
  std::string value;
  char* text = nullptr;
  if (curl_url_set(handle, CURLUPART_URL, url.c_str(), 0) == CURLUE_OK && curl_url_get(handle, part, &text, 0) == CURLUE_OK) {
    value = text;
    curl_free(text);
  }
  curl_url_cleanup(handle);
  return value;
}

// A metric's value as Trainer stores it: text, at most 64 characters.
std::string metric_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

std::string utc_text(std::time_t when) {
  std::tm utc{};
  gmtime_r(&when, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

void add_metrics(TrainerStatus& status, const std::string& prefix, const MetricValues& values) {
  for (const MetricValue& m : values.all()) {
    if (m.weight > 0 && std::isfinite(m.value)) status.metrics.emplace_back(prefix + m.name, metric_text(m.value));
  }
}

std::optional<int64_t> whole_seconds(const std::optional<double>& seconds) {
  if (!seconds || !std::isfinite(*seconds) || *seconds < 0) return std::nullopt;
  return static_cast<int64_t>(std::llround(*seconds));
}

}  // namespace

std::optional<TrainerStatusEndpoint> trainer_status_endpoint_from_env() {
  TrainerStatusEndpoint endpoint{env_or_empty("KUBEFLOW_TRAINER_SERVER_URL"), env_or_empty("KUBEFLOW_TRAINER_SERVER_TOKEN"),
                                 env_or_empty("KUBEFLOW_TRAINER_SERVER_CA_CERT")};
  if (endpoint.url.empty()) return std::nullopt;
  return endpoint;
}

std::string printable(const std::string& text, size_t max_chars) {
  std::string out;
  for (const char c : text.substr(0, max_chars)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  return text.size() > max_chars ? out + "..." : out;
}

std::string shown_url(const std::string& url) {
  std::string shown = url;
  if (!url_part(url, CURLUPART_PASSWORD).empty()) {
    CURLU* handle = curl_url();
    char* text = nullptr;
    if (handle != nullptr && curl_url_set(handle, CURLUPART_URL, url.c_str(), 0) == CURLUE_OK &&
        curl_url_set(handle, CURLUPART_PASSWORD, "***", 0) == CURLUE_OK && curl_url_get(handle, CURLUPART_URL, &text, 0) == CURLUE_OK) {
      shown = text;
      curl_free(text);
    } else {
      shown = "(KUBEFLOW_TRAINER_SERVER_URL, not shown: it holds a password)";
    }
    if (handle != nullptr) curl_url_cleanup(handle);
  }
  return printable(shown, 512);
}

std::string insecure_credentials(const TrainerStatusEndpoint& endpoint) {
  std::string scheme = url_part(endpoint.url, CURLUPART_SCHEME);
  std::transform(scheme.begin(), scheme.end(), scheme.begin(), [](unsigned char c) { return std::tolower(c); });
  if (scheme == "https") return "";
  const bool password = !url_part(endpoint.url, CURLUPART_PASSWORD).empty();
  if (endpoint.token_file.empty() && !password) return "";
  return "KUBEFLOW_TRAINER_SERVER_URL (" + shown_url(endpoint.url) + ") is not https, and the " +
         (password ? "password in it" : "bearer token in KUBEFLOW_TRAINER_SERVER_TOKEN's file") +
         " would cross the network in the clear: dtrain sends credentials over https only, so it posts no progress "
         "to Kubeflow Trainer's status server; give the server's https URL";
}

std::string trainer_status_body(const TrainerStatus& status, std::time_t now) {
  nlohmann::json trainer = nlohmann::json::object();
  if (status.progress_percent) trainer["progressPercentage"] = std::clamp(*status.progress_percent, 0, 100);
  if (status.remaining_s) {
    // Trainer keeps it as a 32-bit count of seconds.
    trainer["estimatedRemainingSeconds"] = std::clamp<int64_t>(*status.remaining_s, 0, INT32_MAX);
  }
  nlohmann::json metrics = nlohmann::json::array();
  for (const auto& [name, value] : status.metrics) {
    if (metrics.size() == 256) break;  // Trainer's limit
    metrics.push_back({{"name", name.substr(0, 64)}, {"value", value.substr(0, 64)}});
  }
  if (!metrics.empty()) trainer["metrics"] = std::move(metrics);
  trainer["lastUpdatedTime"] = utc_text(now);
  return nlohmann::json{{"trainerStatus", std::move(trainer)}}.dump();
}

TrainerStatusPoster::TrainerStatusPoster(TrainerStatusEndpoint endpoint, double min_interval_s, double timeout_s)
    : endpoint_(std::move(endpoint)), min_interval_(min_interval_s), timeout_s_(timeout_s) {
  static std::once_flag curl_ready;
  std::call_once(curl_ready, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  thread_ = std::thread([this] { loop(); });
}

TrainerStatusPoster::~TrainerStatusPoster() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void TrainerStatusPoster::offer(TrainerStatus status) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_ = std::move(status);
  }
  wake_.notify_all();
}

void TrainerStatusPoster::flush() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!pending_ && !busy_) return;
  urgent_ = true;
  wake_.notify_all();
  const auto limit = std::chrono::duration<double>(timeout_s_ + 1.0);
  wake_.wait_for(lock, limit, [this] { return !pending_ && !busy_; });
}

TrainerStatusCounts TrainerStatusPoster::counts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counts_;
}

void TrainerStatusPoster::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  Clock::time_point last_post = Clock::now() - std::chrono::duration_cast<Clock::duration>(min_interval_);
  for (;;) {
    if (stopping_) return;
    if (!pending_) {
      wake_.wait(lock);
      continue;
    }
    const Clock::time_point due = last_post + std::chrono::duration_cast<Clock::duration>(min_interval_);
    if (!urgent_ && Clock::now() < due) {
      wake_.wait_until(lock, due);
      continue;
    }
    TrainerStatus status = std::move(*pending_);
    pending_.reset();
    urgent_ = false;
    busy_ = true;
    lock.unlock();
    std::string error;
    const bool ok = post(status, error);
    lock.lock();
    busy_ = false;
    last_post = Clock::now();
    if (ok) {
      ++counts_.posted;
    } else {
      ++counts_.failed;
      if (counts_.first_error.empty()) counts_.first_error = error;
    }
    wake_.notify_all();
  }
}

bool TrainerStatusPoster::post(const TrainerStatus& status, std::string& error) const {
  std::string token;
  if (!endpoint_.token_file.empty()) {
    // Read for every post: the projected token rotates. A service-account token is a few KiB; the read is
    // bounded and never waits on a FIFO.
    try {
      const std::filesystem::path path(endpoint_.token_file);
      token = read_small_file(Directory::open(path.parent_path().empty() ? "." : path.parent_path().string(), false),
                              path.filename().string(), kMaxTokenBytes);
    } catch (const IoError& e) {
      error = "cannot read the token in KUBEFLOW_TRAINER_SERVER_TOKEN's file: " + e.message();
      return false;
    }
    token.erase(token.find_last_not_of(" \t\r\n") + 1);
    if (token.empty()) {
      error = "the token file in KUBEFLOW_TRAINER_SERVER_TOKEN, '" + endpoint_.token_file + "', is empty";
      return false;
    }
  }
  const std::string body = trainer_status_body(status, std::time(nullptr));
  CURL* curl = curl_easy_init();
  if (curl == nullptr) {
    error = "curl_easy_init failed";
    return false;
  }
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  const std::string authorization = "Authorization: Bearer " + token;
  if (!token.empty()) headers = curl_slist_append(headers, authorization.c_str());
  std::string response;
  char curl_error[CURL_ERROR_SIZE] = {};
  const auto timeout_ms = static_cast<long>(timeout_s_ * 1000.0);
  curl_easy_setopt(curl, CURLOPT_URL, endpoint_.url.c_str());
  // The URL comes from the environment: HTTP(S) only, never a file or another protocol libcurl knows.
#if LIBCURL_VERSION_NUM >= 0x075500  // 7.85
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
#else
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
  curl_easy_setopt(curl, CURLOPT_POST, 1L);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM for timeouts: this is a thread of a training process
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, std::min(timeout_ms, 5000L));
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, curl_error);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, keep_response);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response);
  if (!endpoint_.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, endpoint_.ca_file.c_str());
  const CURLcode code = curl_easy_perform(curl);
  long http_status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &http_status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  if (code != CURLE_OK) {
    error = "POST " + shown_url(endpoint_.url) + ": " + printable(curl_error[0] != '\0' ? curl_error : curl_easy_strerror(code));
    return false;
  }
  if (http_status != 200) {
    error = "POST " + shown_url(endpoint_.url) + " answered HTTP " + std::to_string(http_status) + ": " + response_message(response);
    return false;
  }
  return true;
}

TrainerStatusReporter::TrainerStatusReporter(TrainerStatusEndpoint endpoint, int64_t epochs, RunLogger& logger,
                                             double min_interval_s, double timeout_s)
    : refused_(insecure_credentials(endpoint)), epochs_(std::max<int64_t>(1, epochs)), logger_(logger) {
  if (!refused_.empty()) {
    logger_.warning(refused_);
    return;
  }
  poster_.emplace(std::move(endpoint), min_interval_s, timeout_s);
}

void TrainerStatusReporter::progress(const ProgressInfo& progress) {
  if (!poster_) return;
  warn_once();
  TrainerStatus status;
  const int64_t planned = progress.epoch_samples > 0 ? progress.epoch_samples : progress.samples_total;
  const double epoch_share =
      planned > 0 ? std::min(1.0, static_cast<double>(progress.samples_done) / static_cast<double>(planned)) : 0.0;
  // 100 only once the run has ended.
  status.progress_percent =
      std::min(99, static_cast<int>(100.0 * (static_cast<double>(progress.epoch - 1) + epoch_share) / epochs_));
  status.remaining_s = whole_seconds(progress.run_left_s);
  status.metrics.emplace_back("epoch", std::to_string(progress.epoch));
  add_metrics(status, "train_", progress.metrics);
  if (progress.samples_per_s > 0) status.metrics.emplace_back("samples_per_s", metric_text(progress.samples_per_s));
  poster_->offer(std::move(status));
}

void TrainerStatusReporter::epoch_ended(const EpochStats& stats) {
  if (!poster_) return;
  warn_once();
  TrainerStatus status;
  status.progress_percent = std::min(99, static_cast<int>(100 * stats.epoch / epochs_));
  status.remaining_s = whole_seconds(stats.run_left_s);
  status.metrics.emplace_back("epoch", std::to_string(stats.epoch));
  add_metrics(status, "", stats.test);  // the Katib line's: accuracy, loss
  add_metrics(status, "train_", stats.train);
  if (stats.samples_per_s > 0) status.metrics.emplace_back("samples_per_s", metric_text(stats.samples_per_s));
  poster_->offer(std::move(status));
}

void TrainerStatusReporter::run_ending(RunSummary& summary) {
  if (!poster_) return;
  TrainerStatus status;
  status.progress_percent = 100;
  status.remaining_s = 0;
  add_metrics(status, "", summary.final_test);
  poster_->offer(std::move(status));
  poster_->flush();
  warn_once();
  const TrainerStatusCounts counts = poster_->counts();
  summary.trainer_status = StatusPosts{counts.posted, counts.failed};
}

void TrainerStatusReporter::warn_once() {
  if (warned_) return;
  const TrainerStatusCounts counts = poster_->counts();
  if (counts.failed == 0) return;
  warned_ = true;
  logger_.warning("progress for Kubeflow Trainer's status server was not posted (" + counts.first_error +
                  "); training goes on, and run_end counts the posts that failed");
}

}  // namespace dtrain
