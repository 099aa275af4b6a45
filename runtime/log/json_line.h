// JSON records for the run log, the profiler's trace and the benchmarks' results, built with nlohmann's
// JSON library: ordered objects (keys stay in the order they were added, so a record reads "event",
// "time" first) written on one line as valid UTF-8 whatever the strings hold.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace dtrain {

using JsonRecord = nlohmann::ordered_json;

// `record` as one line of JSON, without a newline. A string that is not valid UTF-8 (a path holding a
// Latin-1 byte, say) has each invalid byte replaced by U+FFFD, so every reader can parse the line; NaN
// and infinities become null.
std::string json_line(const JsonRecord& record);

}  // namespace dtrain
