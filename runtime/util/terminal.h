// Whether what this process writes to stderr ends up on a terminal, for the choice between a progress
// bar redrawn in place and plain progress lines.
#pragma once

namespace dtrain {

// True when stderr is a terminal, or when Open MPI started this process (OMPI_COMM_WORLD_SIZE is set)
// and its launcher, the parent process (mpirun, or orted on other nodes), writes its own stderr to a
// terminal: Open MPI gives each rank's stderr a pipe to the launcher, which copies it there, and tells
// the ranks nothing about that terminal in their environment.
bool stderr_reaches_terminal();

}  // namespace dtrain
