// sort/topk rows on CUB's segmented radix sort (Note [CUDA sort keys]); nonzero and
// masked_select on CUB's DeviceSelect (stream compaction, order kept).
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>
#include <cub/device/device_select.cuh>

#include <algorithm>
#include <type_traits>

#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/cuda/sort.h"
#include "core/dtype_dispatch.h"
#include "core/half.h"

namespace kiln::cuda {
namespace {

// Note [CUDA sort keys]
// Values become unsigned keys whose integer order is the CPU's comparison order: -0 as +0 and
// every NaN as one NaN above +inf (so equal values tie, and a stable sort keeps their order),
// signed integers with the sign bit flipped. Half types go through float (exact), integers up
// to 32 bits through uint32: two key types, four CUB instantiations.
template <class T>
using KeyOf = std::conditional_t<std::is_same_v<T, double> || std::is_same_v<T, int64_t>, uint64_t, uint32_t>;

template <class T>
__device__ inline KeyOf<T> key_of(T v) {
  if constexpr (std::is_same_v<T, double>) {
    if (v != v) return 0xFFF8000000000000ull;  // the canonical NaN's key
    if (v == 0.0) v = 0.0;
    uint64_t b = __double_as_longlong(v);
    return (b >> 63) ? ~b : b | (1ull << 63);
  } else if constexpr (std::is_floating_point_v<T> || is_reduced_float_v<T>) {
    float f = static_cast<float>(v);
    if (f != f) return 0xFFC00000u;
    if (f == 0.0f) f = 0.0f;
    uint32_t b = __float_as_uint(f);
    return (b >> 31) ? ~b : b | (1u << 31);
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return static_cast<uint64_t>(v) ^ (1ull << 63);
  } else if constexpr (std::is_signed_v<T>) {
    return static_cast<uint32_t>(static_cast<int32_t>(v)) ^ (1u << 31);
  } else {
    return static_cast<uint32_t>(v);
  }
}

template <class T>
__global__ void make_keys(const T* x, KeyOf<T>* keys, int64_t* perm, int64_t total, int64_t n) {
  int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    keys[i] = key_of(x[i]);
    perm[i] = i % n;
  }
}

__global__ void row_offsets(int* offsets, int64_t rows, int64_t n) {
  int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i <= rows; i += step)
    offsets[i] = static_cast<int>(i * n);
}

// The first k of each sorted row: the original values (not decoded keys) and their indices.
template <class T>
__global__ void take_rows(const T* x, const int64_t* perm, T* values, int64_t* indices, int64_t rows, int64_t n,
                          int64_t k) {
  int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * k; i += step) {
    int64_t r = i / k, j = i % k;
    int64_t p = perm[r * n + j];
    values[i] = x[r * n + p];
    indices[i] = p;
  }
}

size_t align_up(size_t v) { return (v + 255) / 256 * 256; }

// The CUB call for key type K; temp == nullptr asks for the temp size.
template <class K>
cudaError_t cub_sort(void* temp, size_t& temp_bytes, const K* kin, K* kout, const int64_t* vin, int64_t* vout,
                     int64_t rows, int64_t n, const int* offsets, bool descending, cudaStream_t s) {
  int items = static_cast<int>(rows * n), segs = static_cast<int>(rows);
  if (descending)
    return cub::DeviceSegmentedRadixSort::SortPairsDescending(temp, temp_bytes, kin, kout, vin, vout, items, segs,
                                                              offsets, offsets + 1, 0, int(sizeof(K) * 8), s);
  return cub::DeviceSegmentedRadixSort::SortPairs(temp, temp_bytes, kin, kout, vin, vout, items, segs, offsets,
                                                  offsets + 1, 0, int(sizeof(K) * 8), s);
}

// Workspace: keys in/out, perm in/out, offsets, CUB's temp, each 256-byte aligned.
struct Layout {
  size_t keys, perm, offsets, temp, total;
};
template <class K>
Layout layout(int64_t rows, int64_t n, bool descending) {
  Layout l;
  l.keys = align_up(sizeof(K) * rows * n);
  l.perm = align_up(sizeof(int64_t) * rows * n);
  l.offsets = align_up(sizeof(int) * (rows + 1));
  size_t temp = 0;
  KILN_CHECK(
      cub_sort<K>(nullptr, temp, nullptr, nullptr, nullptr, nullptr, rows, n, nullptr, descending, 0) == cudaSuccess,
      "CUDA: cub::DeviceSegmentedRadixSort: temp storage query failed");
  l.temp = align_up(temp);
  l.total = 2 * l.keys + 2 * l.perm + l.offsets + l.temp;
  return l;
}

}  // namespace

