// Small string helpers shared by messages and console lines.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace dtrain {

// "a, b, c" (or with another separator) of format(item) for each item; "" for no items.
template <class Range, class Format>
std::string join(const Range& items, const std::string& separator, Format format) {
  std::string text;
  bool first = true;
  for (const auto& item : items) {
    if (!first) text += separator;
    text += format(item);
    first = false;
  }
  return text;
}

inline std::string join(const std::vector<std::string>& items, const std::string& separator = ", ") {
  return join(items, separator, [](const std::string& item) -> const std::string& { return item; });
}

// A number as printf's %g writes it: "0.01", "989.4", "1e-05" (a learning rate, a data-sheet peak).
inline std::string format_number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

}  // namespace dtrain
