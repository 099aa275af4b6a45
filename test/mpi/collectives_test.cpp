#include "test/support/catch.h"

#include <ATen/ATen.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "runtime/monitor/resource_poller.h"
#include "runtime/util/error.h"
#include "runtime/util/timer.h"
#include "test/mpi/mpi_test_support.h"
#include "test/support/gpu.h"
#include "test/support/skip.h"

using namespace dtrain;

TEST_CASE("allreduce sums and averages across ranks", "[comm][mpi]") {
  auto comm = test::make_mpi_comm();
  const int n = comm->world_size();
  const double rank_value = comm->rank() + 1;
  for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    for (int64_t numel : {1, 7, 1000, (1 << 20) + 3}) {  // odd sizes: no alignment assumptions
      at::Tensor sum = at::full({numel}, rank_value, dtype);
      comm->allreduce(sum, ReduceOp::kSum);
      CHECK(at::all(sum == n * (n + 1) / 2.0).item<bool>());
      at::Tensor average = at::full({numel}, rank_value, dtype);
      comm->allreduce(average, ReduceOp::kAverage);
      CHECK(at::allclose(average, at::full({numel}, (n + 1) / 2.0, dtype)));
    }
  }
  at::Tensor counts = at::full({5}, comm->rank(), at::kLong);
  comm->allreduce(counts, ReduceOp::kSum);
  CHECK(counts[4].item<int64_t>() == n * (n - 1) / 2);
}

TEST_CASE("a rank stopped while it waits does not time out the collective once continued", "[comm][mpi]") {
  // Rank 1 waits with a 2 s timeout and is stopped (SIGSTOP, as a user or a debugger does) for about 3 s
  // meanwhile; rank 0 continues it and only then joins. The time rank 1 did not run is not its peers'
  // fault: continued, it completes instead of timing out at once and blaming rank 0. Both waits run: the
  // one the caller polls, and the one a progress thread serves.
  const Session& s = test::session();
  if (s.world_size() != 2) {
    DTRAIN_SKIP("the stop-and-continue case runs with 2 ranks");
  }
  for (const bool progress_thread : {false, true}) {
    auto comm = std::make_unique<MpiCommunicator>(s, WaitOptions{s.rank() == 1 ? 2.0 : 60.0, nullptr, {}}, progress_thread);
    at::Tensor pid = at::full({2}, 0, at::kLong);
    pid[s.rank()] = static_cast<int64_t>(::getpid());
    comm->allreduce(pid, ReduceOp::kSum);
    at::Tensor t = at::full({1000}, static_cast<float>(s.rank() + 1), at::kFloat);
    std::string error = "no error";
    if (s.rank() == 1) {
      std::thread stopper([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        ::kill(::getpid(), SIGSTOP);
      });
      try {
        comm->allreduce(t, ReduceOp::kSum);
      } catch (const CommError& e) {
        error = e.what();
      }
      stopper.join();
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(3300));
      ::kill(static_cast<pid_t>(pid[1].item<int64_t>()), SIGCONT);
      comm->allreduce(t, ReduceOp::kSum);
    }
    INFO("progress thread " << progress_thread);
    CHECK(error == "no error");
    CHECK(at::all(t == 3.0f).item<bool>());
  }
}

TEST_CASE("several asynchronous allreduces can be in flight at once", "[comm][mpi]") {
  auto comm = test::make_mpi_comm();
  const int n = comm->world_size();
  std::vector<at::Tensor> tensors;
  std::vector<std::unique_ptr<Work>> works;
  for (int i = 0; i < 6; ++i) {
    tensors.push_back(at::full({1000 * (i + 1)}, static_cast<float>(comm->rank() + i), at::kFloat));
    works.push_back(comm->allreduce_async(tensors.back(), ReduceOp::kSum));
  }
  while (!works[0]->is_completed()) {
  }
  CHECK(works[0]->is_completed());  // stays completed
  for (auto& work : works) work->wait();
  for (int i = 0; i < 6; ++i) {
    const float expected = static_cast<float>(n * (n - 1) / 2 + n * i);
    CHECK(at::all(tensors[i] == expected).item<bool>());
  }
}

