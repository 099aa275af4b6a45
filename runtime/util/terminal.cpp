#include "runtime/util/terminal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>

namespace dtrain {
namespace {

// Whether file descriptor `fd` of process `pid` is a terminal: its /proc entry opened anew (a process
// may look at its own user's processes) and asked. Non-blocking, so that a FIFO without a reader cannot
// stall the start; write-only and without O_TRUNC, so that a file is left as it is.
bool fd_of_process_is_terminal(pid_t pid, int fd) {
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  const int opened = ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  if (opened < 0) return false;
  const bool terminal = ::isatty(opened) == 1;
  ::close(opened);
  return terminal;
}

}  // namespace

bool stderr_reaches_terminal() {
  if (::isatty(STDERR_FILENO) == 1) return true;
  if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr) return false;
  return fd_of_process_is_terminal(::getppid(), STDERR_FILENO);
}

void print_line_to_stderr(const std::string& line) {
  std::cerr << (line + '\n') << std::flush;  // one insertion: one write(2) through unbuffered stderr
}

}  // namespace dtrain
