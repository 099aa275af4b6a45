#include "runtime/log/json_line.h"

namespace dtrain {

std::string json_line(const JsonRecord& record) {
  // indent -1: one line; ensure_ascii false: valid UTF-8 passes through as it is; replace: an invalid
  // byte becomes U+FFFD instead of throwing on the way into the log.
  return record.dump(-1, ' ', false, JsonRecord::error_handler_t::replace);
}

}  // namespace dtrain
