#include "runtime/bootstrap/mpi_session.h"

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "runtime/bootstrap/mpi_detail.h"

namespace dtrain {

MpiSession::MpiSession(int* argc, char*** argv, bool started_alone) {
  // Open MPI's non-blocking allreduce (libnbc) picks a binomial reduce + broadcast for in-place buffers
  // and for fewer than 4 ranks, which made dtrain's bucket allreduces 2-3x slower than blocking
  // MPI_Allreduce at every size from 64 KB to 256 MB (bench/allreduce_bench, 2 ranks). Its ring is
  // within 1.2x. Prefer it unless the user chose an algorithm; other MPIs ignore the variable.
  setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", /*overwrite=*/0);
  if (started_alone) setenv("OMPI_MCA_ess_singleton_isolated", "1", /*overwrite=*/0);
  int provided = 0;
  DTRAIN_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    throw CommError("MPI_Init_thread provided thread level " + std::to_string(provided) +
                    ", dtrain needs at least MPI_THREAD_SERIALIZED (" + std::to_string(MPI_THREAD_SERIALIZED) +
                    "): autograd hooks start collectives from the backward thread");
  }
  thread_multiple_ = provided >= MPI_THREAD_MULTIPLE;
  // Errors come back as codes and become CommErrors with context, instead of MPI's default abort.
  DTRAIN_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  DTRAIN_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  DTRAIN_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world_size_));

  MPI_Comm node_comm = MPI_COMM_NULL;
  DTRAIN_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_comm));
  DTRAIN_MPI_CHECK(MPI_Comm_rank(node_comm, &local_rank_));
  DTRAIN_MPI_CHECK(MPI_Comm_size(node_comm, &local_world_size_));
  DTRAIN_MPI_CHECK(MPI_Comm_free(&node_comm));

  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  DTRAIN_MPI_CHECK(MPI_Get_processor_name(name, &length));
  std::vector<char> all(static_cast<size_t>(world_size_) * MPI_MAX_PROCESSOR_NAME, '\0');
  DTRAIN_MPI_CHECK(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME,
                                 MPI_CHAR, MPI_COMM_WORLD));
  for (int r = 0; r < world_size_; ++r) {
    const char* entry = all.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME;
    hostnames_.emplace_back(entry, strnlen(entry, MPI_MAX_PROCESSOR_NAME));
  }

  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  DTRAIN_MPI_CHECK(MPI_Get_library_version(version, &length));
  mpi_library_version_.assign(version, static_cast<size_t>(length));
  // Open MPI reports "Open MPI v4.1.4, package: ..., ident: ..., repo rev: ..., date"; keep the first part.
  const auto comma = mpi_library_version_.find(',');
  if (comma != std::string::npos) mpi_library_version_.resize(comma);
  while (!mpi_library_version_.empty() && std::isspace(static_cast<unsigned char>(mpi_library_version_.back()))) {
    mpi_library_version_.pop_back();
  }
}

MpiSession::~MpiSession() {
  if (!aborted_) MPI_Finalize();
}

std::string MpiSession::broadcast(const std::string& bytes, int root, const WaitOptions& wait,
                                  const std::string& what) const {
  if (world_size_ == 1) return bytes;
  long long size = static_cast<long long>(bytes.size());
  MPI_Request request = MPI_REQUEST_NULL;
  DTRAIN_MPI_CHECK(MPI_Ibcast(&size, 1, MPI_LONG_LONG, root, MPI_COMM_WORLD, &request));
  detail::wait_mpi_request(&request, wait, "broadcasting " + what);
  std::string value = rank_ == root ? bytes : std::string(static_cast<size_t>(size), '\0');
  DTRAIN_MPI_CHECK(MPI_Ibcast(value.data(), static_cast<int>(size), MPI_CHAR, root, MPI_COMM_WORLD, &request));
  detail::wait_mpi_request(&request, wait, "broadcasting " + what);
  return value;
}

c10::intrusive_ptr<c10d::Store> MpiSession::store(const WaitOptions& wait) {
  if (store_) return store_;
  const std::string& host = hostnames_.front();
  c10d::TCPStoreOptions options;
  options.isServer = rank_ == 0;
  options.port = 0;  // rank 0: any free port
  options.numWorkers = static_cast<size_t>(world_size_);
  options.waitWorkers = false;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(wait.timeout_s * 1000.0));
  std::string port;
  try {
    c10::intrusive_ptr<c10d::TCPStore> store;
    if (rank_ == 0) {
      store = c10::make_intrusive<c10d::TCPStore>(host, options);
      port = std::to_string(store->getPort());
    }
    port = broadcast(port, 0, wait, "the store's port");
    if (rank_ != 0) {
      options.port = static_cast<std::uint16_t>(std::stoi(port));
      store = c10::make_intrusive<c10d::TCPStore>(host, options);
    }
    store_ = store;
  } catch (const CommError&) {
    throw;
  } catch (const std::exception& e) {
    throw CommError(origin(), "cannot " + std::string(rank_ == 0 ? "start" : "reach") + " the c10d store of rank 0 at " +
                                  host + (port.empty() ? "" : ":" + port) + ": " + message_without_trace(e));
  }
  return store_;
}

Failure MpiSession::first_error(const Failure& local, const WaitOptions& wait) const {
  if (world_size_ == 1) return local;
  // Lowest failing rank first; then that rank's exit status and message.
  int failing = local.failed() ? rank_ : world_size_;
  MPI_Request request = MPI_REQUEST_NULL;
  DTRAIN_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, &failing, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &request));
  detail::wait_mpi_request(&request, wait, "agreeing on errors across ranks");
  if (failing == world_size_) return Failure{};

  // The failing rank's exit status, message and origin (rank, job size, host), in two broadcasts.
  long long header[5] = {local.exit_code, static_cast<long long>(local.message.size()), local.origin.rank,
                         local.origin.world_size, static_cast<long long>(local.origin.host.size())};
  DTRAIN_MPI_CHECK(MPI_Ibcast(header, 5, MPI_LONG_LONG, failing, MPI_COMM_WORLD, &request));
  detail::wait_mpi_request(&request, wait, "broadcasting an error message");
  Failure agreed;
  agreed.exit_code = static_cast<int>(header[0]);
  std::string text = failing == rank_ ? local.message + local.origin.host
                                      : std::string(static_cast<size_t>(header[1] + header[4]), '\0');
  DTRAIN_MPI_CHECK(MPI_Ibcast(text.data(), static_cast<int>(text.size()), MPI_CHAR, failing, MPI_COMM_WORLD, &request));
  detail::wait_mpi_request(&request, wait, "broadcasting an error message");
  agreed.message = text.substr(0, static_cast<size_t>(header[1]));
  agreed.origin = ErrorOrigin{static_cast<int>(header[2]), static_cast<int>(header[3]),
                              text.substr(static_cast<size_t>(header[1]))};
  if (!agreed.origin.known() && failing != 0) agreed.origin = ErrorOrigin{failing, world_size_, {}};
  return agreed;
}

void MpiSession::abort(int exit_code) {
  aborted_ = true;
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::abort();  // MPI_Abort does not return; this satisfies [[noreturn]] if an implementation does
}

}  // namespace dtrain
