#include "workloads/biggan/biggan_workload.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/data/cifar10.h"
#include "runtime/data/image_files.h"
#include "runtime/data/sample_random.h"
#include "runtime/data/synthetic.h"
#include "runtime/log/image_grid.h"
#include "runtime/train/train_step.h"
#include "runtime/util/error.h"
#include "workloads/vision/vision_workloads.h"

namespace fs = std::filesystem;

namespace dtrain {
namespace {

constexpr const char* kGenerator = "generator";
constexpr const char* kDiscriminator = "discriminator";
constexpr const char* kAverage = "generator_ema";

// Streams of per-sample draws, each its own function of the sample index.
constexpr uint64_t kDiscriminatorFakes = 0x6a09e667f3bcc908ULL;
constexpr uint64_t kGeneratorFakes = 0xbb67ae8584caa73bULL;
constexpr uint64_t kEvaluationFakes = 0x3c6ef372fe94f82bULL;
constexpr uint64_t kSampleGrid = 0xa54ff53a5f1d36f1ULL;

// The moving average of the generator's weights: a generator of the same shape and a count of the
// updates made (a buffer, so that a resumed run continues the schedule).
class GeneratorAverageImpl final : public torch::nn::Module {
 public:
  explicit GeneratorAverageImpl(const BigGanOptions& options)
      : generator(register_module("generator", BigGanGenerator(options))),
        updates(register_buffer("updates", at::zeros({}, at::kLong))) {}

  BigGanGenerator generator;
  at::Tensor updates;
};
TORCH_MODULE(GeneratorAverage);

// The state BigGAN-PyTorch's utils.ema averages: every parameter and buffer of the average with the
// generator's of the same name, matched once (the tensors keep their identity for the whole run).
struct AveragedState {
  std::vector<std::pair<at::Tensor, at::Tensor>> floating;  // (average's, generator's): moved towards
  std::vector<std::pair<at::Tensor, at::Tensor>> integer;   // copied (num_batches_tracked)

  AveragedState(torch::nn::Module& average, torch::nn::Module& source) {
    const auto params = average.named_parameters();
    for (const auto& p : source.named_parameters()) floating.emplace_back(params[p.key()], p.value());
    const auto buffers = average.named_buffers();
    for (const auto& b : source.named_buffers()) {
      (at::isFloatingType(b.value().scalar_type()) ? floating : integer).emplace_back(buffers[b.key()], b.value());
    }
  }

  // ema += (1 - decay)(g - ema) for floating-point parameters and buffers (BatchNorm's running
  // statistics, spectral norm's vectors); integer buffers are copied.
  void update(double decay) const {
    at::NoGradGuard no_grad;
    for (const auto& [target, value] : floating) target.lerp_(value, 1.0 - decay);
    for (const auto& [target, value] : integer) target.copy_(value);
  }
};

void set_requires_grad(torch::nn::Module& module, bool on) {
  for (at::Tensor& p : module.parameters()) p.set_requires_grad(on);
}

// Scores for the loss: bf16/fp16 (autocast) in float, float and double as they are.
at::Tensor wide(const at::Tensor& scores) { return scores.to(at::promote_types(scores.scalar_type(), at::kFloat)); }

at::Tensor hinge_real(const at::Tensor& scores) { return at::relu(1.0 - scores).mean(); }
at::Tensor hinge_fake(const at::Tensor& scores) { return at::relu(1.0 + scores).mean(); }

// The latents where the generator computes, in its weights' type.
Latents on(const TrainState& state, const BigGanGeneratorImpl& generator, Latents latents) {
  return {latents.z.to(state.device(), generator.weight_type(), /*non_blocking=*/true),
          latents.classes.to(state.device(), /*non_blocking=*/true)};
}

// The generator that makes the pictures a user looks at: the average when there is one.
BigGanGeneratorImpl& shown_generator(TrainState& state, const BigGanTrainOptions& options) {
  if (options.ema_decay > 0) return *state.module_as<GeneratorAverageImpl>(kAverage).generator;
  return state.module_as<BigGanGeneratorImpl>(kGenerator);
}

// D on every batch; G after every d_steps of them; metrics d_loss (the hinge loss, real + fake terms),
// g_loss (-mean D(G(z))) and d_accuracy (real scored > 0 and fakes < 0, over both).
class GanStep final : public TrainStep {
 public:
  explicit GanStep(BigGanTrainOptions options) : options_(options) {}

