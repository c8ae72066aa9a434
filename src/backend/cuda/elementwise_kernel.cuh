// The one strided elementwise kernel template (device code only: included by the .cu files).
#pragma once
#include <cstdint>
#include <type_traits>
#include <utility>

#include <cuda/std/tuple>

#include "backend/cuda/elementwise.h"
#include "kiln/error.h"

namespace kiln::cuda {

template <int N, class Index>
struct Offsets {
  Index off[N];
};

// Byte offsets of linear element `i` in each operand (row-major over a.sizes).
template <int N, class Index>
__device__ inline Offsets<N, Index> offsets_of(const ElementwiseArgs& a, Index i) {
  Offsets<N, Index> o{};
  for (int d = a.ndim - 1; d >= 0; --d) {
    Index size = static_cast<Index>(a.sizes[d]);
    Index idx = i % size;
    i /= size;
#pragma unroll
    for (int k = 0; k < N; ++k) o.off[k] += idx * static_cast<Index>(a.ops[k].strides[d]);
  }
  return o;
}

// out[i] = f(in1[i], ...): R is the output's element type, In... the inputs'. Dense operands
// index the arrays directly; others go through the offsets (32-bit when they fit: integer
// division is several times cheaper).
template <class Index, class R, class F, class... In>
__global__ void elementwise_kernel(ElementwiseArgs a, F f) {
  constexpr int N = 1 + static_cast<int>(sizeof...(In));
  Index n = static_cast<Index>(a.numel);
  Index step = static_cast<Index>(blockDim.x) * gridDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    if (a.contiguous) {
      [&]<int... K>(std::integer_sequence<int, K...>) {
        reinterpret_cast<R*>(a.ops[0].data)[i] = f(reinterpret_cast<const In*>(a.ops[K + 1].data)[i]...);
      }
      (std::make_integer_sequence<int, N - 1>{});
    } else {
      Offsets<N, Index> o = offsets_of<N, Index>(a, i);
      [&]<int... K>(std::integer_sequence<int, K...>) {
        *reinterpret_cast<R*>(a.ops[0].data + o.off[0]) =
            f(*reinterpret_cast<const In*>(a.ops[K + 1].data + o.off[K + 1])...);
      }
      (std::make_integer_sequence<int, N - 1>{});
    }
  }
}

// Note [Vectorized elementwise]
// Where the output is dense and each input dense or broadcast in one of the two common ways (a
// number, or a row over rows: a bias), a thread moves kVec elements of each operand with one
// aligned vector load or store instead of kVec scalar ones: 2-byte bf16 stores otherwise run at
// about half of HBM bandwidth, and a broadcast input would take the dividing index path. The
// host takes this kernel only when every operand's first element is aligned to its vector
// (views at odd offsets take the scalar kernel) and rows are whole vectors; the numel % kVec
// tail is done by scalar stores in the first threads.
inline constexpr int kVec = 4;

template <class T>
struct alignas(sizeof(T) * kVec) VecOf {
  T v[kVec];
};

// Vector i of operand o (Operand::period says where its elements come from).
template <class T, class Index>
__device__ inline VecOf<T> load_vec(const Operand& o, Index i) {
  if (o.period == 0) return reinterpret_cast<const VecOf<T>*>(o.data)[i];
  if (o.period == 1) {
    const T x = *reinterpret_cast<const T*>(o.data);
    VecOf<T> r;
#pragma unroll
    for (int j = 0; j < kVec; ++j) r.v[j] = x;
    return r;
  }
  return reinterpret_cast<const VecOf<T>*>(o.data)[i % static_cast<Index>(o.period / kVec)];
}

template <class T, class Index>
__device__ inline T load_one(const Operand& o, Index i) {
  const Index at = o.period == 0 ? i : o.period == 1 ? Index(0) : i % static_cast<Index>(o.period);
  return reinterpret_cast<const T*>(o.data)[at];
}

template <class Index, class R, class F, class... In>
__global__ void vectorized_kernel(ElementwiseArgs a, F f) {
  constexpr int N = 1 + static_cast<int>(sizeof...(In));
  const Index n = static_cast<Index>(a.numel);
  const Index nvec = n / kVec;
  const Index step = static_cast<Index>(blockDim.x) * gridDim.x;
  const Index first = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x;
  [&]<int... K>(std::integer_sequence<int, K...>) {
    for (Index i = first; i < nvec; i += step) {
      // Every load is issued before any math so they overlap in flight.
      auto ins = ::cuda::std::make_tuple(load_vec<In, Index>(a.ops[K + 1], i)...);
      VecOf<R> out;
#pragma unroll
      for (int j = 0; j < kVec; ++j) out.v[j] = f(::cuda::std::get<K>(ins).v[j]...);
      reinterpret_cast<VecOf<R>*>(a.ops[0].data)[i] = out;
    }
    for (Index i = nvec * kVec + first; i < n; i += step)
      reinterpret_cast<R*>(a.ops[0].data)[i] = f(load_one<In, Index>(a.ops[K + 1], i)...);
  }
  (std::make_integer_sequence<int, N - 1>{});
}

template <class R, class... In>
bool vectorizable(const ElementwiseArgs& a) {
  if (!a.dense_or_broadcast) return false;
  constexpr size_t vec_bytes[] = {sizeof(R) * kVec, sizeof(In) * kVec...};
  constexpr size_t item_bytes[] = {sizeof(R), sizeof(In)...};
  for (int k = 0; k < 1 + static_cast<int>(sizeof...(In)); ++k) {
    const Operand& o = a.ops[k];
    if (o.period > 1 && o.period % kVec != 0) return false;
    const size_t align = o.period == 1 ? item_bytes[k] : vec_bytes[k];
    if (reinterpret_cast<uintptr_t>(o.data) % align != 0) return false;
  }
  return true;
}

inline constexpr int kThreads = 256;
// Enough blocks to fill an H100 several times over; the grid-stride loop covers the rest.
inline unsigned grid_for(int64_t numel) {
  int64_t blocks = (numel + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65536 ? blocks : 65536);
}

inline void check_launch() {
  cudaError_t err = cudaGetLastError();
  KILN_CHECK(err == cudaSuccess, "CUDA: kernel launch failed: ", cudaGetErrorName(err), ": ", cudaGetErrorString(err));
}

template <class R, class... In, class F>
void launch_elementwise(const ElementwiseArgs& a, const F& f, cudaStream_t s) {
  if (a.numel == 0) return;
  // The vector kernel indexes elements in 32 bits (one instantiation fewer per functor: nvcc's
  // time); larger tensors take the scalar kernel's 64-bit path.
  if (a.numel < (int64_t(1) << 31) && vectorizable<R, In...>(a))
    vectorized_kernel<uint32_t, R, F, In...><<<grid_for((a.numel + kVec - 1) / kVec), kThreads, 0, s>>>(a, f);
  else if (a.index32)
    elementwise_kernel<uint32_t, R, F, In...><<<grid_for(a.numel), kThreads, 0, s>>>(a, f);
  else
    elementwise_kernel<int64_t, R, F, In...><<<grid_for(a.numel), kThreads, 0, s>>>(a, f);
  check_launch();
}

}  // namespace kiln::cuda
