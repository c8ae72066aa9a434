// The factories on the device (random.h): the CPU kernels' per-element functions
// (backend/cpu/random.cpp over Philox, core/philox.h; backend/cpu/creation.cpp), one thread
// per element of the dense output.
#include <cmath>
#include <type_traits>

#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/cuda/random.h"
#include "core/dtype_dispatch.h"
#include "core/philox.h"

namespace kiln::cuda {
namespace {

// kiln::convert (core/convert.h) from int64 or double for device code: the same rules (through
// float for Half/BFloat16, non-zero is true), as elementwise.cu's Convert.
template <class T, class From>
__device__ inline T to_elem(From v) {
  if constexpr (std::is_same_v<T, From>)
    return v;
  else if constexpr (std::is_same_v<T, bool>)
    return v != From(0);
  else if constexpr (is_reduced_float_v<T>)
    return T(static_cast<float>(v));
  else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<T> && sizeof(T) < 4)
    return static_cast<T>(static_cast<int32_t>(v));  // x86 truncates to int32 and wraps; PTX would saturate
  else
    return static_cast<T>(v);
}

#define KILN_GRID_STRIDE(i, n)                                                           \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

// Floating arange/linspace use __dmul_rn/__dadd_rn: nvcc would otherwise contract a + i * k
// into one FMA (one rounding), and the CPU rounds twice.
template <class T>
__global__ void arange_kernel(T* out, int64_t n, bool integral, int64_t ia, int64_t ik, double fa, double fk) {
  KILN_GRID_STRIDE(i, n) {
    if (integral)  // wraps as the CPU's int64 arithmetic (computed unsigned: no UB)
      out[i] = to_elem<T>(
          static_cast<int64_t>(static_cast<uint64_t>(ia) + static_cast<uint64_t>(i) * static_cast<uint64_t>(ik)));
    else
      out[i] = to_elem<T>(__dadd_rn(fa, __dmul_rn(static_cast<double>(i), fk)));
  }
}

template <class T>
__global__ void linspace_kernel(T* out, int64_t n, double a, double z, double step) {
  const int64_t half = n / 2;
  KILN_GRID_STRIDE(i, n) {
    const double v = i < half || n == 1 ? __dadd_rn(a, __dmul_rn(step, static_cast<double>(i)))
                                        : __dsub_rn(z, __dmul_rn(step, static_cast<double>(n - 1 - i)));
    out[i] = to_elem<T>(v);
  }
}

template <class T>
__global__ void eye_kernel(T* out, int64_t n, int64_t m) {
  KILN_GRID_STRIDE(i, n * m) { out[i] = to_elem<T>(int64_t(i / m == i % m ? 1 : 0)); }
}

template <class T>
__global__ void randint_kernel(T* out, int64_t n, int64_t low, uint64_t range, bool narrow, uint64_t seed,
                               uint64_t off) {
  KILN_GRID_STRIDE(i, n) {
    const uint64_t u = static_cast<uint64_t>(i);
    const uint64_t r = narrow ? philox_u32(seed, off, u) % range : philox_u64(seed, off, u) % range;
    out[i] = to_elem<T>(static_cast<int64_t>(static_cast<uint64_t>(low) + r));
  }
}

// randperm's sort keys: the CPU's 64-bit Philox draw of i with the sign bit flipped, so that
// sort.cu's int64 keys (which flip it back) order them as the CPU's unsigned comparison does.
__global__ void randperm_keys_kernel(int64_t* keys, int64_t n, uint64_t seed, uint64_t off) {
  KILN_GRID_STRIDE(i, n) {
    keys[i] = static_cast<int64_t>(philox_u64(seed, off, static_cast<uint64_t>(i)) ^ (uint64_t(1) << 63));
  }
}

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

void launch_arange(DType t, void* out, int64_t n, bool integral, int64_t istart, int64_t istep, double fstart,
                   double fstep, cudaStream_t s) {
  if (n == 0) return;
  visit_dtype(t, [&]<class T>() {
    arange_kernel<T><<<grid_for(n), kThreads, 0, s>>>(static_cast<T*>(out), n, integral, istart, istep, fstart, fstep);
  });
  check_launch();
}

void launch_linspace(DType t, void* out, int64_t n, double start, double end, double step, cudaStream_t s) {
  if (n == 0) return;
  visit_dtype(t, [&]<class T>() {
    linspace_kernel<T><<<grid_for(n), kThreads, 0, s>>>(static_cast<T*>(out), n, start, end, step);
  });
  check_launch();
}

void launch_eye(DType t, void* out, int64_t n, int64_t m, cudaStream_t s) {
  if (n == 0 || m == 0) return;
  visit_dtype(t, [&]<class T>() { eye_kernel<T><<<grid_for(n * m), kThreads, 0, s>>>(static_cast<T*>(out), n, m); });
  check_launch();
}

void launch_randint(DType t, void* out, int64_t n, int64_t low, int64_t high, uint64_t seed, uint64_t offset,
                    cudaStream_t s) {
  if (n == 0) return;
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  KILN_CHECK(range != 0, "randint: expected low < high, got low ", low, " and high ", high);
  const bool narrow = range <= (uint64_t(1) << 32);  // as the CPU kernel: one 32-bit draw, else a 64-bit one
  visit_dtype(t, [&]<class T>() {
    randint_kernel<T><<<grid_for(n), kThreads, 0, s>>>(static_cast<T*>(out), n, low, range, narrow, seed, offset);
  });
  check_launch();
}

void launch_randperm_keys(int64_t* keys, int64_t n, uint64_t seed, uint64_t offset, cudaStream_t s) {
  if (n == 0) return;
  randperm_keys_kernel<<<grid_for(n), kThreads, 0, s>>>(keys, n, seed, offset);
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
