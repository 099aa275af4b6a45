// TensorBoard event files as TensorFlow's TFRecord reader checks them: every record's length and data
// under a masked CRC-32C, recomputed here bit by bit (not with the writer's table), then the Event
// messages. test/log/tensorboard_test.py reads a real run's files with TensorBoard's own reader.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "runtime/log/tensorboard_event.pb.h"
#include "runtime/log/tensorboard_writer.h"
#include "test/support/temp_dir.h"

using namespace dtrain;
using dtrain::test::TempDir;

namespace {

uint32_t crc32c_bitwise(const std::string& data) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : data) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

uint32_t masked(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

uint64_t le(const std::string& bytes, size_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes[at + static_cast<size_t>(i)]);
  return v;
}

// The Events of the one event file in `dir`, each record's framing checked.
std::vector<tensorboard::Event> read_events(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  REQUIRE(files.size() == 1);
  CHECK(files[0].filename().string().rfind("events.out.tfevents.", 0) == 0);
  std::ifstream in(files[0], std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<tensorboard::Event> events;
  size_t at = 0;
  while (at < bytes.size()) {
    REQUIRE(bytes.size() - at >= 16);
    const uint64_t length = le(bytes, at, 8);
    CHECK(le(bytes, at + 8, 4) == masked(crc32c_bitwise(bytes.substr(at, 8))));
    REQUIRE(bytes.size() - at - 16 >= length);
    const std::string data = bytes.substr(at + 12, length);
    CHECK(le(bytes, at + 12 + length, 4) == masked(crc32c_bitwise(data)));
    tensorboard::Event event;
    REQUIRE(event.ParseFromString(data));
    events.push_back(event);
    at += 16 + length;
  }
  return events;
}

}  // namespace

TEST_CASE("CRC-32C as the test computes it matches the standard's check value", "[log][tensorboard]") {
  CHECK(crc32c_bitwise("123456789") == 0xE3069283u);  // RFC 3720, B.4
}

TEST_CASE("the TensorBoard writer frames Events as TFRecords at the run's global samples", "[log][tensorboard]") {
  TempDir tmp;
  const std::filesystem::path dir = std::filesystem::path(tmp.path()) / "tensorboard";
  // An earlier process of the run started at second 1795649990: resource steps count from there.
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "events.out.tfevents.1795649990.node-0.123.0").close();
  {
    TensorBoardWriter writer(Directory::open(dir.string(), true), 1000);  // 1000 training samples an epoch
    ProgressInfo progress{2, 640, 1000, MetricValues({{"loss", 0.25, 160.0, 640.0}}), 10, 1234.5, 60.0};
    writer.train_progress(progress);
    EpochStats stats;
    stats.epoch = 2;
    stats.train = MetricValues({{"loss", 0.2, 200.0, 1000.0}});
    stats.test = MetricValues({{"accuracy", 0.875, 875.0, 1000.0}});
    stats.epoch_s = 3.5;
    stats.mfu = 0.125;
    writer.epoch_end(stats);
    ResourceSample sample;
    sample.unix_time_s = 1795650000.25;
    sample.cpu_percent = 97.5;
    sample.rss_bytes = 123456789;
    writer.resource_samples(1, {sample});
  }
  std::filesystem::remove(dir / "events.out.tfevents.1795649990.node-0.123.0");
  const std::vector<tensorboard::Event> events = read_events(dir);
  REQUIRE(events.size() == 3);
  CHECK(events[0].file_version() == "brain.Event:2");
  // Epoch 2's 640th sample: 1000 + 640.
  CHECK(events[1].step() == 1640);
  REQUIRE(events[1].summary().value_size() == 2);
  CHECK(events[1].summary().value(0).tag() == "train/loss");
  CHECK(events[1].summary().value(0).simple_value() == 0.25f);
  CHECK(events[1].summary().value(1).tag() == "train/samples_per_s");
  CHECK(events[1].summary().value(1).simple_value() == 1234.5f);
  // The end of epoch 2: 2 x 1000 samples.
  CHECK(events[2].step() == 2000);
  std::vector<std::string> tags;
  for (const auto& v : events[2].summary().value()) tags.push_back(v.tag());
  CHECK(tags[0] == "epoch/train_loss");
  CHECK(tags[1] == "epoch/test_accuracy");
  CHECK(std::find(tags.begin(), tags.end(), "epoch/mfu") != tags.end());
  CHECK(std::find(tags.begin(), tags.end(), "epoch/exposed_comm_s") != tags.end());

  const std::vector<tensorboard::Event> rank1 = read_events(dir / "rank1");
  REQUIRE(rank1.size() == 2);
  CHECK(rank1[1].step() == 10250);  // ms from the run's first start
  CHECK(rank1[1].wall_time() == 1795650000.25);
  CHECK(rank1[1].summary().value(0).tag() == "resources/cpu_percent");
  CHECK(rank1[1].summary().value(1).simple_value() == static_cast<float>(123456789));
}

TEST_CASE("the TensorBoard writer refuses an image that is not a PNG, naming it", "[log][tensorboard]") {
  TempDir tmp;
  const std::string bad = (std::filesystem::path(tmp.path()) / "grid.png").string();
  std::ofstream(bad) << "not a png";
  TensorBoardWriter writer(Directory::open((std::filesystem::path(tmp.path()) / "tb").string(), true), 10);
  CHECK_THROWS_WITH(writer.images(1, {bad}), Catch::Contains(bad) && Catch::Contains("not a PNG"));
}
