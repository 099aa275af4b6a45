// Small string helpers shared by messages and console lines.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace dtrain {

// "a, b, c" (or with another separator); "" for no items.
inline std::string join(const std::vector<std::string>& items, const std::string& separator = ", ") {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : separator) + item;
  return text;
}

// A number as printf's %g writes it: "0.01", "989.4", "1e-05" (a learning rate, a data-sheet peak).
inline std::string format_number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

}  // namespace dtrain
