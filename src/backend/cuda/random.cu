// The random factories on the device (random.h): the CPU kernels' per-element functions
// (backend/cpu/random.cpp) over Philox (core/philox.h), one thread per element.
#include <cmath>
#include <type_traits>

#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/cuda/random.h"
#include "core/dtype_dispatch.h"
#include "core/philox.h"

namespace kiln::cuda {
namespace {

template <class T>
__global__ void uniform_kernel(T* out, int64_t n, double from, double to, uint64_t seed, uint64_t off) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const uint64_t u = static_cast<uint64_t>(i);
    if constexpr (std::is_same_v<T, double>) {
      const double w = to - from;
      const double v = from + w * philox_uniform<double>(seed, off, u);
      out[i] = v < to || !(to > from) ? v : nextafter(to, from);  // rounding may reach `to`
    } else {
      const float f = static_cast<float>(from), w = static_cast<float>(to - from), t = static_cast<float>(to);
      float v = f + w * static_cast<float>(philox_uniform<T>(seed, off, u));
      if (!(v < t) && t > f) v = nextafterf(t, f);
      const T r = T(v);
      out[i] = static_cast<float>(r) < t || !(t > f) ? r : T(f);  // reduced types may round up to `to`
    }
  }
}

template <class T>
__global__ void normal_kernel(T* out, int64_t n, double mean, double std, uint64_t seed, uint64_t off) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const uint64_t u = static_cast<uint64_t>(i);
    if constexpr (std::is_same_v<T, double>)
      out[i] = mean + std * philox_normal<double>(seed, off, u);
    else  // Half/BFloat16 use float's draws and round once, as the CPU
      out[i] = T(static_cast<float>(mean) + static_cast<float>(std) * philox_normal<float>(seed, off, u));
  }
}

}  // namespace

void launch_uniform(DType t, void* out, int64_t n, double from, double to, uint64_t seed, uint64_t offset,
                    cudaStream_t s) {
  if (n == 0) return;
  visit_floating(t, "uniform", [&]<class T>() {
    uniform_kernel<T><<<grid_for(n), kThreads, 0, s>>>(static_cast<T*>(out), n, from, to, seed, offset);
  });
  check_launch();
}

void launch_normal(DType t, void* out, int64_t n, double mean, double std, uint64_t seed, uint64_t offset,
                   cudaStream_t s) {
  if (n == 0) return;
  visit_floating(t, "normal", [&]<class T>() {
    normal_kernel<T><<<grid_for(n), kThreads, 0, s>>>(static_cast<T*>(out), n, mean, std, seed, offset);
  });
  check_launch();
}

}  // namespace kiln::cuda
