#include "test/support/catch.h"

#include <ATen/ATen.h>
#include <png.h>
#include <turbojpeg.h>

#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "runtime/data/cifar10.h"
#include "runtime/data/image_decode.h"
#include "runtime/data/image_files.h"
#include "runtime/data/image_transform.h"
#include "runtime/util/error.h"
#include "test/support/error_message.h"
#include "test/support/temp_dir.h"
#include "test/support/skip.h"
#include "workloads/vision/alexnet.h"
#include "workloads/vision/resnet.h"

using namespace dtrain;
using Catch::Matchers::Contains;

namespace {

namespace fs = std::filesystem;

int64_t count_params(torch::nn::Module& m) {
  int64_t n = 0;
  for (const at::Tensor& p : m.parameters()) n += p.numel();
  return n;
}

// A deterministic RGB test pattern.
std::vector<uint8_t> pattern(int64_t h, int64_t w, int seed) {
  std::vector<uint8_t> pixels(static_cast<size_t>(h * w * 3));
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>((i * 37 + static_cast<size_t>(seed) * 101) % 251);
  return pixels;
}

void write_png(const std::string& path, int64_t h, int64_t w, const std::vector<uint8_t>& pixels, bool grey = false) {
  png_image png;
  std::memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(w);
  png.height = static_cast<png_uint_32>(h);
  png.format = grey ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  REQUIRE(png_image_write_to_file(&png, path.c_str(), 0, pixels.data(), 0, nullptr) != 0);
}

void write_jpeg(const std::string& path, int64_t h, int64_t w, const std::vector<uint8_t>& pixels) {
  tjhandle handle = tjInitCompress();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  REQUIRE(tjCompress2(handle, pixels.data(), static_cast<int>(w), 0, static_cast<int>(h), TJPF_RGB, &jpeg, &size,
                      TJSAMP_444, 100, 0) == 0);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(jpeg), static_cast<std::streamsize>(size));
  tjFree(jpeg);
  tjDestroy(handle);
}

std::string contents_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("vision models have torchvision's parameter counts and names", "[vision][model]") {
  ResNet resnet18(resnet18_options(1000));
  ResNet resnet50(resnet50_options(1000));
  AlexNet alexnet(1000);
  ResNet cifar(resnet18_options(10, ResNetStem::kCifar));
  // torchvision's counts (python3-torchvision 0.14 gives the same for its models and the CIFAR variant).
  CHECK(count_params(resnet18) == 11689512);
  CHECK(count_params(resnet50) == 25557032);
  CHECK(count_params(alexnet) == 61100840);
  CHECK(count_params(cifar) == 11173962);
  const auto names = resnet50.named_parameters();
  CHECK(names.contains("layer1.0.downsample.0.weight"));
  CHECK(names.contains("layer4.2.bn3.bias"));
  CHECK(names["layer2.0.conv2.weight"].sizes() == at::IntArrayRef({128, 128, 3, 3}));  // v1.5: stride in the 3x3
  CHECK(alexnet.named_parameters().contains("classifier.6.weight"));
  CHECK(resnet50.named_buffers().contains("bn1.running_var"));
  // Shapes through the network at the sizes the workloads use.
  at::NoGradGuard no_grad;
  resnet18.eval();
  CHECK(resnet18.forward(at::zeros({2, 3, 64, 64})).sizes() == at::IntArrayRef({2, 1000}));
  cifar.eval();
  CHECK(cifar.forward(at::zeros({2, 3, 32, 32})).sizes() == at::IntArrayRef({2, 10}));
  alexnet.eval();
  CHECK(alexnet.forward(at::zeros({1, 3, 64, 64})).sizes() == at::IntArrayRef({1, 1000}));
}

