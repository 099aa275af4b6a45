// Catch2 main for the unit tests (no MPI, no GPU).
#define CATCH_CONFIG_MAIN
#include "test/support/catch.h"