  std::vector<std::string> train_metrics() const override { return {"d_loss", "g_loss", "d_accuracy"}; }
  std::vector<std::string> eval_metrics() const override { return {"d_accuracy", "d_loss", "g_loss"}; }

  void train(const Batch& batch, TrainState& state, MetricSums& metrics) override {
    auto& generator = state.module_as<BigGanGeneratorImpl>(kGenerator);
    auto& discriminator = state.module_as<BigGanDiscriminatorImpl>(kDiscriminator);
    const MicroBatch& micro = state.micro_batch();
    const BigGanOptions& net = generator.options();
    const double n = static_cast<double>(batch.size);

    // Discriminator: real images against fakes of a generator it does not train, in one forward.
    const Latents fake =
        on(state, generator, draw_latents(micro.sample_seed ^ kDiscriminatorFakes, batch.indices, net.dim_z, net.classes));
    at::Tensor d_loss;
    at::Tensor correct;
    {
      auto autocast = state.autocast();
      at::Tensor fakes;
      {
        at::NoGradGuard no_grad;
        fakes = generator.forward(fake.z, fake.classes);
      }
      const at::Tensor scores = wide(discriminator.forward(at::cat({fakes, batch.inputs.to(fakes.scalar_type())}),
                                                           at::cat({fake.classes, batch.targets})));
      const at::Tensor fake_scores = scores.narrow(0, 0, batch.size);
      const at::Tensor real_scores = scores.narrow(0, batch.size, batch.size);
      d_loss = hinge_real(real_scores) + hinge_fake(fake_scores);
      at::NoGradGuard no_grad;
      correct = real_scores.gt(0).sum() + fake_scores.lt(0).sum();
    }
    state.backward(d_loss, {kDiscriminator});
    state.step(kDiscriminator);
    metrics.add("d_loss", d_loss.detach().to(at::kDouble) * n, n);
    metrics.add("d_accuracy", correct, 2.0 * n);

    // Generator, after every d_steps discriminator steps, against the updated discriminator, whose
    // parameters take no gradient meanwhile (its reducer expects none in this backward).
    if (micro.step % options_.d_steps != 0) return;
    const Latents g =
        on(state, generator, draw_latents(micro.sample_seed ^ kGeneratorFakes, batch.indices, net.dim_z, net.classes));
    set_requires_grad(discriminator, false);
    at::Tensor g_loss;
    {
      auto autocast = state.autocast();
      g_loss = -wide(discriminator.forward(generator.forward(g.z, g.classes), g.classes)).mean();
    }
    state.backward(g_loss, {kGenerator});
    set_requires_grad(discriminator, true);
    const bool stepped = state.step(kGenerator);
    metrics.add("g_loss", g_loss.detach().to(at::kDouble) * n, n);
    if (stepped) average(state);
  }

  void evaluate(const Batch& batch, TrainState& state, MetricSums& metrics) override {
    auto& discriminator = state.module_as<BigGanDiscriminatorImpl>(kDiscriminator);
    BigGanGeneratorImpl& generator = shown_generator(state, options_);
    const BigGanOptions& net = generator.options();
    // The same fakes every epoch (seeded by train.seed and the test sample), so epochs compare.
    const Latents fake = on(state, generator,
                            draw_latents(static_cast<uint64_t>(state.options().seed) ^ kEvaluationFakes, batch.indices,
                                         net.dim_z, net.classes));
    auto autocast = state.autocast();
    const at::Tensor fakes = generator.forward(fake.z, fake.classes);
    const at::Tensor fake_scores = wide(discriminator.forward(fakes, fake.classes));
    const at::Tensor real_scores = wide(discriminator.forward(batch.inputs.to(fakes.scalar_type()), batch.targets));
    const double n = static_cast<double>(batch.size);
    metrics.add("d_accuracy", real_scores.gt(0).sum() + fake_scores.lt(0).sum(), 2.0 * n);
    metrics.add("d_loss", (hinge_real(real_scores) + hinge_fake(fake_scores)).to(at::kDouble) * n, n);
    metrics.add("g_loss", -fake_scores.to(at::kDouble).mean() * n, n);
  }

