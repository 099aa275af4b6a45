// CIFAR-10's binary format: the input is data_batch_1.bin of a directory whose five other files hold
// one valid record each.
#include <ATen/ATen.h>

#include <cstdlib>

#include "runtime/data/cifar10.h"
#include "runtime/util/error.h"
#include "test/fuzz/fuzz_target.h"

namespace dtrain::fuzz::cifar_target {
namespace {

std::string record(uint8_t label) {
  std::string r(3073, '\0');
  r[0] = static_cast<char>(label);
  for (size_t i = 1; i < r.size(); ++i) r[i] = static_cast<char>(i * 7 % 256);
  return r;
}

const std::string& batch_dir() {
  static const std::string dir = [] {
    const std::string d = dtrain::fuzz::scratch_dir();
    for (const char* name : {"data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"}) {
      dtrain::fuzz::write_bytes(d + "/" + name, record(3));
    }
    return d;
  }();
  return dir;
}

void write_seeds(const std::string& dir) {
  write_bytes(dir + "/two-records", record(0) + record(9));
  write_bytes(dir + "/one-record", record(5));
}

int test_one_input(const uint8_t* data, size_t size) {
  const std::string& dir = batch_dir();
  dtrain::fuzz::write_bytes(dir + "/data_batch_1.bin", data, size);
  try {
    const dtrain::Cifar10 c = dtrain::read_cifar10(dir);
    if (c.train.inputs.size(0) != static_cast<int64_t>(size / 3073) + 4 || c.test.inputs.size(0) != 1) std::abort();
    if (c.train.targets.max().item<int64_t>() > 9) std::abort();
  } catch (const dtrain::DataError& e) {
    dtrain::fuzz::refused(e);
  }
  return 0;
}

}  // namespace
}  // namespace dtrain::fuzz::cifar_target

DTRAIN_FUZZ_TARGET(cifar, dtrain::fuzz::cifar_target::write_seeds, dtrain::fuzz::cifar_target::test_one_input)
