// Small string helpers shared by messages and console lines.
#pragma once

#include <string>
#include <vector>

namespace dtrain {

// "a, b, c" (or with another separator); "" for no items.
inline std::string join(const std::vector<std::string>& items, const std::string& separator = ", ") {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : separator) + item;
  return text;
}

}  // namespace dtrain