 private:
  void average(TrainState& state) {
    const BigGanTrainOptions& options = options_;
    if (options.ema_decay <= 0) return;
    auto& average = state.module_as<GeneratorAverageImpl>(kAverage);
    if (!averaged_) {
      // Once per run, after any resume: the pairs to average and the update count so far.
      averaged_.emplace(*average.generator, state.module(kGenerator));
      average_updates_ = average.updates.item<int64_t>();
    }
    averaged_->update(average_updates_ < options.ema_start ? 0.0 : options.ema_decay);
    average.updates.fill_(++average_updates_);
  }

  BigGanTrainOptions options_;
  std::optional<AveragedState> averaged_;
  int64_t average_updates_ = 0;  // host copy of GeneratorAverage::updates
};

// A grid with one row per class (the first ten) and ten samples in each, from the same latents every
// time: <dir>/samples/epoch-NNNNNN.png, every biggan.sample_every epochs and after the last.
class SampleGrid final : public SampleGridWriter {
 public:
  SampleGrid(BigGanTrainOptions options, uint64_t seed) : options_(options), seed_(seed) {}

  bool due(int64_t epoch, int64_t epochs) const override {
    return options_.sample_every > 0 && (epoch % options_.sample_every == 0 || epoch == epochs);
  }

  std::vector<std::string> write(const Directory& run, int64_t epoch, TrainState& state) override {
    BigGanGeneratorImpl& generator = shown_generator(state, options_);
    const BigGanOptions& net = generator.options();
    const int64_t rows = std::min<int64_t>(net.classes, 10);
    const int64_t columns = 10;
    std::vector<int64_t> indices(static_cast<size_t>(rows * columns));
    for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int64_t>(i);
    Latents fixed = draw_latents(seed_ ^ kSampleGrid, indices, net.dim_z, net.classes);
    fixed.classes = at::arange(rows, at::kLong).repeat_interleave(columns);
    fixed = on(state, generator, std::move(fixed));
    at::Tensor images;
    {
      at::NoGradGuard no_grad;
      images = generator.forward(fixed.z, fixed.classes);
    }
    const Directory folder = run.sub("samples", true);
    char name[32];
    std::snprintf(name, sizeof name, "epoch-%06lld.png", static_cast<long long>(epoch));
    write_png(folder, name, image_grid(images, columns));
    return {folder.shown(name)};
  }

 private:
  BigGanTrainOptions options_;
  uint64_t seed_;
};

bool holds_cifar10(const std::string& dir) {
  std::error_code ec;
  return fs::exists(fs::path(dir) / "data_batch_1.bin", ec) ||
         fs::exists(fs::path(dir) / "cifar-10-batches-bin" / "data_batch_1.bin", ec);
}

// Pixels scaled to [-1, 1], the range of the generator's tanh; flips only (no crops) in training.
void gan_pixels(TensorDataset& data, bool flip) {
  data.mean = at::full({1, 1, 1}, 0.5, at::kFloat);
  data.std = at::full({1, 1, 1}, 0.5, at::kFloat);
  data.value_scale = 255.0;
  data.crop_padding = 0;
  data.random_flip = flip;
}

class BigGanWorkload final : public Workload {
 public:
  explicit BigGanWorkload(BigGanWorkloadOptions options) : options_(options) {}

  std::string name() const override { return "biggan"; }