TEST_CASE("ResNet initialisation follows torchvision: Kaiming-normal fan-out convolutions, BatchNorm 1 and 0",
          "[vision][model]") {
  at::manual_seed(0);
  ResNet model(resnet50_options(10));
  const auto params = model.named_parameters();
  const at::Tensor w = params["layer3.0.conv2.weight"];  // 256 x 256 x 3 x 3: fan-out 256 * 9
  CHECK(w.std().item<double>() == Approx(std::sqrt(2.0 / (256 * 9))).epsilon(0.02));
  CHECK(at::equal(params["layer3.0.bn2.weight"], at::ones({256})));
  CHECK(at::equal(params["layer3.0.bn2.bias"], at::zeros({256})));
}

TEST_CASE("CIFAR-10 binary files are read bit-exactly, and malformed ones are named", "[vision][data]") {
  test::TempDir dir;
  const fs::path root = fs::path(dir.path()) / "cifar-10-batches-bin";
  fs::create_directories(root);
  std::vector<uint8_t> all;
  auto write = [&](const std::string& name, int records, int first_label) {
    std::ofstream out(root / name, std::ios::binary);
    for (int r = 0; r < records; ++r) {
      std::vector<uint8_t> record(3073);
      record[0] = static_cast<uint8_t>((first_label + r) % 10);
      const std::vector<uint8_t> image = pattern(32, 32, first_label * 7 + r);
      std::copy(image.begin(), image.begin() + 3072, record.begin() + 1);
      out.write(reinterpret_cast<const char*>(record.data()), 3073);
    }
  };
  for (int i = 1; i <= 5; ++i) write("data_batch_" + std::to_string(i) + ".bin", 3, i);
  write("test_batch.bin", 4, 0);
  const Cifar10 data = read_cifar10(dir.path());  // finds the cifar-10-batches-bin folder
  REQUIRE(data.train.size() == 15);
  REQUIRE(data.test.size() == 4);
  CHECK(data.train.targets[3].item<int64_t>() == 2);  // data_batch_2's first record
  const std::vector<uint8_t> expected = pattern(32, 32, 2 * 7 + 0);
  const at::Tensor image = data.train.inputs[3].contiguous();
  CHECK(std::memcmp(image.data_ptr<uint8_t>(), expected.data(), 3072) == 0);  // CHW as stored
  CHECK(data.train.crop_padding == 4);
  CHECK(data.train.random_flip);
  CHECK_FALSE(data.test.random_flip);

  std::ofstream(root / "test_batch.bin", std::ios::binary | std::ios::app) << "x";
  CHECK_THAT(test::error_message([&] { read_cifar10(root.string()); }),
             Contains("test_batch.bin' holds 12293 bytes, not a whole number of 3073-byte records"));
  write("test_batch.bin", 1, 0);
  {
    std::fstream f(root / "test_batch.bin", std::ios::binary | std::ios::in | std::ios::out);
    f.put(static_cast<char>(10));
  }
  CHECK_THAT(test::error_message([&] { read_cifar10(root.string()); }), Contains("record 0 has label 10; expected classes 0..9"));
  fs::remove(root / "data_batch_3.bin");
  CHECK_THAT(test::error_message([&] { read_cifar10(root.string()); }),
             Contains("CIFAR-10 binary files missing in '" + root.string() + "': data_batch_3.bin"));
}

