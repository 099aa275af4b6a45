#include "runtime/bootstrap/elastic_error_file.h"

#include <ctime>
#include <nlohmann/json.hpp>

#include "runtime/util/file_io.h"
#include "runtime/util/terminal.h"

namespace dtrain {

std::string elastic_error_json(int exit_code, const std::string& message, long long unix_time_s) {
  nlohmann::json record;
  record["message"]["message"] = message;
  // torchrun's summary shows py_callstack as the failure's "traceback": a Python worker's stack, dtrain's
  // message. The agent reads the timestamp with int(); Python writes it as a string of seconds.
  record["message"]["extraInfo"]["py_callstack"] = message;
  record["message"]["extraInfo"]["timestamp"] = std::to_string(unix_time_s);
  record["message"]["errorCode"] = exit_code;
  // Invalid UTF-8 in a message (a path's bytes) becomes U+FFFD rather than an exception here.
  return record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void write_elastic_error_file(const EnvLookup& env, int exit_code, const std::string& message) noexcept {
  if (exit_code == 0) return;
  try {
    const std::optional<std::string> run_id = env("TORCHELASTIC_RUN_ID");
    const std::optional<std::string> path = env("TORCHELASTIC_ERROR_FILE");
    if (!run_id || !path || path->empty()) return;
    const std::string text = message.empty() ? "dtrain exited with status " + std::to_string(exit_code) : message;
    const std::string bytes = elastic_error_json(exit_code, text, static_cast<long long>(std::time(nullptr)));
    // In the directory the agent made for this worker and attempt; replaced whole (the agent never reads
    // half a file, and a link there is replaced, not followed).
    write_file_atomically(*path, bytes, Durability::kReplaced);
  } catch (const std::exception& e) {
    try {
      print_line_to_stderr(std::string("dtrain: warning: torchrun's error file (TORCHELASTIC_ERROR_FILE): ") +
                           e.what() + "; torchrun shows this worker's failure without its message and status");
    } catch (...) {
    }
  } catch (...) {
    // Out of memory while exiting: the exit status still says what happened.
  }
}

}  // namespace dtrain
