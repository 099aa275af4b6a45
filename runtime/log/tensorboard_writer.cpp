#include "runtime/log/tensorboard_writer.h"

#include <unistd.h>

#include <boost/crc.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <utility>

#include "runtime/log/tensorboard_event.pb.h"
#include "runtime/util/error.h"
#include "runtime/util/file_io.h"
#include "runtime/util/timer.h"

namespace dtrain {
namespace {

namespace tb = ::dtrain::tensorboard;

// TFRecord's checksum: CRC-32C (Castagnoli), rotated and offset so that a CRC of data holding CRCs does
// not degenerate (TensorFlow's crc32c::Mask). Boost.CRC's table-driven CRC is fast enough for records
// of a few hundred bytes a second.
uint32_t masked_crc32c(const void* data, size_t size) {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(data, size);
  const uint32_t value = crc.checksum();
  return ((value >> 15) | (value << 17)) + 0xa282ead8u;
}

void put_le(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// One TFRecord: length (little-endian uint64), its masked CRC, the data, the data's masked CRC.
std::string tf_record(const std::string& data) {
  std::string record;
  record.reserve(data.size() + 16);
  put_le(record, data.size(), 8);
  put_le(record, masked_crc32c(record.data(), 8), 4);
  record += data;
  put_le(record, masked_crc32c(data.data(), data.size()), 4);
  return record;
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

// events.out.tfevents.<seconds>.<host>.<pid>.<n>, the name TensorFlow's and PyTorch's writers give: the
// reader takes files in name order, so a later process's file follows an earlier one's.
std::string event_file_name(int serial) {
  return "events.out.tfevents." + std::to_string(static_cast<int64_t>(unix_now_s())) + "." + host_name() + "." +
         std::to_string(static_cast<long long>(getpid())) + "." + std::to_string(serial);
}

// Width, height and TensorBoard's colour space of a PNG, from its IHDR chunk (the first, by the PNG
// standard): signature (8 bytes), chunk length (4), "IHDR" (4), width and height (big-endian uint32 each),
// bit depth (1), colour type (1).
struct PngSize {
  int32_t width = 0;
  int32_t height = 0;
  int32_t colorspace = 0;
};

std::optional<PngSize> png_size(const std::string& bytes) {
  static const char kSignature[] = "\x89PNG\r\n\x1a\n";
  if (bytes.size() < 26 || bytes.compare(0, 8, kSignature, 8) != 0 || bytes.compare(12, 4, "IHDR") != 0) {
    return std::nullopt;
  }
  auto be32 = [&](size_t at) {
    uint32_t v = 0;
    for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(bytes[at + i]);
    return static_cast<int32_t>(v);
  };
  PngSize size{be32(16), be32(20), 3};
  switch (static_cast<uint8_t>(bytes[25])) {
    case 0: size.colorspace = 1; break;  // grayscale
    case 4: size.colorspace = 2; break;  // grayscale + alpha
    case 6: size.colorspace = 4; break;  // RGBA
    default: size.colorspace = 3; break;  // RGB or a palette
  }
  return size;
}

void add_scalar(tb::Summary& summary, const std::string& tag, double value) {
  tb::Summary::Value* v = summary.add_value();
  v->set_tag(tag);
  v->set_simple_value(static_cast<float>(value));
}

// The earliest Unix second in the names of `dir`'s event files (events.out.tfevents.<seconds>....), or
// `fallback_s` when it holds none.
int64_t first_event_file_s(const std::filesystem::path& dir, int64_t fallback_s) {
  static const std::string kPrefix = "events.out.tfevents.";
  int64_t first = fallback_s;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.compare(0, kPrefix.size(), kPrefix) != 0) continue;
    char* rest = nullptr;
    const long long seconds = std::strtoll(name.c_str() + kPrefix.size(), &rest, 10);
    if (rest != name.c_str() + kPrefix.size() && *rest == '.' && seconds > 0) first = std::min<int64_t>(first, seconds);
  }
  return first;
}

}  // namespace

class TensorBoardWriter::EventFile {
 public:
  EventFile(const Directory& dir, int serial) {
    file_ = std::make_unique<AppendFile>(dir, event_file_name(serial));
    tb::Event first;
    first.set_wall_time(unix_now_s());
    first.set_file_version("brain.Event:2");
    write(first);
  }

  void write(const tb::Event& event) {
    std::string data;
    if (!event.SerializeToString(&data)) throw IoError("cannot encode a TensorBoard event for " + file_->path());
    file_->append(tf_record(data));  // one write(2) per record: a reader sees whole records as they come
  }

  void write(double wall_time_s, int64_t step, tb::Summary summary) {
    if (summary.value_size() == 0) return;
    tb::Event event;
    event.set_wall_time(wall_time_s);
    event.set_step(step);
    *event.mutable_summary() = std::move(summary);
    write(event);
  }

