// Per-sample random draws for data augmentation that depend only on (seed, sample index): a sample is
// transformed the same way whichever rank, batch or worker thread reads it, so N ranks x batch b and
// one rank x batch N*b see identical data, and a resumed run sees what the uninterrupted one would.
#pragma once

#include <cstdint>

namespace dtrain {

// SplitMix64 (Steele, Lea, Flood 2014): the next value of the stream `state`; the same on every platform
// and standard library, unlike std:: engines' distributions.
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

class SampleRandom {
 public:
  SampleRandom(uint64_t seed, int64_t index) : state_(seed ^ (static_cast<uint64_t>(index) * 0xd1b54a32d192ed03ULL)) {}

  uint64_t next() { return splitmix64(state_); }
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, n).
  int64_t below(int64_t n) { return static_cast<int64_t>(uniform() * static_cast<double>(n)); }

 private:
  uint64_t state_;
};

}  // namespace dtrain
