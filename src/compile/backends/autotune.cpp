#include "compile/backends/autotune.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "compile/jit/cpp_jit.h"

namespace kiln::compiler::autotune {

// Note [Max-autotune]
// Under mode "max-autotune", inductor times what it would otherwise guess, on the first call
// that runs each kernel with real inputs: today the thread count (one thread against all of
// them: OpenMP's fork and join cost more than small kernels save, and the break-even point
// depends on the kernel's body and the machine, which kParallelGrain only guesses). Each
// candidate runs a few times, the fastest median wins, and the choice goes to the disk cache
// beside the libraries, keyed by the kernel's source, index, parameters and core count, so a
// later process reuses it without timing. A cache that cannot be written only costs the timing
// again next time.

namespace {

uint64_t fnv1a(const void* data, size_t n, uint64_t h = 1469598103934665603ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

std::string path_of(const std::string& key) { return jit::cache_dir() + "/autotune/" + key; }

int read_choice(const std::string& key, const std::vector<int>& candidates) {
  std::ifstream in(path_of(key));
  int t = 0;
  if (!(in >> t)) return 0;
  return std::find(candidates.begin(), candidates.end(), t) != candidates.end() ? t : 0;
}

void write_choice(const std::string& key, int threads) {
  std::error_code ec;
  const std::filesystem::path dir = jit::cache_dir() + "/autotune";
  std::filesystem::create_directories(dir, ec);
  if (ec) return;
  // A whole file or none: written under a private name, then renamed into place.
  const std::string tmp = path_of(key) + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp);
    out << threads << "\n";
    if (!out) return;
  }
  std::filesystem::rename(tmp, path_of(key), ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

}  // namespace

std::string kernel_key(const std::string& source, size_t index, const std::vector<int64_t>& params, int cores) {
  uint64_t h = fnv1a(source.data(), source.size());
  h = fnv1a(&index, sizeof index, h);
  h = fnv1a(params.data(), params.size() * sizeof(int64_t), h);
  h = fnv1a(&cores, sizeof cores, h);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

int pick_threads(const std::string& key, const std::vector<int>& candidates, const std::function<void(int)>& run) {
  if (candidates.size() == 1) return candidates[0];
  if (int t = read_choice(key, candidates)) return t;
  constexpr int kRuns = 5;
  std::vector<std::vector<double>> times(candidates.size());
  run(candidates.back());  // warm: pages of the outputs, the OpenMP team
  for (int r = 0; r < kRuns; ++r)
    for (size_t c = 0; c < candidates.size(); ++c) {  // interleaved: drift hits every candidate alike
      const auto t0 = std::chrono::steady_clock::now();
      run(candidates[c]);
      times[c].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  size_t best = 0;
  double best_median = 0;
  for (size_t c = 0; c < candidates.size(); ++c) {
    std::sort(times[c].begin(), times[c].end());
    const double m = times[c][kRuns / 2];
    if (c == 0 || m < best_median) best = c, best_median = m;
  }
  write_choice(key, candidates[best]);
  return candidates[best];
}

}  // namespace kiln::compiler::autotune
