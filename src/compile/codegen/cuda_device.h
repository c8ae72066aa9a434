// Included first by generated CUDA (Note [Generated CUDA]); compiled by NVRTC only, never by
// the host compiler. The standard headers it and the shared numeric headers name are mapped to
// the toolkit's libcu++ by the CUDA JIT (src/compile/jit/cuda_jit.cpp).
#pragma once
#include <cstdint>
#include <limits>

#include "core/convert.h"
#include "core/scalar_math.h"

namespace kiln::jit {

// A kernel's one parameter: its buffers (a device pointer each, or for a CPU 0-d input its value's
// bytes), its sizes and strides (Note [Kernel parameters]) and the threads per row of a
// reduction. All 8-byte slots: the host packs it as an array of them.
template <int NB, int NP>
struct Args {
  char* b[NB];
  int64_t p[NP];
  int64_t group;
};

// kVector elements of T as one aligned access (a 16-byte load for float).
constexpr int kVector = 4;
template <class T>
struct alignas(sizeof(T) * kVector) Vec {
  T v[kVector];
};

// Bit-exact exchange of a value of at most 8 bytes between the lanes of a warp.
template <class T>
__device__ inline T shfl_xor(T v, int mask) {
  unsigned long long u = 0;
  memcpy(&u, &v, sizeof(T));
  u = __shfl_xor_sync(0xffffffffu, u, mask);
  T r;
  memcpy(&r, &u, sizeof(T));
  return r;
}

// Combines v over the `group` threads that share a row (a power of two). Up to 32 the group is
// a slice of a warp: a butterfly of shuffles, after which every lane holds the same bits (each
// pair combines the same two values). Above 32 the group is the whole block: each warp's result
// through shared memory, then the first warp's butterfly, read back by all. Every thread of the
// block calls it, active or not; `init` is the identity padding the unused lanes.
template <class T, class F>
__device__ inline T group_reduce(T v, int group, T init, F combine) {
  if (group == 1) return v;
  const int width = group < 32 ? group : 32;
  for (int o = width / 2; o > 0; o /= 2) v = combine(v, shfl_xor(v, o));
  if (group <= 32) return v;
  __shared__ unsigned long long scratch[33];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) memcpy(&scratch[warp], &v, sizeof(T));
  __syncthreads();
  if (warp == 0) {
    T w = init;
    if (lane < static_cast<int>(blockDim.x / 32)) memcpy(&w, &scratch[lane], sizeof(T));
    for (int o = 16; o > 0; o /= 2) w = combine(w, shfl_xor(w, o));
    if (lane == 0) memcpy(&scratch[32], &w, sizeof(T));
  }
  __syncthreads();
  memcpy(&v, &scratch[32], sizeof(T));
  __syncthreads();  // the next reduction may write scratch
  return v;
}

// The same for column groups (Note [Generated CUDA]): the block holds `rows` consecutive rows,
// thread t works on row t % rows as lane t / rows, so a row's lanes sit in different warps.
// Through shared memory: each row's first lane combines its lanes in lane order, and every lane
// reads the result.
template <class T, class F>
__device__ inline T column_reduce(T v, int rows, F combine) {
  __shared__ unsigned long long scratch[1024];
  const int t = threadIdx.x, lanes = blockDim.x / rows;
  memcpy(&scratch[t], &v, sizeof(T));
  __syncthreads();
  if (t < rows) {
    for (int l = 1; l < lanes; ++l) {
      T o;
      memcpy(&o, &scratch[t + l * rows], sizeof(T));
      v = combine(v, o);
    }
    memcpy(&scratch[t], &v, sizeof(T));
  }
  __syncthreads();
  memcpy(&v, &scratch[t % rows], sizeof(T));
  __syncthreads();
  return v;
}

// A row's lanes combined: a positive group is a row group, a negative one a column group of
// -group lanes (cuda_launch() picks).
template <class T, class F>
__device__ inline T lanes_reduce(T v, int group, T init, F combine) {
  if (group > 0) return group_reduce(v, group, init, combine);
  if (group == -1) return v;
  return column_reduce(v, static_cast<int>(blockDim.x) / -group, combine);
}

}  // namespace kiln::jit