size_t sort_rows_workspace(DType t, int64_t rows, int64_t n, bool descending) {
  KILN_CHECK(rows * n < (int64_t(1) << 31), "sort: more than 2^31 elements are not supported yet on cuda");
  return visit_dtype(t, [&]<class T>() { return layout<KeyOf<T>>(rows, n, descending).total; });
}

void launch_sort_rows(DType t, const void* x, void* values, int64_t* indices, int64_t rows, int64_t n, int64_t k,
                      bool descending, void* workspace, size_t workspace_bytes, cudaStream_t s) {
  if (rows == 0 || k == 0) return;
  visit_dtype(t, [&]<class T>() {
    using K = KeyOf<T>;
    Layout l = layout<K>(rows, n, descending);
    KILN_CHECK(workspace_bytes >= l.total, "internal: sort workspace too small");
    char* w = static_cast<char*>(workspace);
    K* kin = reinterpret_cast<K*>(w);
    K* kout = reinterpret_cast<K*>(w + l.keys);
    int64_t* pin = reinterpret_cast<int64_t*>(w + 2 * l.keys);
    int64_t* pout = reinterpret_cast<int64_t*>(w + 2 * l.keys + l.perm);
    int* offsets = reinterpret_cast<int*>(w + 2 * l.keys + 2 * l.perm);
    void* temp = w + 2 * l.keys + 2 * l.perm + l.offsets;
    const int64_t total = rows * n;
    make_keys<T><<<grid_for(total), kThreads, 0, s>>>(static_cast<const T*>(x), kin, pin, total, n);
    row_offsets<<<grid_for(rows + 1), kThreads, 0, s>>>(offsets, rows, n);
    check_launch();
    size_t temp_bytes = l.temp;
    cudaError_t err = cub_sort<K>(temp, temp_bytes, kin, kout, pin, pout, rows, n, offsets, descending, s);
    KILN_CHECK(err == cudaSuccess, "CUDA: cub::DeviceSegmentedRadixSort failed: ", cudaGetErrorString(err));
    take_rows<T><<<grid_for(rows * k), kThreads, 0, s>>>(static_cast<const T*>(x), pout, static_cast<T*>(values),
                                                         indices, rows, n, k);
    check_launch();
  });
}

namespace {

template <class T>
__global__ void nonzero_flags_kernel(const T* x, uint8_t* flags, int64_t n) {
  int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    if constexpr (is_reduced_float_v<T>)
      flags[i] = static_cast<float>(x[i]) != 0.0f;
    else
      flags[i] = x[i] != T(0);
  }
}

__global__ void iota_kernel(int64_t* out, int64_t n) {
  int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) out[i] = i;
}

__global__ void unravel_kernel(const int64_t* flat, int64_t k, UnravelSizes sz, int64_t* coords) {
  int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < k; i += step) {
    int64_t v = flat[i];
    for (int d = sz.ndim - 1; d >= 0; --d) {
      coords[i * sz.ndim + d] = v % sz.sizes[d];
      v /= sz.sizes[d];
    }
  }
}

// unique: 1 where element i starts a group (the first, or unequal to the one before: compared as
// the CPU's unique does, Half types in float, NaN equal to nothing).
template <class T>
__global__ void group_starts_kernel(const T* x, int64_t* flags, int64_t n) {
  using K = std::conditional_t<is_reduced_float_v<T>, float, T>;
  int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    flags[i] = i == 0 || !(static_cast<K>(x[i]) == static_cast<K>(x[i - 1])) ? 1 : 0;
}

// Element i (of the sorted order; x's element perm[i], or i without perm) is in group
// group[i] - 1: a group's first element gives its value, and every element its inverse and count.
template <class W>
__global__ void unique_scatter_kernel(const W* x, const int64_t* perm, const int64_t* starts, const int64_t* group,
                                      int64_t n, W* values, int64_t* inverse, unsigned long long* counts) {
  int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const int64_t g = group[i] - 1, p = perm ? perm[i] : i;
    if (starts[i]) values[g] = x[p];
    if (inverse) inverse[p] = g;
    if (counts) atomicAdd(counts + g, 1ull);
  }
}

// Weighted bincount: bin b's sum of w[perm[j]] over its segment [ends[b] - count[b], ends[b]),
// added in order from 0 (the CPU's order when perm is a stable sort of the input).
template <class T>
__global__ void segment_sums_kernel(const T* w, const int64_t* perm, const int64_t* count, const int64_t* ends,
                                    int64_t bins, T* out) {
  int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < bins; b += step) {
    T acc = T(0);
    for (int64_t j = ends[b] - count[b]; j < ends[b]; ++j) acc += w[perm[j]];
    out[b] = acc;
  }
}

