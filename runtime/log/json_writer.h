// Builds one JSON object per line for the run log. Small on purpose: flat objects of scalars, string
// arrays and number arrays, plus pre-rendered nested objects.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtrain {

class JsonObject final {
 public:
  JsonObject& add(const std::string& key, const std::string& value);
  JsonObject& add(const std::string& key, const char* value) { return add(key, std::string(value)); }
  JsonObject& add(const std::string& key, double value);  // NaN and infinities become null
  JsonObject& add(const std::string& key, int64_t value);
  JsonObject& add(const std::string& key, int value) { return add(key, static_cast<int64_t>(value)); }
  JsonObject& add(const std::string& key, bool value);
  JsonObject& add(const std::string& key, const std::vector<std::string>& values);
  JsonObject& add(const std::string& key, const std::vector<int64_t>& values);
  JsonObject& add_raw(const std::string& key, const std::string& json);  // `json` must be valid JSON
  std::string str() const { return "{" + body_ + "}"; }

 private:
  void key(const std::string& name);
  std::string body_;
};

std::string json_quote(const std::string& text);

}  // namespace dtrain