TEST_CASE("a non-blocking allreduce completes while the caller computes, with no MPI call of its own",
          "[comm][mpi]") {
  // Open MPI moves a collective's data only inside MPI calls: without the communicator's progress thread,
  // 16 MiB in several ring rounds would still be in flight after the caller's "backward" (a sleep). The
  // thread runs where ranks span hosts; here it is asked for.
  auto comm = std::make_unique<MpiCommunicator>(test::session(), WaitOptions{120.0, nullptr, {}}, true);
  at::Tensor t = at::full({4 << 20}, static_cast<float>(comm->rank() + 1), at::kFloat);
  comm->barrier();
  std::unique_ptr<Work> work = comm->allreduce_async(t, ReduceOp::kSum);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const bool done_before_asked = work->is_completed();
  work->wait();
  const int n = comm->world_size();
  CHECK(done_before_asked);
  CHECK(at::all(t == static_cast<float>(n * (n + 1) / 2)).item<bool>());
}

// The process's CPU seconds while rank 0 waits `late_s` for the last rank to join an allreduce.
static double cpu_while_waiting(bool active, double late_s) {
  WaitOptions wait{120.0, nullptr, {}};
  wait.active = active;
  MpiCommunicator comm(test::session(), wait, true);  // as across hosts
  at::Tensor t = at::ones({1024}, at::kFloat);
  comm.barrier();
  if (comm.rank() == comm.world_size() - 1) std::this_thread::sleep_for(std::chrono::duration<double>(late_s));
  const double before = process_cpu_s();
  comm.allreduce(t, ReduceOp::kSum);
  const double used = process_cpu_s() - before;
  CHECK(at::all(t == static_cast<float>(comm.world_size())).item<bool>());
  return used;
}

TEST_CASE("a rank waiting for a late peer leaves its CPU to others; comm.wait active polls", "[comm][mpi]") {
  const double late_s = 0.5;
  const double passive = cpu_while_waiting(false, late_s);
  const double active = cpu_while_waiting(true, late_s);
  auto comm = test::make_mpi_comm();
  if (comm->rank() == 0) {
    INFO("rank 0's CPU while waiting " << late_s << " s: passive " << passive << " s, active " << active << " s");
    // The sleeping wait still wakes up to 4000 times a second (a 250 us pause at most), each wake an
    // MPI_Test through every transport: 10-20% of a core on 2-core VMs, 0.05-0.10 s here. A wait that
    // polls takes the whole core, so the bound sits between the two with room for a slower machine.
    CHECK(passive < 0.3 * late_s);
    CHECK(passive < 0.5 * active);
    // The control: the same measure sees a wait that polls (with some of the core lost to the peers on a
    // machine with more ranks than cores).
    CHECK(active > 0.3 * late_s);
  }
}

TEST_CASE("broadcast copies the root's tensor to every rank", "[comm][mpi]") {
  auto comm = test::make_mpi_comm();
  for (int root : {0, comm->world_size() - 1}) {
    at::Tensor t = at::full({3, 5}, static_cast<double>(comm->rank() * 10 + 1), at::kDouble);
    comm->broadcast(t, root);
    CHECK(at::all(t == root * 10 + 1).item<bool>());
  }
}

TEST_CASE("allgather stacks small values by rank, and barrier returns", "[comm][mpi]") {
  auto comm = test::make_mpi_comm();
  const at::Tensor gathered = comm->allgather(at::tensor(std::vector<int64_t>{comm->rank(), 7}, at::kLong));
  REQUIRE(gathered.sizes() == at::IntArrayRef({comm->world_size(), 2}));
  for (int r = 0; r < comm->world_size(); ++r) CHECK(gathered[r][0].item<int64_t>() == r);
  comm->barrier();
}

TEST_CASE("bad collective arguments fail locally, before anything is sent", "[comm][mpi]") {
  auto comm = test::make_mpi_comm();
  at::Tensor ints = at::ones({4}, at::kLong);
  CHECK_THROWS_AS(comm->allreduce_async(ints, ReduceOp::kAverage), CommError);
  at::Tensor strided = at::ones({4, 4}).t();
  CHECK_THROWS_WITH(comm->allreduce_async(strided, ReduceOp::kSum), Catch::Matchers::Contains("contiguous"));
  at::Tensor complex = at::ones({4}, at::kComplexFloat);
  CHECK_THROWS_WITH(comm->allreduce_async(complex, ReduceOp::kSum), Catch::Matchers::Contains("unsupported dtype"));
  at::Tensor t = at::ones({2});
  CHECK_THROWS_WITH(comm->broadcast(t, comm->world_size()), Catch::Matchers::Contains("out of range"));
}