  std::string data_format() const override {
    return std::string("CIFAR-10 binary (data_batch_1..5.bin, test_batch.bin) in --data-dir; default ") + kCifar10Dir +
           "; 32x32, 10 classes; or a folder of JPEG/PNG images (ROOT/<class>/<image>, or train/ and val/) at "
           "--image-size 32 or 64; pixels in [-1, 1], random flips";
  }

  void apply_defaults(TrainConfig& config) const override {
    // BigGAN-PyTorch's CIFAR-10 setting: Adam 2e-4 with betas (0, 0.999) for both networks, 4 D steps per
    // G step, an average of G from the 1000th G step on, 500 epochs.
    TrainOptions& t = config.train;
    t.epochs = 500;
    t.batch_size = 64;
    t.eval_batch_size = 500;
    t.optimizer = OptimizerKind::kAdam;
    t.lr = 2e-4;
    t.adam_beta1 = 0.0;
    t.adam_beta2 = 0.999;
    t.adam_eps = 1e-8;
    BigGanTrainOptions& gan = config.workload_options.edit<BigGanTrainOptions>();
    gan.d_steps = 4;
    gan.ema_decay = 0.9999;
    gan.ema_start = 1000;
    config.data.image_size = 32;
  }

  void check_config(const TrainConfig& config) const override {
    if (config.train.accumulate != 1) {
      throw ConfigError("train.accumulate " + std::to_string(config.train.accumulate) +
                        ": the biggan step updates the discriminator, then the generator, on every batch, so it "
                        "cannot accumulate gradients over several; raise the batch size or the rank count instead");
    }
    if (config.train.deterministic) {
      throw ConfigError("train.deterministic: the biggan step updates the discriminator, then the generator, on every "
                        "batch, so its batch cannot be split into shards that each pass backward alone; the classifiers "
                        "and gcn can");
    }
  }

  WorkloadData load_data(const TrainConfig& config) const override {
    const DataOptions& options = config.data;
    const auto seed = static_cast<uint64_t>(config.train.seed);
    const int64_t size = options.image_size > 0 ? options.image_size : 32;
    check_biggan_options(BigGanOptions{size});
    WorkloadData data;
    data.image_size = size;
    if (options.synthetic) {
      data.num_classes = 10;
      auto train = std::make_shared<TensorDataset>(make_synthetic_images({10, size, options_.synthetic_train, 4096}, seed, seed + 1));
      auto test = std::make_shared<TensorDataset>(make_synthetic_images({10, size, options_.synthetic_test, 1000}, seed, seed + 2));
      gan_pixels(*train, true);
      gan_pixels(*test, false);
      data.train = std::move(train);
      data.test = std::move(test);
      data.description = "synthetic " + std::to_string(size) + "x" + std::to_string(size) + " RGB images, 10 classes (seed " +
                         std::to_string(seed) + ")";
      return data;
    }
    const std::string dir = data_dir_or_default(options, kCifar10Dir, "biggan", "cifar10");
    if (holds_cifar10(dir)) {
      if (size != 32) {
        throw ConfigError("data.image_size " + std::to_string(size) + ": '" + dir +
                          "' holds CIFAR-10, whose images are 32x32; use 32, or an image folder for 64");
      }
      Cifar10 cifar = read_cifar10(dir);
      gan_pixels(cifar.train, true);
      gan_pixels(cifar.test, false);
      data.num_classes = 10;
      data.train = std::make_shared<TensorDataset>(std::move(cifar.train));
      data.test = std::make_shared<TensorDataset>(std::move(cifar.test));
      data.description = "CIFAR-10 binary files in " + dir;
      return data;
    }
    ImageFileOptions file_options;
    file_options.image_size = size;
    file_options.workers = options.workers;
    file_options.normalisation = Normalisation{{0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}};
    file_options.min_crop_scale = 1.0;  // the whole image (resized), not a random part of it
    return image_file_data(scan_image_folder(dir, options.val_fraction, seed), file_options);
  }

