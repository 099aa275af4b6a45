#include "test/support/catch.h"

#include "runtime/util/check.h"
#include "runtime/util/error.h"

using namespace dtrain;

TEST_CASE("errors carry their origin as data and print it as a prefix", "[error]") {
  CHECK(ErrorOrigin{}.prefix().empty());
  CHECK(ErrorOrigin{3, 16, {}}.prefix() == "[rank 3/16] ");
  CHECK(ErrorOrigin{3, 16, "gpu-7"}.prefix() == "[rank 3/16 gpu-7] ");
  CHECK(ErrorOrigin{-1, 0, "gpu-7"}.prefix() == "[gpu-7] ");

  const CommError error(ErrorOrigin{2, 4, "node-a"}, "ncclAllReduce failed");
  CHECK(std::string(error.what()) == "[rank 2/4 node-a] ncclAllReduce failed");
  CHECK(error.message() == "ncclAllReduce failed");
  CHECK(error.origin().rank == 2);
  CHECK(exit_code_of(error) == kExitComm);

  const ConfigError plain("train.lr must be positive");
  CHECK(std::string(plain.what()) == "train.lr must be positive");
  CHECK_FALSE(plain.origin().known());
}

TEST_CASE("call and precondition checks throw with the origin they are given", "[error]") {
  try {
    dtrain::detail::throw_call_error(ErrorOrigin{1, 2, {}}, "MPI_Bcast(...)", "MPI_ERR_TRUNCATE", "src/comm/x.cpp", 42);
    FAIL("no exception");
  } catch (const CommError& e) {
    CHECK(std::string(e.what()) == "[rank 1/2] MPI_Bcast(...) failed (MPI_ERR_TRUNCATE), x.cpp:42");
    CHECK(e.origin().rank == 1);
  }
  auto check_root = [](int root) {
    DTRAIN_CHECK_AT(root < 2, CommError, (ErrorOrigin{0, 2, {}}), "root " << root << " out of range");
  };
  CHECK_NOTHROW(check_root(1));
  CHECK_THROWS_WITH(check_root(5), "[rank 0/2] root 5 out of range");
}

TEST_CASE("library messages lose the stack trace c10d appends, and nothing else", "[error]") {
  CHECK(message_without_trace(std::runtime_error("Connection closed by peer\nException raised from recv at socket.cpp:42")) ==
        "Connection closed by peer");
  CHECK(message_without_trace(std::runtime_error("two\nlines")) == "two\nlines");
}
