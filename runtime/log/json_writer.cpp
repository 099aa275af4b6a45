#include "runtime/log/json_writer.h"

#include <cmath>
#include <cstdio>

namespace dtrain {

std::string json_quote(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

void JsonObject::key(const std::string& name) {
  if (!body_.empty()) body_ += ",";
  body_ += json_quote(name) + ":";
}

JsonObject& JsonObject::add(const std::string& name, const std::string& value) {
  key(name);
  body_ += json_quote(value);
  return *this;
}

JsonObject& JsonObject::add(const std::string& name, double value) {
  key(name);
  if (!std::isfinite(value)) {
    body_ += "null";
  } else {
    char text[32];
    std::snprintf(text, sizeof text, "%.10g", value);
    body_ += text;
  }
  return *this;
}

JsonObject& JsonObject::add(const std::string& name, int64_t value) {
  key(name);
  body_ += std::to_string(value);
  return *this;
}

JsonObject& JsonObject::add(const std::string& name, bool value) {
  key(name);
  body_ += value ? "true" : "false";
  return *this;
}

JsonObject& JsonObject::add(const std::string& name, const std::vector<std::string>& values) {
  key(name);
  body_ += "[";
  for (size_t i = 0; i < values.size(); ++i) body_ += (i ? "," : "") + json_quote(values[i]);
  body_ += "]";
  return *this;
}

JsonObject& JsonObject::add(const std::string& name, const std::vector<int64_t>& values) {
  key(name);
  body_ += "[";
  for (size_t i = 0; i < values.size(); ++i) body_ += (i ? "," : "") + std::to_string(values[i]);
  body_ += "]";
  return *this;
}

JsonObject& JsonObject::add_raw(const std::string& name, const std::string& json) {
  key(name);
  body_ += json;
  return *this;
}

}  // namespace dtrain
