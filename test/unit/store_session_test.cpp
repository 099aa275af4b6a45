// The torchrun-style session: ranks meet in a c10d store, agree on errors and hand values over, and a
// missing rank or an unreachable store fails with the address and the ranks instead of hanging. The
// ranks are threads of this process: the store is a real TCPStore on the loopback interface.
#include "test/support/catch.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <unistd.h>

#include <functional>
#include <future>
#include <memory>
#include <vector>

#include "runtime/bootstrap/store_heartbeat.h"
#include "runtime/bootstrap/store_session.h"
#include "runtime/util/error.h"

using namespace dtrain;
using Catch::Matchers::Contains;

namespace {

// A port nobody listens on right now.
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  socklen_t length = sizeof address;
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
  close(fd);
  return ntohs(address.sin_port);
}

TorchEnv env_of(int rank, int world_size, int port) {
  TorchEnv env;
  env.rank = rank;
  env.world_size = world_size;
  env.master_addr = "127.0.0.1";
  env.master_port = port;
  env.summary = "RANK=" + std::to_string(rank) + " WORLD_SIZE=" + std::to_string(world_size);
  return env;
}

// Runs `body` as every rank of a world of `world_size`, each rank in its own thread with its own session.
template <class Result>
std::vector<Result> on_every_rank(int world_size, const std::function<Result(StoreSession&)>& body) {
  const int port = free_port();
  std::vector<std::future<Result>> ranks;
  for (int r = 0; r < world_size; ++r) {
    ranks.push_back(std::async(std::launch::async, [=] {
      StoreSession session(env_of(r, world_size, port), 20.0);
      return body(session);
    }));
  }
  std::vector<Result> results;
  for (auto& rank : ranks) results.push_back(rank.get());
  return results;
}

const WaitOptions kWait{20.0, nullptr, {}};

}  // namespace

TEST_CASE("ranks meet in the store and learn each other's hosts", "[bootstrap]") {
  const auto facts = on_every_rank<std::vector<int>>(3, [](StoreSession& s) {
    return std::vector<int>{s.rank(), s.world_size(), s.local_rank(), s.local_world_size(),
                            static_cast<int>(s.hostnames().size()), static_cast<int>(s.unique_hosts().size())};
  });
  for (int r = 0; r < 3; ++r) CHECK(facts[static_cast<size_t>(r)] == std::vector<int>{r, 3, r, 3, 3, 1});
}

TEST_CASE("the store session agrees on the lowest failing rank's error", "[bootstrap]") {
  const auto agreed = on_every_rank<std::vector<Failure>>(3, [](StoreSession& s) {
    std::vector<Failure> out;
    out.push_back(s.first_error(Failure{}, kWait));
    const Failure disk = s.rank() >= 1 ? Failure{kExitIo, "disk full on rank " + std::to_string(s.rank()), {}} : Failure{};
    out.push_back(s.first_error(disk, kWait));
    const Failure gpu = s.rank() == 2 ? Failure{kExitComm, "cudaMalloc failed", {2, 3, "gpu-7"}} : Failure{};
    out.push_back(s.first_error(gpu, kWait));
    out.push_back(s.first_error(Failure{kExitConfig, "bad config", {}}, kWait));
    return out;
  });
  for (const std::vector<Failure>& rank : agreed) {
    CHECK_FALSE(rank[0].failed());
    CHECK(rank[1].exit_code == kExitIo);
    CHECK(rank[1].message == "disk full on rank 1");
    CHECK(rank[1].origin.rank == 1);
    CHECK(rank[2].text() == "[rank 2/3 gpu-7] cudaMalloc failed");
    CHECK(rank[3].text() == "bad config");  // rank 0's, met by every rank alike: no rank named
  }
}