  std::vector<NamedModule> make_modules(const WorkloadData& data, const TrainConfig& config) const override {
    const BigGanTrainOptions& options = config.workload_options.get<BigGanTrainOptions>();
    const BigGanOptions net = network(data);
    auto generator = BigGanGenerator(net);
    std::vector<NamedModule> modules{{kGenerator, generator.ptr()}, {kDiscriminator, BigGanDiscriminator(net).ptr()}};
    if (options.ema_decay > 0) {
      auto average = GeneratorAverage(net);
      AveragedState(*average->generator, *generator).update(0.0);  // starts as a copy
      NamedModule entry{kAverage, average.ptr()};
      entry.trained = false;
      modules.push_back(std::move(entry));
    }
    return modules;
  }

  std::unique_ptr<TrainStep> make_step(const TrainConfig& config) const override {
    return std::make_unique<GanStep>(config.workload_options.get<BigGanTrainOptions>());
  }

  std::unique_ptr<SampleGridWriter> make_sample_writer(const TrainConfig& config) const override {
    return std::make_unique<SampleGrid>(config.workload_options.get<BigGanTrainOptions>(),
                                        static_cast<uint64_t>(config.train.seed));
  }

 private:
  BigGanOptions network(const WorkloadData& data) const {
    BigGanOptions net;
    net.resolution = data.image_size;
    net.channels = options_.channels;
    net.classes = data.num_classes;
    net.dim_z = options_.dim_z;
    return net;
  }

  BigGanWorkloadOptions options_;
};

}  // namespace

Latents draw_latents(uint64_t seed, const std::vector<int64_t>& indices, int64_t dim_z, int64_t classes) {
  const auto n = static_cast<int64_t>(indices.size());
  at::Tensor z = at::empty({n, dim_z}, at::kFloat);
  at::Tensor labels = at::empty({n}, at::kLong);
  float* zs = z.data_ptr<float>();
  int64_t* ys = labels.data_ptr<int64_t>();
  constexpr double kTwoPi = 6.283185307179586;
  for (int64_t i = 0; i < n; ++i) {
    SampleRandom random(seed, indices[static_cast<size_t>(i)]);
    ys[i] = random.below(classes);
    float* row = zs + i * dim_z;
    for (int64_t j = 0; j < dim_z; j += 2) {
      // Box-Muller: two independent standard normals from two uniforms (1 - u keeps the log finite).
      const double radius = std::sqrt(-2.0 * std::log(1.0 - random.uniform()));
      const double angle = kTwoPi * random.uniform();
      row[j] = static_cast<float>(radius * std::cos(angle));
      if (j + 1 < dim_z) row[j + 1] = static_cast<float>(radius * std::sin(angle));
    }
  }
  return {z, labels};
}

std::unique_ptr<Workload> make_biggan_workload(BigGanWorkloadOptions options) {
  return std::make_unique<BigGanWorkload>(options);
}

std::vector<ConfigField> biggan_config_fields() {
  std::vector<ConfigField> fields{
      int_field("biggan.d_steps", "d-steps", "discriminator steps per generator step",
                option_ref(&BigGanTrainOptions::d_steps), 1, 1024),
      float_field("biggan.ema_decay", "ema-decay",
                  "decay of the moving average of the generator's weights, which evaluation and samples use (0 = "
                  "no average)",
                  option_ref(&BigGanTrainOptions::ema_decay), 0.0, true, 0.999999),
      int_field("biggan.ema_start", "ema-start",
                "generator steps during which the average copies the generator before it decays",
                option_ref(&BigGanTrainOptions::ema_start), 0, kMaxConfigCount),
      int_field("biggan.sample_every", "sample-every",
                "write a PNG grid of samples to the run directory every N epochs and after the last (0 = none)",
                option_ref(&BigGanTrainOptions::sample_every), 0, kMaxConfigCount),
  };
  return fields;
}

void register_biggan_workloads(WorkloadRegistry& registry) {
  registry.add("biggan", "BigGAN (residual G and D, spectral norm, conditional BatchNorm, hinge loss) on CIFAR-10",
               [] { return make_biggan_workload(); }, biggan_config_fields());
}

}  // namespace dtrain
