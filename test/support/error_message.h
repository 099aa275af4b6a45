// The message of what a piece of test code throws, for checks on the wording users see.
#pragma once

#include <exception>
#include <functional>
#include <string>

namespace dtrain::test {

// The message of the ErrorType (any std::exception by default) that `body` throws, or "no error". Other
// exceptions pass through, failing the test where a wrong kind of error was thrown.
template <class ErrorType = std::exception>
std::string error_message(const std::function<void()>& body) {
  try {
    body();
  } catch (const ErrorType& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace dtrain::test