TEST_CASE("the store session hands values from any rank to all, and shares its store", "[bootstrap]") {
  const auto values = on_every_rank<std::vector<std::string>>(2, [](StoreSession& s) {
    std::vector<std::string> out;
    out.push_back(s.broadcast(s.rank() == 1 ? std::string("id\0bytes", 8) : "", 1, kWait, "a test value"));
    out.push_back(s.broadcast(s.rank() == 0 ? "second" : "", 0, kWait, "a test value"));
    c10::intrusive_ptr<c10d::Store> store = s.store(kWait);
    store->set("from/" + std::to_string(s.rank()), std::vector<uint8_t>{static_cast<uint8_t>('a' + s.rank())});
    const std::vector<uint8_t> other = store->get("from/" + std::to_string(1 - s.rank()));
    out.emplace_back(other.begin(), other.end());
    return out;
  });
  CHECK(values[0] == std::vector<std::string>{std::string("id\0bytes", 8), "second", "b"});
  CHECK(values[1] == std::vector<std::string>{std::string("id\0bytes", 8), "second", "a"});
}

TEST_CASE("a rank that never joins fails the others with the address and the missing rank", "[bootstrap]") {
  const int port = free_port();
  REQUIRE_THROWS_AS(StoreSession(env_of(0, 3, port), 1.0), CommError);
  try {
    StoreSession session(env_of(0, 3, port), 1.0);
  } catch (const CommError& e) {
    CHECK_THAT(std::string(e.what()), Contains("[rank 0/3] joining the 3 ranks of WORLD_SIZE did not complete within 1 s (comm.timeout_s)") &&
                                          Contains("ranks 1, 2 of 3 did not arrive") &&
                                          Contains("store at 127.0.0.1:" + std::to_string(port)));
  }
}

TEST_CASE("a MASTER_ADDR that does not resolve is named as the reason", "[bootstrap]") {
  TorchEnv env = env_of(1, 2, free_port());
  env.master_addr = "no-such-host.invalid";
  try {
    StoreSession session(env, 1.0);
    FAIL("joined a store at a host that does not exist");
  } catch (const CommError& e) {
    CHECK_THAT(std::string(e.what()), Contains("cannot reach the c10d store at no-such-host.invalid:") &&
                                          Contains("MASTER_ADDR 'no-such-host.invalid' does not resolve to an address here"));
  }
}

TEST_CASE("an unreachable store fails with its address and the launcher's variables", "[bootstrap]") {
  const int port = free_port();
  try {
    StoreSession session(env_of(1, 2, port), 1.0);
    FAIL("joined a store nobody hosts");
  } catch (const CommError& e) {
    CHECK_THAT(std::string(e.what()), Contains("cannot reach the c10d store at 127.0.0.1:" + std::to_string(port)) &&
                                          Contains("rank 0 hosts it") && Contains("RANK=1 WORLD_SIZE=2"));
  }
}

TEST_CASE("the store heartbeat names a rank that stopped counting, and only then", "[bootstrap]") {
  const auto seen = on_every_rank<std::vector<std::string>>(2, [](StoreSession& s) {
    Activity activity;
    activity.set_phase(Phase::kTraining, 2, 5);
    auto heartbeat = std::make_unique<StoreHeartbeat>(s, activity, StoreHeartbeatOptions{0.1, 5.0});
    std::vector<std::string> out;
    s.first_error(Failure{}, kWait);
    if (s.is_root()) out.push_back(heartbeat->diagnose());  // both count
    s.first_error(Failure{}, kWait);
    if (!s.is_root()) heartbeat.reset();  // rank 1 falls silent, as a frozen or cut-off rank does
    s.first_error(Failure{}, kWait);
    if (s.is_root()) out.push_back(heartbeat->diagnose());
    s.first_error(Failure{}, kWait);
    return out;
  });
  REQUIRE(seen[0].size() == 2);
  CHECK(seen[0][0].empty());
  CHECK_THAT(seen[0][1], Contains("rank 1/2 (host ") && Contains(") has stopped reporting to the store") &&
                             Contains("it last reported training, epoch 2, step 5"));
  CHECK_THAT(seen[0][1], !Contains("rank 0/2"));
}