TEST_CASE("PNG decodes exactly, JPEG within its loss, grey becomes RGB, other files are refused", "[vision][data]") {
  test::TempDir dir;
  const std::vector<uint8_t> pixels = pattern(13, 17, 1);
  write_png(dir.file("a.png"), 13, 17, pixels);
  const RgbImage png = decode_image_file(dir.file("a.png"));
  CHECK(png.height == 13);
  CHECK(png.width == 17);
  CHECK(png.pixels == pixels);

  std::vector<uint8_t> smooth(static_cast<size_t>(16 * 24 * 3));
  for (size_t i = 0; i < smooth.size(); ++i) smooth[i] = static_cast<uint8_t>(40 + (i / 3) % 24 * 6 + i % 3 * 20);
  write_jpeg(dir.file("b.jpg"), 16, 24, smooth);
  const RgbImage jpeg = decode_image_file(dir.file("b.jpg"));
  REQUIRE(jpeg.pixels.size() == smooth.size());
  int worst = 0;
  for (size_t i = 0; i < smooth.size(); ++i) worst = std::max(worst, std::abs(int(jpeg.pixels[i]) - int(smooth[i])));
  CHECK(worst <= 3);

  const std::vector<uint8_t> grey{0, 100, 200, 255};
  write_png(dir.file("g.png"), 2, 2, grey, /*grey=*/true);
  const RgbImage rgb = decode_image_file(dir.file("g.png"));
  CHECK(rgb.pixels == std::vector<uint8_t>{0, 0, 0, 100, 100, 100, 200, 200, 200, 255, 255, 255});

  std::ofstream(dir.file("c.jpg")) << "not an image";
  CHECK_THAT(test::error_message([&] { decode_image_file(dir.file("c.jpg")); }),
             Contains("c.jpg' is neither a JPEG nor a PNG image"));
  std::ofstream(dir.file("d.jpg"), std::ios::binary) << std::string("\xFF\xD8\xFF\xE0garbage", 11);
  CHECK_THAT(test::error_message([&] { decode_image_file(dir.file("d.jpg")); }), Contains("JPEG image '" + dir.file("d.jpg") + "'"));
}

