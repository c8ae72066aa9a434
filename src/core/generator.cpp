// Generator: the (seed, offset) Philox state random ops consume (Note [Philox stream]).
#include "kiln/generator.h"

#include <array>
#include <memory>
#include <vector>

#include "kiln/error.h"

namespace kiln {

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(mu_);
  seed_ = seed;
  offset_ = 0;
}

std::pair<uint64_t, uint64_t> Generator::reserve(uint64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  std::pair<uint64_t, uint64_t> r{seed_, offset_};
  offset_ += n;
  return r;
}

namespace {
// One default generator per device type and index; created on first use.
constexpr int kMaxDeviceIndex = 16;
using GeneratorTable = std::array<std::array<std::unique_ptr<Generator>, kMaxDeviceIndex>, kNumDeviceTypes>;
GeneratorTable& generators() {
  static GeneratorTable table;
  return table;
}
std::mutex& table_mutex() {
  static std::mutex mu;
  return mu;
}
uint64_t g_default_seed = 67280421310721ULL;  // guarded by table_mutex()
}  // namespace

Generator& default_generator(Device device) {
  int idx = device.index < 0 ? 0 : device.index;
  KILN_CHECK(idx < kMaxDeviceIndex, "default_generator: device index ", idx, " out of range");
  std::lock_guard<std::mutex> lock(table_mutex());
  auto& slot = generators()[static_cast<int>(device.type)][idx];
  if (!slot) slot = std::make_unique<Generator>(g_default_seed, Device(device.type, idx));
  return *slot;
}

void manual_seed(uint64_t seed) {
  // Seeds the generators already in use; ones created later start from this seed.
  std::vector<Generator*> all;
  {
    std::lock_guard<std::mutex> lock(table_mutex());
    g_default_seed = seed;
    for (auto& per_type : generators())
      for (auto& g : per_type)
        if (g) all.push_back(g.get());
  }
  for (Generator* g : all) g->manual_seed(seed);
}

}  // namespace kiln
