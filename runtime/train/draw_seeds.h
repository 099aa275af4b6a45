// Seeds of torch's generator, which draws what a model's forward draws (dropout masks): per rank and
// epoch by default, per shard under train.deterministic, so that a resumed run, or one at another world
// size, draws what the uninterrupted one did.
#pragma once

#include <cstdint>

#include "runtime/data/sample_random.h"

namespace dtrain {

// One rank's seed for `epoch`: reseeding at every epoch start makes a resumed run draw exactly the masks
// the uninterrupted run would have drawn.
inline uint64_t epoch_seed(int64_t seed, int64_t epoch, int rank) {
  uint64_t z = static_cast<uint64_t>(seed) * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(epoch) * 0xbf58476d1ce4e5b9ULL +
               static_cast<uint64_t>(rank) * 0x94d049bb133111ebULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The seed of global shard `shard` of step `step` (0-based in its epoch) in an epoch whose sample seed is
// `sample_seed` (MicroBatch::sample_seed): the same whichever rank computes the shard.
inline uint64_t shard_seed(uint64_t sample_seed, int64_t step, int64_t shard) {
  uint64_t state = sample_seed ^ (static_cast<uint64_t>(step) * 0xd1b54a32d192ed03ULL) ^
                   (static_cast<uint64_t>(shard) * 0x8cb92ba72f3d8dd7ULL);
  return splitmix64(state);
}

}  // namespace dtrain
