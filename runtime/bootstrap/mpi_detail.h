// Internal to runtime/: MPI call checking and timed waits. Only .cpp files include this (it pulls in
// mpi.h); public headers stay free of MPI types.
#pragma once

#include <mpi.h>

#include <string>

#include "runtime/bootstrap/wait_options.h"
#include "runtime/util/check.h"

namespace dtrain::detail {

std::string mpi_error_string(int code);
ErrorOrigin mpi_origin();  // this process's rank and the job size; unknown before MPI_Init and after finalize

// Polls `request` until it completes, marked as a wait on `wait.activity`. Throws CommError naming `what`
// after `wait.timeout_s` seconds, with `wait.explain_stall()`'s account of the peers, so a dead or stuck
// peer fails this rank instead of hanging it.
void wait_mpi_request(MPI_Request* request, const WaitOptions& wait, const std::string& what);

// Throws the CommError of a wait for `what` that passed wait.timeout_s, with the peers' account.
[[noreturn]] void throw_wait_timeout(const WaitOptions& wait, const std::string& what);

}  // namespace dtrain::detail

// Throws CommError "[rank r/n] MPI_Allreduce(...) failed (<MPI message>), file.cpp:42".
#define DTRAIN_MPI_CHECK(call)                                                                        \
  do {                                                                                                \
    const int dtrain_mpi_rc_ = (call);                                                                \
    if (dtrain_mpi_rc_ != MPI_SUCCESS) {                                                              \
      ::dtrain::detail::throw_call_error(::dtrain::detail::mpi_origin(), #call,                       \
                                         ::dtrain::detail::mpi_error_string(dtrain_mpi_rc_), __FILE__, \
                                         __LINE__);                                                   \
    }                                                                                                 \
  } while (false)