TEST_CASE("CMYK JPEGs as PIL writes them decode to PIL's own RGB; a cut JPEG is refused", "[vision][data]") {
  // The reference is the real producer and reader: PIL writes the CMYK file (Adobe marker, values inverted,
  // as Photoshop's) and decodes it with convert("RGB"), what torchvision's ImageFolder loader does.
  test::TempDir dir;
  const std::string script = R"(
import sys
import numpy as np
from PIL import Image
out = sys.argv[1]
rng = np.random.default_rng(3)
rgb = (rng.random((21, 34, 3)) * 255).astype("uint8")
Image.fromarray(rgb).convert("CMYK").save(out + "/cmyk.jpg", quality=90)
open(out + "/cmyk.rgb", "wb").write(Image.open(out + "/cmyk.jpg").convert("RGB").tobytes())
data = open(out + "/cmyk.jpg", "rb").read()
big = (rng.random((120, 160, 3)) * 255).astype("uint8")  # a third of it lies well inside the scan data
Image.fromarray(big).save(out + "/whole.jpg", quality=90)
whole = open(out + "/whole.jpg", "rb").read()
open(out + "/cut.jpg", "wb").write(whole[: len(whole) // 3])
)";
  std::ofstream(dir.file("make.py")) << script;
  const std::string command = "/usr/bin/python3 " + dir.file("make.py") + " " + dir.path() + " 2>/dev/null";
  if (std::system(command.c_str()) != 0) {
    DTRAIN_SKIP("/usr/bin/python3 with PIL and numpy (Debian: python3-pil, python3-numpy) is needed");
  }
  const RgbImage cmyk = decode_image_file(dir.file("cmyk.jpg"));
  std::ifstream in(dir.file("cmyk.rgb"), std::ios::binary);
  const std::vector<uint8_t> pil((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(cmyk.width == 34);
  REQUIRE(cmyk.height == 21);
  REQUIRE(cmyk.pixels.size() == pil.size());
  int worst = 0;
  for (size_t i = 0; i < pil.size(); ++i) worst = std::max(worst, std::abs(int(cmyk.pixels[i]) - int(pil[i])));
  CHECK(worst <= 1);

  CHECK(decode_image_file(dir.file("whole.jpg")).width == 160);
  CHECK_THAT(test::error_message([&] { decode_image_file(dir.file("cut.jpg")); }),
             Contains("JPEG image '" + dir.file("cut.jpg") + "' is truncated (Premature end of JPEG file"));
}

TEST_CASE("the fused crop-resize transform is exact at scale 1 and mirrors when flipped", "[vision][data]") {
  RgbImage image{4, 5, pattern(4, 5, 3)};
  Normalisation identity;
  identity.mean = {0, 0, 0};
  identity.std = {1, 1, 1};
  std::vector<float> out(3 * 3 * 3);
  crop_resize_normalise(image, CropBox{1, 2, 3, 3}, 3, false, identity, out.data());
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < 3; ++y) {
      for (int x = 0; x < 3; ++x) {
        const float expected = image.pixels[static_cast<size_t>(((1 + y) * 5 + 2 + x) * 3 + c)] / 255.0f;
        CHECK(out[static_cast<size_t>(c * 9 + y * 3 + x)] == Approx(expected).margin(1e-6));
      }
    }
  }
  std::vector<float> flipped(out.size());
  crop_resize_normalise(image, CropBox{1, 2, 3, 3}, 3, true, identity, flipped.data());
  CHECK(flipped[0 * 9 + 1 * 3 + 0] == out[0 * 9 + 1 * 3 + 2]);
  // A 2x shrink averages: a 2x2 box of one grey level stays that level.
  RgbImage flat{4, 4, std::vector<uint8_t>(48, 128)};
  std::vector<float> small(12);
  crop_resize_normalise(flat, CropBox{0, 0, 4, 4}, 2, false, identity, small.data());
  for (float v : small) CHECK(v == Approx(128 / 255.0f).margin(1e-6));
  // Resize(256) + CenterCrop(224) of a 256 x 320 image reads its centre 224 x 224.
  const CropBox box = center_crop(256, 320, 224);
  CHECK((box.top == 16 && box.left == 48 && box.height == 224 && box.width == 224));
  SampleRandom random(1, 2);
  const CropBox r = random_resized_crop(64, 64, random);
  CHECK((r.height > 0 && r.width > 0 && r.top + r.height <= 64 && r.left + r.width <= 64));
}

TEST_CASE("image folders and tiny-imagenet-200 are scanned as published, with errors naming the path",
          "[vision][data]") {
  test::TempDir dir;
  const fs::path root(dir.path());
  for (const char* cls : {"cat", "dog"}) {
    fs::create_directories(root / "plain" / cls / "nested");
    for (int i = 0; i < 10; ++i) write_png((root / "plain" / cls / ("i" + std::to_string(i) + ".PNG")).string(), 4, 4, pattern(4, 4, i));
    write_png((root / "plain" / cls / "nested" / "deep.png").string(), 4, 4, pattern(4, 4, 99));
    std::ofstream(root / "plain" / cls / "notes.txt") << "ignored";
  }
  const ImageSplits a = scan_image_folder((root / "plain").string(), 0.2, 7);
  CHECK(a.classes == std::vector<std::string>{"cat", "dog"});
  CHECK(a.train.size() == 18);
  CHECK(a.test.size() == 4);
  const ImageSplits again = scan_image_folder((root / "plain").string(), 0.2, 7);
  CHECK(again.test.front().path == a.test.front().path);  // seeded
  const ImageSplits other = scan_image_folder((root / "plain").string(), 0.2, 8);
  bool differs = false;
  for (size_t i = 0; i < other.test.size(); ++i) differs = differs || other.test[i].path != a.test[i].path;
  CHECK(differs);

  fs::create_directories(root / "one" / "only");
  CHECK_THAT(test::error_message([&] { scan_image_folder((root / "one").string(), 0.1, 1); }),
             Contains("has 1 class folder(s); a classifier needs at least two"));
  fs::create_directories(root / "one" / "empty");
  write_png((root / "one" / "only" / "x.png").string(), 4, 4, pattern(4, 4, 1));
  CHECK_THAT(test::error_message([&] { scan_image_folder((root / "one").string(), 0.1, 1); }),
             Contains("class folder '" + (root / "one" / "empty").string() + "' of the train split holds no .jpg"));

  const fs::path tiny = root / "tiny-imagenet-200";
  std::ofstream(fs::path(dir.path()) / "unused");
  fs::create_directories(tiny / "val" / "images");
  std::ofstream(tiny / "wnids.txt") << "n02\nn01\n";
  std::ofstream annotations(tiny / "val" / "val_annotations.txt");
  for (const char* wnid : {"n01", "n02"}) {
    fs::create_directories(tiny / "train" / wnid / "images");
    for (int i = 0; i < 3; ++i) {
      write_jpeg((tiny / "train" / wnid / "images" / (std::string(wnid) + "_" + std::to_string(i) + ".JPEG")).string(), 8, 8,
                 pattern(8, 8, i));
    }
    write_jpeg((tiny / "val" / "images" / ("val_" + std::string(wnid) + ".JPEG")).string(), 8, 8, pattern(8, 8, 5));
    annotations << "val_" << wnid << ".JPEG\t" << wnid << "\t0\t0\t8\t8\n";
  }
  annotations.close();
  const ImageSplits t = scan_tiny_imagenet(tiny.string());
  CHECK(t.classes == std::vector<std::string>{"n01", "n02"});
  CHECK(t.train.size() == 6);
  REQUIRE(t.test.size() == 2);
  CHECK(t.test[1].label == 1);
  std::ofstream(tiny / "val" / "val_annotations.txt", std::ios::app) << "val_x.JPEG\tn99\t0\t0\t8\t8\n";
  CHECK_THAT(test::error_message([&] { scan_tiny_imagenet(tiny.string()); }),
             Contains("val_annotations.txt' line 3 names class 'n99', which wnids.txt does not list"));
}

TEST_CASE("image batches are the same whatever the worker count, and augmentation follows the sample",
          "[vision][data]") {
  test::TempDir dir;
  std::vector<ImageSample> samples;
  for (int i = 0; i < 11; ++i) {
    const std::string path = dir.file("img" + std::to_string(i) + (i % 2 ? ".png" : ".jpg"));
    if (i % 2) {
      write_png(path, 20 + i, 24, pattern(20 + i, 24, i));
    } else {
      write_jpeg(path, 20 + i, 24, pattern(20 + i, 24, i));
    }
    samples.push_back({path, i % 3});
  }
  auto read_all = [&](int64_t workers, int64_t batch, std::optional<uint64_t> seed, std::vector<int64_t> order) {
    ImageFileOptions options;
    options.image_size = 16;
    options.workers = workers;
    ImageFileDataset data(samples, options);
    auto stream = data.stream(order, batch, seed);
    std::vector<at::Tensor> inputs;
    std::vector<at::Tensor> targets;
    Batch b;
    while (stream->next(b)) {
      inputs.push_back(b.inputs);
      targets.push_back(b.targets);
    }
    return std::make_pair(at::cat(inputs), at::cat(targets));
  };
  const std::vector<int64_t> order{3, 1, 4, 10, 5, 9, 2, 6, 0, 8, 7};
  const auto one = read_all(1, 4, 42, order);
  const auto three = read_all(3, 3, 42, order);
  CHECK(one.first.sizes() == at::IntArrayRef({11, 3, 16, 16}));
  CHECK(at::equal(one.first, three.first));
  CHECK(at::equal(one.second, three.second));
  CHECK(one.second[3].item<int64_t>() == 10 % 3);
  // Sample 10 alone gets the transform it got inside a batch.
  const auto alone = read_all(2, 1, 42, {10});
  CHECK(at::equal(alone.first[0], one.first[3]));
  // Another seed, other crops; no seed, the evaluation transform (the same every time).
  CHECK_FALSE(at::equal(read_all(2, 4, 43, order).first, one.first));
  CHECK(at::equal(read_all(1, 5, std::nullopt, order).first, read_all(3, 2, std::nullopt, order).first));

  std::ofstream(samples[4].path) << "broken";
  CHECK_THAT(test::error_message([&] { read_all(2, 4, 42, order); }), Contains("img4.jpg' is neither a JPEG nor a PNG image"));
}

TEST_CASE("with skip_bad, an image that fails to decode mid-run is replaced in training and left out in evaluation",
          "[vision][data]") {
  // The start-up check reads a file's header and its end: a file whose scan names Huffman tables that its
  // header does not define passes it (the tables are looked up when decoding starts) and fails here.
  test::TempDir dir;
  std::vector<ImageSample> samples;
  for (int i = 0; i < 6; ++i) {
    const std::string path = dir.file("img" + std::to_string(i) + ".jpg");
    write_jpeg(path, 96, 96, pattern(96, 96, i));
    samples.push_back({path, i % 3});
  }
  std::string damaged = contents_of(samples[2].path);
  const size_t sos = damaged.find("\xff\xda");  // start of scan: length, components, then (id, tables) each
  REQUIRE(sos != std::string::npos);
  damaged[sos + 6] = '\x33';
  std::ofstream(samples[2].path, std::ios::binary | std::ios::trunc) << damaged;
  REQUIRE(check_image_files(samples, 2).empty());

  ImageFileOptions options;
  options.image_size = 16;
  options.workers = 2;
  options.skip_bad = true;
  const ImageFileDataset data(samples, options);
  const std::vector<int64_t> order{0, 1, 2, 3, 4, 5};
  Batch b;
  auto training = data.stream(order, 3, 42);
  REQUIRE(training->next(b));
  CHECK(b.size == 3);
  CHECK(b.indices == std::vector<int64_t>{0, 1, 2});
  REQUIRE(b.bad_samples.size() == 1);
  CHECK_THAT(b.bad_samples[0], Contains("JPEG image '" + samples[2].path + "': Huffman table 0x03 was not defined"));
  CHECK(at::equal(b.inputs[2], b.inputs[0]));  // the next good image of the batch, counting round
  CHECK(b.targets[2].item<int64_t>() == 0);
  REQUIRE(training->next(b));
  CHECK(b.bad_samples.empty());
  CHECK_FALSE(training->next(b));

  auto evaluation = data.stream(order, 3, std::nullopt);
  REQUIRE(evaluation->next(b));
  CHECK(b.size == 2);
  CHECK(b.inputs.size(0) == 2);
  CHECK(b.indices == std::vector<int64_t>{0, 1});
  CHECK(at::equal(b.targets, at::tensor({0, 1}, at::kLong)));
  CHECK(b.bad_samples.size() == 1);
  REQUIRE(evaluation->next(b));
  CHECK(b.size == 3);
  CHECK(b.bad_samples.empty());

  // A batch with nothing to stand in, and the same file without skip_bad: errors naming it.
  CHECK_THAT(test::error_message([&] { data.stream({2}, 1, 42)->next(b); }),
             Contains("no image of a batch of 1 could be decoded") && Contains(samples[2].path));
  options.skip_bad = false;
  const ImageFileDataset strict(samples, options);
  CHECK_THAT(test::error_message([&] { strict.stream(order, 3, 42)->next(b); }), Contains(samples[2].path + "': Huffman table 0x03 was not defined"));
}

TEST_CASE("in-memory images: random crops and flips are drawn per sample, the same in any batch", "[vision][data]") {
  TensorDataset data;
  data.inputs = at::arange(5 * 3 * 6 * 6, at::kLong).remainder(251).to(at::kByte).view({5, 3, 6, 6});
  data.targets = at::arange(5, at::kLong);
  data.crop_padding = 2;
  data.random_flip = true;
  const at::Tensor all = data.gather_inputs(at::arange(5, at::kLong), 9);
  const at::Tensor one = data.gather_inputs(at::tensor(std::vector<int64_t>{3}, at::kLong), 9).to(at::kFloat);
  CHECK(at::equal(all[3].to(at::kFloat), one[0]));
  CHECK_FALSE(at::equal(all, data.gather_inputs(at::arange(5, at::kLong))));  // augmented differs from plain
  CHECK(at::equal(data.gather_inputs(at::arange(5, at::kLong)), data.inputs));  // no mean: raw values
  // Every crop is a window of the zero-padded image: values are the image's or 0.
  const at::Tensor padded = at::constant_pad_nd(data.inputs[3].to(at::kFloat), {2, 2, 2, 2}, 0);
  bool found = false;
  for (int dy = 0; dy <= 4 && !found; ++dy) {
    for (int dx = 0; dx <= 4 && !found; ++dx) {
      const at::Tensor window = padded.narrow(1, dy, 6).narrow(2, dx, 6);
      found = at::equal(window, one[0]) || at::equal(window.flip({2}), one[0]);
    }
  }
  CHECK(found);
}

TEST_CASE("the start-up check reads only headers and names every bad image file", "[vision][data]") {
  test::TempDir dir;
  std::vector<ImageSample> samples;
  const auto add = [&](const std::string& name) {
    samples.push_back({dir.file(name), 0});
    return dir.file(name);
  };
  write_png(add("good.png"), 5, 7, pattern(5, 7, 2));
  write_jpeg(add("good.jpg"), 8, 8, pattern(8, 8, 3));
  std::ofstream(add("empty.jpg")).flush();
  std::ofstream(add("text.png")) << "not an image";
  // A PNG whose header claims 60000 x 60000 pixels: refused from the header, nothing allocated.
  std::string png = contents_of(dir.file("good.png"));
  const unsigned char huge[8] = {0, 0, 0xEA, 0x60, 0, 0, 0xEA, 0x60};
  png.replace(16, 8, reinterpret_cast<const char*>(huge), 8);
  std::ofstream(add("huge.png"), std::ios::binary) << png;
  samples.push_back({dir.file("missing.jpg"), 0});

  const std::vector<BadImage> bad = check_image_files(samples, 3);
  REQUIRE(bad.size() == 4);
  CHECK(bad[0].index == 2);
  CHECK_THAT(bad[0].problem, Contains("empty.jpg' is neither a JPEG nor a PNG image (the file is empty)"));
  CHECK_THAT(bad[1].problem, Contains("text.png' is neither a JPEG nor a PNG image"));
  CHECK_THAT(bad[2].problem, Contains("PNG image '" + dir.file("huge.png") + "' claims 60000x60000 pixels"));
  CHECK_THAT(bad[3].problem, Contains("cannot read image '" + dir.file("missing.jpg") + "'"));
  CHECK(read_image_size(dir.file("good.jpg")).width == 8);
  CHECK(read_image_size(dir.file("good.png")).height == 5);
}

TEST_CASE("an image folder's links: a loop inside a class is read once, a link to other classes' images refused",
          "[vision][data]") {
  test::TempDir dir;
  for (const char* cls : {"cat", "dog"}) {
    fs::create_directories(dir.file(std::string("root/") + cls + "/sub"));
    for (int i = 0; i < 3; ++i) write_png(dir.file(std::string("root/") + cls + "/sub/" + std::to_string(i) + ".png"), 4, 4, pattern(4, 4, i));
  }
  // Datasets are assembled from links: one to more images of the class, from outside the folder, counts.
  fs::create_directories(dir.file("more-cats"));
  write_png(dir.file("more-cats/extra.png"), 4, 4, pattern(4, 4, 9));
  fs::create_directory_symlink(dir.file("more-cats"), dir.file("root/cat/more"));
  fs::create_directory_symlink("..", dir.file("root/cat/sub/loop"));  // back to an ancestor inside the class
  const ImageSplits splits = scan_image_folder(dir.file("root"), 0.0, 1);
  REQUIRE(splits.classes == std::vector<std::string>{"cat", "dog"});
  int64_t cats = 0;
  for (const auto* split : {&splits.train, &splits.test}) {
    for (const ImageSample& s : *split) cats += s.label == 0 ? 1 : 0;
  }
  CHECK(cats == 4);  // its own 3 and the linked one; the loop adds none
  CHECK(splits.train.size() + splits.test.size() == 7);

  SECTION("a link back to the folder of all the classes") {
    fs::create_directory_symlink("../..", dir.file("root/cat/sub/up"));
    CHECK_THROWS_WITH(scan_image_folder(dir.file("root"), 0.0, 1),
                      Contains("'" + dir.file("root/cat/sub/up") + "' in class folder '" + dir.file("root/cat") +
                               "' leads to '" + dir.file("root") + "', the folder of all the classes (or above it): "
                               "its images would be labelled with this class too"));
  }
  SECTION("a link into another class's folder") {
    fs::create_directory_symlink("../dog/sub", dir.file("root/cat/alias"));
    CHECK_THROWS_WITH(scan_image_folder(dir.file("root"), 0.0, 1),
                      Contains("leads to '" + dir.file("root/dog/sub") + "', inside class folder '" + dir.file("root/dog") + "'"));
  }
  SECTION("two class folders that are one") {
    fs::remove_all(dir.file("root/dog"));
    fs::create_directory_symlink("cat", dir.file("root/dog"));
    CHECK_THROWS_WITH(scan_image_folder(dir.file("root"), 0.0, 1), Contains("are the same folder"));
  }
}

TEST_CASE("an image cut short after its header is found at start-up", "[vision][data]") {
  test::TempDir dir;
  write_jpeg(dir.file("a.jpg"), 64, 64, pattern(64, 64, 1));
  write_png(dir.file("b.png"), 64, 64, pattern(64, 64, 2));
  for (const std::string name : {"a.jpg", "b.png"}) {
    const std::string whole = contents_of(dir.file(name));
    CHECK_NOTHROW(read_image_size(dir.file(name)));
    std::ofstream(dir.file(name), std::ios::binary | std::ios::trunc) << whole.substr(0, whole.size() - 20);
  }
  CHECK_THROWS_WITH(read_image_size(dir.file("a.jpg")),
                    Contains("image '" + dir.file("a.jpg") + "' is cut short: it ends without its end-of-image marker (FF D9)"));
  CHECK_THROWS_WITH(read_image_size(dir.file("b.png")),
                    Contains("image '" + dir.file("b.png") + "' is cut short: it ends without its IEND chunk"));
}

TEST_CASE("a JPEG cut inside its header is said to be cut short, not only undecodable", "[vision][data]") {
  test::TempDir dir;
  write_jpeg(dir.file("a.jpg"), 64, 64, pattern(64, 64, 1));
  const std::string whole = contents_of(dir.file("a.jpg"));
  const size_t scan = whole.find("\xff\xda");  // the start of scan: everything before it is header
  REQUIRE(scan != std::string::npos);
  std::ofstream(dir.file("a.jpg"), std::ios::binary | std::ios::trunc) << whole.substr(0, scan);
  CHECK_THROWS_WITH(read_image_size(dir.file("a.jpg")),
                    Contains("image '" + dir.file("a.jpg") + "' is cut short: it ends without its end-of-image marker"));
  // A whole file whose header is damaged stays a decode error.
  std::string damaged = whole;
  damaged.replace(scan, 2, "\xff\x01");
  std::ofstream(dir.file("a.jpg"), std::ios::binary | std::ios::trunc) << damaged;
  CHECK_THROWS_WITH(read_image_size(dir.file("a.jpg")), Contains("cannot decode JPEG image '" + dir.file("a.jpg") + "'"));
}
