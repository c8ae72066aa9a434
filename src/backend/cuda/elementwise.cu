// The strided elementwise kernels (backend/cuda/elementwise.h): one grid-stride template over
// an offset calculator with a contiguous fast path and a 32-bit index fast path.
#include <type_traits>

#include "backend/cuda/elementwise.h"
#include "core/dtype_dispatch.h"
#include "core/half.h"

namespace kiln::cuda {
namespace {

// kiln::convert (core/convert.h) for device code: the same rules (through float for
// Half/BFloat16, non-zero is true). TODO: mark convert.h KILN_HD and use it directly.
template <class To, class From>
__device__ inline To device_convert(From v) {
  constexpr bool from16 = is_reduced_float_v<From>;
  constexpr bool to16 = is_reduced_float_v<To>;
  if constexpr (std::is_same_v<To, From>)
    return v;
  else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (from16)
      return static_cast<float>(v) != 0.0f;
    else
      return v != From(0);
  } else if constexpr (from16)
    return static_cast<To>(static_cast<float>(v));
  else if constexpr (to16)
    return To(static_cast<float>(v));
  else
    return static_cast<To>(v);
}

template <int N, class Index>
struct Offsets {
  Index off[N];
};

// Byte offsets of linear element `i` in each operand (row-major over args.sizes).
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

template <class To, class From, class Index>
__global__ void copy_kernel(ElementwiseArgs a) {
  Index n = static_cast<Index>(a.numel);
  Index step = static_cast<Index>(blockDim.x) * gridDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    if (a.contiguous) {
      reinterpret_cast<To*>(a.ops[0].data)[i] = device_convert<To>(reinterpret_cast<const From*>(a.ops[1].data)[i]);
    } else {
      auto o = offsets_of<2, Index>(a, i);
      *reinterpret_cast<To*>(a.ops[0].data + o.off[0]) =
          device_convert<To>(*reinterpret_cast<const From*>(a.ops[1].data + o.off[1]));
    }
  }
}

template <class T, class Index>
__global__ void fill_kernel(ElementwiseArgs a, T value) {
  Index n = static_cast<Index>(a.numel);
  Index step = static_cast<Index>(blockDim.x) * gridDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    if (a.contiguous)
      reinterpret_cast<T*>(a.ops[0].data)[i] = value;
    else
      *reinterpret_cast<T*>(a.ops[0].data + offsets_of<1, Index>(a, i).off[0]) = value;
  }
}

constexpr int kThreads = 256;
// Enough blocks to fill an H100 several times over; the grid-stride loop covers the rest.
unsigned grid_for(int64_t numel) {
  int64_t blocks = (numel + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65536 ? blocks : 65536);
}

void check_launch() {
  cudaError_t err = cudaGetLastError();
  KILN_CHECK(err == cudaSuccess, "CUDA: kernel launch failed: ", cudaGetErrorName(err), ": ", cudaGetErrorString(err));
}

}  // namespace

void launch_copy(const ElementwiseArgs& a, cudaStream_t stream) {
  if (a.numel == 0) return;
  visit_dtype(a.ops[0].dtype, [&]<class To>() {
    visit_dtype(a.ops[1].dtype, [&]<class From>() {
      if (a.index32)
        copy_kernel<To, From, uint32_t><<<grid_for(a.numel), kThreads, 0, stream>>>(a);
      else
        copy_kernel<To, From, int64_t><<<grid_for(a.numel), kThreads, 0, stream>>>(a);
    });
  });
  check_launch();
}

void launch_fill(const ElementwiseArgs& a, double fvalue, int64_t ivalue, bool value_is_int, cudaStream_t stream) {
  if (a.numel == 0) return;
  visit_dtype(a.ops[0].dtype, [&]<class T>() {
    T v;
    if constexpr (std::is_same_v<T, bool>)
      v = value_is_int ? ivalue != 0 : fvalue != 0.0;
    else if constexpr (is_reduced_float_v<T>)
      v = T(static_cast<float>(value_is_int ? static_cast<double>(ivalue) : fvalue));
    else
      v = value_is_int ? static_cast<T>(ivalue) : static_cast<T>(fvalue);
    if (a.index32)
      fill_kernel<T, uint32_t><<<grid_for(a.numel), kThreads, 0, stream>>>(a, v);
    else
      fill_kernel<T, int64_t><<<grid_for(a.numel), kThreads, 0, stream>>>(a, v);
  });
  check_launch();
}

}  // namespace kiln::cuda
