// Random-number state: a Philox 4x32-10 (seed, offset) pair per device
// (Note [Philox stream] in src/core/philox.h). The same seed and offset give
// the same numbers on every device and in compiled code.
#pragma once
#include <cstdint>
#include <mutex>

#include "kiln/device.h"

namespace kiln {

class Generator {
 public:
  explicit Generator(uint64_t seed = 67280421310721ULL, Device device = kCPU)
      : seed_(seed), offset_(0), device_(device) {}
  void manual_seed(uint64_t seed);
  uint64_t initial_seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_offset(uint64_t off) { offset_ = off; }
  Device device() const { return device_; }
  // Reserves `n` 128-bit Philox blocks; returns (seed, first offset) to use.
  std::pair<uint64_t, uint64_t> reserve(uint64_t n);

 private:
  std::mutex mu_;
  uint64_t seed_;
  uint64_t offset_;
  Device device_;
};

// Seeds the default generators of every device.
void manual_seed(uint64_t seed);
Generator& default_generator(Device device = kCPU);

}  // namespace kiln
