// The biggan workload: a class-conditional BigGAN (workloads/biggan/biggan.h) on CIFAR-10 at 32x32 (the
// cifar10 workload's binary files) or on a folder of JPEG/PNG images at 32 or 64 px, trained data
// parallel: "generator" and "discriminator" are two trained modules, each with its Adam optimizer and its
// gradient reducer, and GanStep updates D on every batch and G after every biggan.d_steps of them, with
// the hinge loss. With biggan.ema_decay, "generator_ema" (a moving average of G's weights, checkpointed
// with the rest) makes the evaluation's fakes and the sample grids.
#pragma once

#include <memory>
#include <vector>

#include "runtime/config/config_fields.h"
#include "runtime/train/workload.h"
#include "workloads/biggan/biggan.h"
#include "workloads/registry.h"

namespace dtrain {

// The latent vectors and classes of fakes for the samples `indices`: z [N, dim_z] standard normal and
// classes [N] uniform in [0, classes), each a function of (seed, index) only (SampleRandom), so that N
// ranks and one rank with their samples draw the same fakes. On the CPU.
struct Latents {
  at::Tensor z;
  at::Tensor classes;
};
Latents draw_latents(uint64_t seed, const std::vector<int64_t>& indices, int64_t dim_z, int64_t classes);

// Width and latent size of the networks; the resolution and class count come from the data.
struct BigGanWorkloadOptions {
  int64_t channels = 64;
  int64_t dim_z = 128;
  int64_t synthetic_train = 50000;  // images of --synthetic (CIFAR-10's sizes)
  int64_t synthetic_test = 1000;
};

// The GAN's own options, the "biggan" section of the configuration.
struct BigGanTrainOptions {
  static constexpr const char* kSection = "biggan";
  int64_t d_steps = 1;  // discriminator steps per generator step
  // The moving average of the generator's weights: ema = decay x ema + (1 - decay) x generator after each
  // generator step, a plain copy for the first ema_start of them; decay 0 keeps no average.
  double ema_decay = 0.0;
  int64_t ema_start = 0;
  int64_t sample_every = 0;  // epochs between grids of sample images in the run directory; 0 = none
};

// The configuration fields of BigGanTrainOptions (biggan.d_steps, ...).
std::vector<ConfigField> biggan_config_fields();

std::unique_ptr<Workload> make_biggan_workload(BigGanWorkloadOptions options = {});

// Adds "biggan" with its options.
void register_biggan_workloads(WorkloadRegistry& registry);

}  // namespace dtrain