 private:
  std::unique_ptr<AppendFile> file_;
};

TensorBoardWriter::TensorBoardWriter(Directory dir, int64_t train_samples)
    : directory_(std::move(dir)),
      dir_(directory_.path()),
      train_samples_(train_samples),
      origin_ms_(1000 * first_event_file_s(dir_, static_cast<int64_t>(unix_now_s()))),
      main_(std::make_unique<EventFile>(directory_, 0)) {}

TensorBoardWriter::~TensorBoardWriter() = default;

int64_t TensorBoardWriter::global_step(int64_t epoch, int64_t samples_done) const {
  return std::max<int64_t>(0, epoch - 1) * train_samples_ + samples_done;
}

void TensorBoardWriter::train_progress(const ProgressInfo& p) {
  tb::Summary summary;
  for (const MetricValue& m : p.metrics.all()) add_scalar(summary, "train/" + m.name, m.value);
  if (p.samples_per_s > 0) add_scalar(summary, "train/samples_per_s", p.samples_per_s);
  main_->write(unix_now_s(), global_step(p.epoch, p.samples_done), std::move(summary));
}

void TensorBoardWriter::epoch_end(const EpochStats& s) {
  tb::Summary summary;
  for (const MetricValue& m : s.train.all()) add_scalar(summary, "epoch/train_" + m.name, m.value);
  for (const MetricValue& m : s.test.all()) add_scalar(summary, "epoch/test_" + m.name, m.value);
  add_scalar(summary, "epoch/lr", s.lr);
  add_scalar(summary, "epoch/epoch_s", s.epoch_s);
  add_scalar(summary, "epoch/train_s", s.train_s);
  add_scalar(summary, "epoch/eval_s", s.eval_s);
  add_scalar(summary, "epoch/samples_per_s", s.samples_per_s);
  add_scalar(summary, "epoch/tflops_achieved", s.tflops_achieved);
  if (s.mfu) add_scalar(summary, "epoch/mfu", *s.mfu);
  add_scalar(summary, "epoch/comm_s", s.comm_s);
  add_scalar(summary, "epoch/exposed_comm_s", s.exposed_comm_s);
  add_scalar(summary, "epoch/comm_wait_cpu_s", s.comm_wait_cpu_s);
  add_scalar(summary, "epoch/busbw_gbps", s.busbw_gbps);
  add_scalar(summary, "epoch/net_tx_bytes_per_step", static_cast<double>(s.net_tx_bytes_per_step));
  add_scalar(summary, "epoch/net_rx_bytes_per_step", static_cast<double>(s.net_rx_bytes_per_step));
  main_->write(unix_now_s(), global_step(s.epoch + 1, 0), std::move(summary));
}

TensorBoardWriter::EventFile& TensorBoardWriter::rank_file(int rank) {
  std::unique_ptr<EventFile>& file = ranks_[rank];
  if (!file) file = std::make_unique<EventFile>(directory_.sub("rank" + std::to_string(rank), true), 0);
  return *file;
}

void TensorBoardWriter::resource_samples(int rank, const std::vector<ResourceSample>& samples) {
  if (samples.empty()) return;
  EventFile& file = rank_file(rank);
  for (const ResourceSample& s : samples) {
    tb::Summary summary;
    add_scalar(summary, "resources/cpu_percent", s.cpu_percent);
    add_scalar(summary, "resources/rss_bytes", static_cast<double>(s.rss_bytes));
    add_scalar(summary, "resources/host_mem_used_bytes", static_cast<double>(s.host_mem_used_bytes));
    add_scalar(summary, "resources/net_rx_bytes", static_cast<double>(s.net_rx_bytes));
    add_scalar(summary, "resources/net_tx_bytes", static_cast<double>(s.net_tx_bytes));
    if (s.gpu_util_percent) add_scalar(summary, "resources/gpu_util_percent", *s.gpu_util_percent);
    if (s.gpu_mem_used_bytes) add_scalar(summary, "resources/gpu_mem_used_bytes", static_cast<double>(*s.gpu_mem_used_bytes));
    if (s.gpu_mem_bw_util_percent) add_scalar(summary, "resources/gpu_mem_bw_util_percent", *s.gpu_mem_bw_util_percent);
    if (s.gpu_power_w) add_scalar(summary, "resources/gpu_power_w", *s.gpu_power_w);
    if (s.gpu_sm_clock_mhz) add_scalar(summary, "resources/gpu_sm_clock_mhz", *s.gpu_sm_clock_mhz);
    file.write(s.unix_time_s, std::llround(s.unix_time_s * 1000.0) - origin_ms_, std::move(summary));
  }
}

void TensorBoardWriter::images(int64_t epoch, const std::vector<std::string>& png_paths) {
  tb::Summary summary;
  for (size_t i = 0; i < png_paths.size(); ++i) {
    std::string bytes = read_file(png_paths[i]);  // IoError naming the path
    const std::optional<PngSize> size = png_size(bytes);
    if (!size) throw IoError(png_paths[i] + " is not a PNG file; TensorBoard's images are PNGs");
    tb::Summary::Value* v = summary.add_value();
    v->set_tag(i == 0 ? std::string("samples/grid") : "samples/grid_" + std::to_string(i));
    tb::Summary::Image* image = v->mutable_image();
    image->set_width(size->width);
    image->set_height(size->height);
    image->set_colorspace(size->colorspace);
    image->set_encoded_image_string(std::move(bytes));
  }
  main_->write(unix_now_s(), global_step(epoch + 1, 0), std::move(summary));
}

}  // namespace dtrain
