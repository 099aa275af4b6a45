// Main of the unit tests (no MPI, no GPU).
#include "test/support/catch_session.h"

int main(int argc, char** argv) { return dtrain::test::run_catch_session(argc, argv); }
