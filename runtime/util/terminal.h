// Whether what this process writes to stderr ends up on a terminal, for the choice between a progress
// bar redrawn in place and plain progress lines.
#pragma once

#include <string>

namespace dtrain {

// True when stderr is a terminal, or when Open MPI started this process (OMPI_COMM_WORLD_SIZE is set)
// and its launcher, the parent process (mpirun, or orted on other nodes), writes its own stderr to a
// terminal: Open MPI gives each rank's stderr a pipe to the launcher, which copies it there, and tells
// the ranks nothing about that terminal in their environment.
bool stderr_reaches_terminal();

// Writes `line` and a newline to stderr in one write(2). A line written piece by piece (std::cerr is
// unbuffered: each << is a write) can be split by what the process writes to stdout meanwhile, since a
// launcher (mpirun, torchrun's --tee, a pod's log) copies the two streams separately: under mpirun a
// warning once arrived as "dtrain: warning: " with a stdout line between it and its text.
void print_line_to_stderr(const std::string& line);

}  // namespace dtrain
