// CPU kernels for random ops. Element i of the (contiguous) output is a pure
// function of (seed, offset, i) (Note [Philox stream]), so results do not
// depend on the thread count, and match other devices and generated code.
#include <algorithm>
#include <numeric>

#include "backend/cpu/loops.h"
#include "core/philox.h"
#include "ops/registry.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kRandomGrain = 8192;

uint64_t seed_of(const Attrs& a, size_t k) { return static_cast<uint64_t>(a.i(k)); }

// Calls f(i) for every i and stores it into out's contiguous data.
template <class T, class F>
void generate(const Tensor& out, const F& f) {
  T* p = static_cast<T*>(out.data_ptr());
  parallel_for(0, out.numel(), kRandomGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) p[i] = f(static_cast<uint64_t>(i));
  });
}

// uniform: (size, from, to, dtype, device, seed, offset)
void uniform_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  double from = c.attrs.f(1), to = c.attrs.f(2);
  uint64_t seed = seed_of(c.attrs, 5), off = seed_of(c.attrs, 6);
  visit_floating(outs[0].dtype(), "uniform", [&]<class T>() {
    if constexpr (std::is_same_v<T, double>) {
      double w = to - from;
      generate<T>(outs[0], [&](uint64_t i) {
        double v = from + w * philox_uniform<double>(seed, off, i);
        return v < to || !(to > from) ? v : std::nextafter(to, from);  // rounding may reach `to`
      });
    } else {
      float f = static_cast<float>(from), w = static_cast<float>(to - from), t = static_cast<float>(to);
      generate<T>(outs[0], [&](uint64_t i) {
        float v = f + w * static_cast<float>(philox_uniform<T>(seed, off, i));
        if (!(v < t) && t > f) v = std::nextafter(t, f);
        T r = T(v);
        return static_cast<float>(r) < t || !(t > f) ? r : T(f);  // reduced types may round up to `to`
      });
    }
  });
}

// normal: (size, mean, std, dtype, device, seed, offset)
void normal_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  double mean = c.attrs.f(1), std = c.attrs.f(2);
  uint64_t seed = seed_of(c.attrs, 5), off = seed_of(c.attrs, 6);
  visit_floating(outs[0].dtype(), "normal", [&]<class T>() {
    if constexpr (std::is_same_v<T, double>) {
      generate<T>(outs[0], [&](uint64_t i) { return mean + std * philox_normal<double>(seed, off, i); });
    } else {
      // Half/BFloat16 use float's draws (same lanes) and round once at the end.
      float m = static_cast<float>(mean), s = static_cast<float>(std);
      generate<T>(outs[0], [&](uint64_t i) { return T(m + s * philox_normal<float>(seed, off, i)); });
    }
  });
}

// randint: (low, high, size, dtype, device, seed, offset)
void randint_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  int64_t low = c.attrs.i(0), high = c.attrs.i(1);
  uint64_t seed = seed_of(c.attrs, 5), off = seed_of(c.attrs, 6);
  uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  bool narrow = range <= (uint64_t(1) << 32);
  visit_dtype(outs[0].dtype(), [&]<class T>() {
    generate<T>(outs[0], [&](uint64_t i) {
      uint64_t r = narrow ? philox_u32(seed, off, i) % range : philox_u64(seed, off, i) % range;
      int64_t v = static_cast<int64_t>(static_cast<uint64_t>(low) + r);
      return convert<T, int64_t>(v);
    });
  });
}

// randperm: (n, dtype, device, seed, offset). Sorting indices by a 64-bit
// Philox key (ties by index) gives a uniformly random, deterministic permutation.
void randperm_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  int64_t n = c.attrs.i(0);
  uint64_t seed = seed_of(c.attrs, 3), off = seed_of(c.attrs, 4);
  std::vector<std::pair<uint64_t, int64_t>> keys(static_cast<size_t>(n));
  parallel_for(0, n, kRandomGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) keys[i] = {philox_u64(seed, off, static_cast<uint64_t>(i)), i};
  });
  std::sort(keys.begin(), keys.end());
  visit_dtype(outs[0].dtype(), [&]<class T>() {
    generate<T>(outs[0], [&](uint64_t i) { return convert<T, int64_t>(keys[i].second); });
  });
}

// bernoulli: (p; seed, offset): out[i] = uniform_i < p[i], with p's dtype.
void bernoulli_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  uint64_t seed = seed_of(c.attrs, 0), off = seed_of(c.attrs, 1);
  Tensor p = c.in(0);
  if (!p.is_contiguous()) {
    Tensor q = make_tensor(p.sizes(), p.dtype(), p.device());
    copy_cpu(q, p);
    p = q;
  }
  visit_floating(p.dtype(), "bernoulli", [&]<class T>() {
    const T* pp = static_cast<const T*>(p.data_ptr());
    int64_t n = p.numel();
    bool ok = true;
    for (int64_t i = 0; i < n; ++i) {
      double v = static_cast<double>(pp[i]);
      if (!(v >= 0.0 && v <= 1.0)) ok = false;
    }
    KILN_CHECK(ok, "bernoulli: expected all probabilities p to be in the range [0, 1]");
    generate<T>(outs[0], [&](uint64_t i) {
      bool hit;
      if constexpr (std::is_same_v<T, double>) hit = philox_uniform<double>(seed, off, i) < pp[i];
      else hit = static_cast<float>(philox_uniform<T>(seed, off, i)) < static_cast<float>(pp[i]);
      return T(hit ? 1.0f : 0.0f);
    });
  });
}

KILN_REGISTER_KERNEL(uniform, CPU, uniform_kernel);
KILN_REGISTER_KERNEL(normal, CPU, normal_kernel);
KILN_REGISTER_KERNEL(randint, CPU, randint_kernel);
KILN_REGISTER_KERNEL(randperm, CPU, randperm_kernel);
KILN_REGISTER_KERNEL(bernoulli, CPU, bernoulli_kernel);

}  // namespace
}  // namespace kiln::cpu
