// Images per second through dtrain's image input pipeline: decode (TurboJPEG/libpng), random-resized
// crop, flip and normalise in --workers threads, batches handed out in order, exactly what a training
// run's ImageFileDataset does, without the model. bench/image_pipeline_bench.py runs it beside
// torchvision's ImageFolder + DataLoader on the same files.
//
//   dtrain_image_pipeline_bench --root FOLDER [--size 64] [--workers 2] [--batch 128] [--passes 3]
// Prints one JSON line: {"images": N, "seconds": [..], "images_per_s": median}.
#include <cxxopts.hpp>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <numeric>
#include <vector>

#include "runtime/data/image_files.h"

int main(int argc, char** argv) {
  cxxopts::Options options("dtrain_image_pipeline_bench", "images/s of dtrain's image input pipeline");
  options.add_options()("root", "image folder (root/<class>/<image>)", cxxopts::value<std::string>())
      ("size", "output image side", cxxopts::value<int64_t>()->default_value("64"))
      ("workers", "decoding threads", cxxopts::value<int64_t>()->default_value("2"))
      ("batch", "batch size", cxxopts::value<int64_t>()->default_value("128"))
      ("passes", "timed passes over the folder", cxxopts::value<int>()->default_value("3"));
  const auto args = options.parse(argc, argv);
  if (!args.count("root")) {
    std::cerr << options.help() << std::endl;
    return 2;
  }
  try {
    dtrain::ImageSplits splits = dtrain::scan_image_folder(args["root"].as<std::string>(), 0.0, 1);
    dtrain::ImageFileOptions file_options;
    file_options.image_size = args["size"].as<int64_t>();
    file_options.workers = args["workers"].as<int64_t>();
    dtrain::ImageFileDataset data(std::move(splits.train), file_options);
    std::vector<int64_t> order(static_cast<size_t>(data.size()));
    std::iota(order.begin(), order.end(), 0);
    std::vector<double> seconds;
    double checksum = 0;
    for (int pass = 0; pass < args["passes"].as<int>(); ++pass) {
      const auto start = std::chrono::steady_clock::now();
      auto stream = data.stream(order, args["batch"].as<int64_t>(), 1000 + pass);
      dtrain::Batch batch;
      while (stream->next(batch)) checksum += batch.inputs[0][0][0][0].item<double>();  // touch every batch
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::vector<double> sorted = seconds;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted[sorted.size() / 2];
    std::cout << "{\"images\": " << data.size() << ", \"seconds\": [";
    for (size_t i = 0; i < seconds.size(); ++i) std::cout << (i ? ", " : "") << seconds[i];
    std::cout << "], \"images_per_s\": " << static_cast<double>(data.size()) / median << ", \"checksum\": " << checksum
              << "}" << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "dtrain_image_pipeline_bench: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}