TEST_CASE("ranks agree on the first error and its exit status", "[bootstrap][mpi]") {
  MpiSession& session = test::session();
  const WaitOptions wait{60.0, nullptr, {}};
  CHECK_FALSE(session.first_error(Failure{}, wait).failed());
  const int last = session.world_size() - 1;
  const std::string world = std::to_string(session.world_size());
  // An error without an origin takes the failing rank's.
  const Failure local = session.rank() == last ? Failure{kExitIo, "disk full", {}} : Failure{};
  const Failure agreed = session.first_error(local, wait);
  CHECK(agreed.message == "disk full");
  CHECK(agreed.origin.rank == last);
  CHECK(agreed.text() == "[rank " + std::to_string(last) + "/" + world + "] disk full");
  CHECK(agreed.exit_code == kExitIo);
  // One with an origin keeps it, host included.
  const Failure gpu =
      session.rank() == last ? Failure{kExitComm, "cudaMalloc failed", {last, session.world_size(), "gpu-7"}} : Failure{};
  CHECK(session.first_error(gpu, wait).text() == "[rank " + std::to_string(last) + "/" + world + " gpu-7] cudaMalloc failed");
  // Every rank failing: the lowest rank's error wins; rank 0's has no origin, being everyone's.
  const Failure everyone = session.first_error(Failure{kExitConfig + session.rank(), "bad config", {}}, wait);
  CHECK(everyone.text() == "bad config");
  CHECK(everyone.exit_code == kExitConfig);
  CHECK(session.local_world_size() >= 1);
  CHECK(session.hostnames().size() == static_cast<size_t>(session.world_size()));
}

TEST_CASE("16-bit float allreduces sum in float and round once", "[comm][mpi]") {
  auto comm = test::make_mpi_comm();
  const int n = comm->world_size();
  for (at::ScalarType dtype : {at::kBFloat16, at::kHalf}) {
    // Small integers are exact in both formats, so the expected sum is exact too.
    at::Tensor sum = at::full({1001}, comm->rank() + 1, dtype);
    comm->allreduce(sum, ReduceOp::kSum);
    CHECK(sum.scalar_type() == dtype);
    CHECK(at::all(sum.to(at::kFloat) == n * (n + 1) / 2.0f).item<bool>());
    at::Tensor average = at::full({17}, 2.0 * (comm->rank() + 1), dtype);
    comm->allreduce(average, ReduceOp::kAverage);
    CHECK(at::allclose(average.to(at::kFloat), at::full({17}, static_cast<float>(n + 1))));
  }
}

TEST_CASE("the MPI backend stages CUDA tensors through host memory", "[comm][mpi][gpu]") {
  DTRAIN_SKIP_WITHOUT_GPU();
  auto comm = test::make_mpi_comm();
  const int n = comm->world_size();
  const at::TensorOptions cuda = at::TensorOptions().device(at::kCUDA);  // every rank may share one GPU
  at::Tensor sum = at::full({(1 << 20) + 5}, comm->rank() + 1.0f, cuda);
  comm->allreduce(sum, ReduceOp::kSum);
  CHECK(sum.is_cuda());
  CHECK(at::all(sum == n * (n + 1) / 2.0f).item<bool>());
  at::Tensor root = at::full({33}, static_cast<float>(comm->rank()), cuda.dtype(at::kFloat));
  comm->broadcast(root, n - 1);
  CHECK(at::all(root == static_cast<float>(n - 1)).item<bool>());
  const at::Tensor gathered = comm->allgather(at::full({2}, static_cast<int64_t>(comm->rank()), cuda.dtype(at::kLong)));
  CHECK(gathered.is_cuda());
  CHECK(gathered.select(1, 1).cpu().equal(at::arange(n, at::kLong)));
}

TEST_CASE("resource samples of every rank reach rank 0, however many each has", "[monitor][mpi]") {
  auto comm = test::make_mpi_comm();
  // Rank r has r samples (rank 0 none), each marked with its rank and position.
  std::vector<ResourceSample> mine;
  for (int i = 0; i < comm->rank(); ++i) {
    ResourceSample s;
    s.unix_time_s = 1000.0 * comm->rank() + i;
    s.rss_bytes = comm->rank();
    mine.push_back(s);
  }
  const auto by_rank = gather_samples(*comm, mine);
  if (!comm->is_root()) {
    CHECK(by_rank.empty());
    return;
  }
  REQUIRE(static_cast<int>(by_rank.size()) == comm->world_size());
  for (int r = 0; r < comm->world_size(); ++r) {
    REQUIRE(static_cast<int>(by_rank[static_cast<size_t>(r)].size()) == r);
    for (int i = 0; i < r; ++i) {
      CHECK(by_rank[static_cast<size_t>(r)][static_cast<size_t>(i)].unix_time_s == 1000.0 * r + i);
      CHECK(by_rank[static_cast<size_t>(r)][static_cast<size_t>(i)].rss_bytes == r);
    }
  }
}