// Items move as raw bytes of their width: four CUB instantiations.
template <class F>
void visit_width(size_t elem_size, F&& f) {
  switch (elem_size) {
    case 1:
      return f.template operator()<uint8_t>();
    case 2:
      return f.template operator()<uint16_t>();
    case 4:
      return f.template operator()<uint32_t>();
    default:
      return f.template operator()<uint64_t>();
  }
}

}  // namespace

void launch_nonzero_flags(DType t, const void* x, uint8_t* flags, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  visit_dtype(t, [&]<class T>() {
    nonzero_flags_kernel<T><<<grid_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), flags, n);
  });
  check_launch();
}

void launch_group_starts(DType t, const void* x, int64_t* flags, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  visit_dtype(t, [&]<class T>() {
    group_starts_kernel<T><<<grid_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), flags, n);
  });
  check_launch();
}

size_t inclusive_sum_workspace(int64_t n) {
  size_t bytes = 0;
  KILN_CHECK(cub::DeviceScan::InclusiveSum(nullptr, bytes, static_cast<const int64_t*>(nullptr),
                                           static_cast<int64_t*>(nullptr), n) == cudaSuccess,
             "CUDA: cub::DeviceScan::InclusiveSum: temp storage query failed");
  return bytes;
}

void launch_inclusive_sum(const int64_t* in, int64_t* out, int64_t n, void* workspace, size_t workspace_bytes,
                          cudaStream_t s) {
  if (n == 0) return;
  size_t bytes = workspace_bytes;
  cudaError_t err = cub::DeviceScan::InclusiveSum(workspace, bytes, in, out, n, s);
  KILN_CHECK(err == cudaSuccess, "CUDA: cub::DeviceScan::InclusiveSum failed: ", cudaGetErrorString(err));
}

void launch_unique_scatter(const void* x, size_t elem_size, const int64_t* perm, const int64_t* starts,
                           const int64_t* group, int64_t n, void* values, int64_t* inverse, int64_t* counts,
                           cudaStream_t s) {
  if (n == 0) return;
  visit_width(elem_size, [&]<class W>() {
    unique_scatter_kernel<W><<<grid_for(n), kThreads, 0, s>>>(static_cast<const W*>(x), perm, starts, group, n,
                                                              static_cast<W*>(values), inverse,
                                                              reinterpret_cast<unsigned long long*>(counts));
  });
  check_launch();
}

void launch_segment_sums(DType t, const void* w, const int64_t* perm, const int64_t* count, const int64_t* ends,
                         int64_t bins, void* out, cudaStream_t s) {
  if (bins == 0) return;
  auto run = [&]<class T>() {
    segment_sums_kernel<T>
        <<<grid_for(bins), kThreads, 0, s>>>(static_cast<const T*>(w), perm, count, ends, bins, static_cast<T*>(out));
  };
  if (t == DType::Float32)
    run.template operator()<float>();
  else if (t == DType::Float64)
    run.template operator()<double>();
  else
    KILN_FAIL("bincount: internal: weights summed in float32 or float64, got ", t);
  check_launch();
}

void launch_iota(int64_t* out, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  iota_kernel<<<grid_for(n), kThreads, 0, s>>>(out, n);
  check_launch();
}

size_t select_workspace(int64_t n, size_t elem_size) {
  size_t bytes = 0;
  visit_width(elem_size, [&]<class W>() {
    KILN_CHECK(
        cub::DeviceSelect::Flagged(nullptr, bytes, static_cast<const W*>(nullptr), static_cast<const uint8_t*>(nullptr),
                                   static_cast<W*>(nullptr), static_cast<int64_t*>(nullptr), n, 0) == cudaSuccess,
        "CUDA: cub::DeviceSelect::Flagged: temp storage query failed");
  });
  return std::max<size_t>(bytes, 1);
}

void launch_select_flagged(const void* in, const uint8_t* flags, void* out, int64_t* count, int64_t n, size_t elem_size,
                           void* workspace, size_t workspace_bytes, cudaStream_t s) {
  visit_width(elem_size, [&]<class W>() {
    size_t bytes = workspace_bytes;
    cudaError_t err = cub::DeviceSelect::Flagged(workspace, bytes, static_cast<const W*>(in), flags,
                                                 static_cast<W*>(out), count, n, s);
    KILN_CHECK(err == cudaSuccess, "CUDA: cub::DeviceSelect::Flagged failed: ", cudaGetErrorString(err));
  });
}

void launch_unravel(const int64_t* flat, int64_t k, const UnravelSizes& sizes, int64_t* coords, cudaStream_t s) {
  if (k == 0 || sizes.ndim == 0) return;
  unravel_kernel<<<grid_for(k), kThreads, 0, s>>>(flat, k, sizes, coords);
  check_launch();
}

}  // namespace kiln::cuda
