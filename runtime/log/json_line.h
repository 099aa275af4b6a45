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

// Declares to_json for a plain record whose fields the run log writes under their own names, in the
// order given: DTRAIN_JSON_RECORD(CheckpointRecord, epoch, step, ...), in the record's namespace, then
// `record["key"] = value` and JsonRecord(value) work on it. nlohmann 3.11.2's NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE
// (Debian 12's) writes only nlohmann::json, whose objects sort their keys; this is the same field-by-field
// expansion of the library's, for the ordered records the run log keeps.
#define DTRAIN_JSON_RECORD(Type, ...)                                           \
  inline void to_json(JsonRecord& nlohmann_json_j, const Type& nlohmann_json_t) { \
    NLOHMANN_JSON_EXPAND(NLOHMANN_JSON_PASTE(NLOHMANN_JSON_TO, __VA_ARGS__))    \
  }

}  // namespace dtrain
