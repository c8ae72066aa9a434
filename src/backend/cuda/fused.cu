// Fused CUDA kernels (fused.h): softmax / log_softmax and layer_norm in one launch each, their
// backward ops (Note [Fused norm and activation backward]), the
// foreach ops and _fused_adam_ as a multi-tensor apply (many tensors per launch, PyTorch's multi_tensor_apply),
// and tril/triu and one_hot (the ops that had only their many-launch decompositions).
#include <limits>
#include <type_traits>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/cuda/fused.h"
#include "core/dtype_dispatch.h"
#include "core/scalar_math.h"

namespace kiln::cuda {
namespace {

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int64_t kWarpRowMax = 1024;  // rows up to this long get a warp, longer ones a block
constexpr int kWarpRowThreads = 128;   // 4 rows per block
constexpr int kBlockRowThreads = 512;

unsigned capped_grid(int64_t blocks) {
  if (blocks < 1) blocks = 1;
  return static_cast<unsigned>(blocks < 65536 ? blocks : 65536);
}

// ---- group reductions: a warp (shuffles only) or a whole block (shuffles, then the warps'
// results combined by every thread in warp order, so the answer does not depend on timing) ----

template <class C>
struct MaxSum {
  C m, s;  // the largest value seen and the sum of exp(x - m) over the values seen
};

template <class C>
__device__ inline C shfl_xor(C v, int lane_mask) {
  return __shfl_xor_sync(kFullMask, v, lane_mask);
}
template <class C>
__device__ inline MaxSum<C> shfl_xor(MaxSum<C> v, int lane_mask) {
  return {__shfl_xor_sync(kFullMask, v.m, lane_mask), __shfl_xor_sync(kFullMask, v.s, lane_mask)};
}

// Every thread of the group gets the combination of every thread's v. Block mode uses
// shared[0..31]; all threads of the block must call it alike.
template <bool Warp, class V, class F>
__device__ inline V group_reduce(V v, const F& combine, V* shared) {
  for (int off = kWarp / 2; off > 0; off >>= 1) v = combine(v, shfl_xor(v, off));
  if constexpr (Warp) {
    return v;
  } else {
    const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
    const int warps = static_cast<int>(blockDim.x) / kWarp;
    __syncthreads();  // the previous call's reads of shared are done
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    V r = shared[0];
    for (int w = 1; w < warps; ++w) r = combine(r, shared[w]);
    return r;
  }
}

// ---- softmax: the CPU's max, sum of exp(x - max), then exp(x - max) / sum (or x - max - log(sum)),
// with the max and sum taken online. A -inf adds nothing (the CPU's exp(-inf - max) = 0; a row
// of only -inf ends with max -inf, sum 0: NaN, as the CPU's). A NaN is never the max (the CPU's
// std::max keeps the earlier value) but makes the sum NaN; +inf makes it NaN too (inf - inf).

template <class C>
__device__ inline void online_add(MaxSum<C>& a, C x) {
  if (x == -std::numeric_limits<C>::infinity()) return;
  const C nm = a.m < x ? x : a.m;
  a.s = a.s * math::Exp{}(a.m - nm) + math::Exp{}(x - nm);
  a.m = nm;
}

template <class C>
struct CombineMaxSum {
  __device__ MaxSum<C> operator()(MaxSum<C> a, MaxSum<C> b) const {
    const C nm = a.m < b.m ? b.m : a.m;
    if (nm == -std::numeric_limits<C>::infinity()) return {nm, a.s + b.s};  // only -inf on both sides
    return {nm, a.s * math::Exp{}(a.m - nm) + b.s * math::Exp{}(b.m - nm)};
  }
};

template <class C>
struct Plus {
  __device__ C operator()(C a, C b) const { return a + b; }
};

// The row this thread starts at, how many rows its group advances by, and its place in the row.
template <bool Warp>
struct RowGroup {
  int64_t first, step;
  int lane, width;
  __device__ RowGroup() {
    if constexpr (Warp) {
      const int64_t per = blockDim.x / kWarp;
      first = static_cast<int64_t>(blockIdx.x) * per + threadIdx.x / kWarp;
      step = static_cast<int64_t>(gridDim.x) * per;
      lane = static_cast<int>(threadIdx.x) % kWarp;
      width = kWarp;
    } else {
      first = blockIdx.x;
      step = gridDim.x;
      lane = static_cast<int>(threadIdx.x);
      width = static_cast<int>(blockDim.x);
    }
  }
};

template <class T, bool Log, bool Warp>
__global__ void softmax_rows_kernel(const T* x, T* y, int64_t rows, int64_t n) {
  using C = math::opmath_t<T>;
  __shared__ MaxSum<C> shared[kWarp];
  const RowGroup<Warp> g;
  // Every thread of a block runs the same number of iterations in block mode (the row depends
  // on blockIdx only), as group_reduce's __syncthreads needs.
  for (int64_t r = g.first; r < rows; r += g.step) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    MaxSum<C> a{-std::numeric_limits<C>::infinity(), C(0)};
    for (int64_t i = g.lane; i < n; i += g.width) online_add(a, static_cast<C>(xr[i]));
    a = group_reduce<Warp>(a, CombineMaxSum<C>{}, shared);
    if constexpr (Log) {
      const C lse = a.m + math::Log{}(a.s);
      for (int64_t i = g.lane; i < n; i += g.width) yr[i] = T(static_cast<C>(xr[i]) - lse);
    } else {
      const C inv = C(1) / a.s;
      for (int64_t i = g.lane; i < n; i += g.width) yr[i] = T(math::Exp{}(static_cast<C>(xr[i]) - a.m) * inv);
    }
  }
}

// A thread per (outer, inner) column; neighbouring threads read neighbouring elements.
template <class T, bool Log>
__global__ void softmax_cols_kernel(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  using C = math::opmath_t<T>;
  const int64_t cols = outer * inner;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; col < cols; col += step) {
    const int64_t o = col / inner, j = col % inner;
    const T* xc = x + o * n * inner + j;
    T* yc = y + o * n * inner + j;
    MaxSum<C> a{-std::numeric_limits<C>::infinity(), C(0)};
    for (int64_t i = 0; i < n; ++i) online_add(a, static_cast<C>(xc[i * inner]));
    if constexpr (Log) {
      const C lse = a.m + math::Log{}(a.s);
      for (int64_t i = 0; i < n; ++i) yc[i * inner] = T(static_cast<C>(xc[i * inner]) - lse);
    } else {
      const C inv = C(1) / a.s;
      for (int64_t i = 0; i < n; ++i) yc[i * inner] = T(math::Exp{}(static_cast<C>(xc[i * inner]) - a.m) * inv);
    }
  }
}

template <class T, bool Log>
void run_softmax(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, cudaStream_t s) {
  if (inner == 1) {
    if (n <= kWarpRowMax) {
      const int64_t per = kWarpRowThreads / kWarp;
      softmax_rows_kernel<T, Log, true>
          <<<capped_grid((outer + per - 1) / per), kWarpRowThreads, 0, s>>>(x, y, outer, n);
    } else {
      softmax_rows_kernel<T, Log, false><<<capped_grid(outer), kBlockRowThreads, 0, s>>>(x, y, outer, n);
    }
  } else {
    softmax_cols_kernel<T, Log><<<grid_for(outer * inner), kThreads, 0, s>>>(x, y, outer, n, inner);
  }
}

// ---- layer_norm: mean, then the mean of squared deviations, in opmath (the CPU's two passes) ----
template <class T, bool Warp>
__global__ void layer_norm_kernel(const T* x, const math::opmath_t<T>* w, const math::opmath_t<T>* b, T* y,
                                  int64_t rows, int64_t n, math::opmath_t<T> eps) {
  using C = math::opmath_t<T>;
  __shared__ C shared[kWarp];
  const RowGroup<Warp> g;
  for (int64_t r = g.first; r < rows; r += g.step) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    C sum = 0;
    for (int64_t i = g.lane; i < n; i += g.width) sum += static_cast<C>(xr[i]);
    const C mu = group_reduce<Warp>(sum, Plus<C>{}, shared) / C(n);
    C sq = 0;
    for (int64_t i = g.lane; i < n; i += g.width) {
      const C dv = static_cast<C>(xr[i]) - mu;
      sq += dv * dv;
    }
    const C var = group_reduce<Warp>(sq, Plus<C>{}, shared);
    const C rstd = C(1) / math::Sqrt{}(var / C(n) + eps);
    for (int64_t i = g.lane; i < n; i += g.width) {
      C v = (static_cast<C>(xr[i]) - mu) * rstd;
      if (w) v *= w[i];
      if (b) v += b[i];
      yr[i] = T(v);
    }
  }
}

// ---- _softmax_backward_data (Note [Fused norm and activation backward]): per row along dim,
// s = sum(g y) (softmax) or sum(g) (log_softmax), then y (g - s) or g - exp(y) s; the rows
// and columns split as the forward's ----
template <class T, bool Log>
__device__ inline math::opmath_t<T> softmax_backward_term(T g, T y) {
  using C = math::opmath_t<T>;
  return Log ? static_cast<C>(g) : static_cast<C>(g) * static_cast<C>(y);
}
template <class T, bool Log>
__device__ inline T softmax_backward_value(T g, T y, math::opmath_t<T> s) {
  using C = math::opmath_t<T>;
  if constexpr (Log)
    return T(static_cast<C>(g) - math::Exp{}(static_cast<C>(y)) * s);
  else
    return T(static_cast<C>(y) * (static_cast<C>(g) - s));
}

template <class T, bool Log, bool Warp>
__global__ void softmax_backward_rows_kernel(const T* g, const T* y, T* gx, int64_t rows, int64_t n) {
  using C = math::opmath_t<T>;
  __shared__ C shared[kWarp];
  const RowGroup<Warp> grp;
  for (int64_t r = grp.first; r < rows; r += grp.step) {  // uniform per block, as group_reduce needs
    const T *gr = g + r * n, *yr = y + r * n;
    T* gxr = gx + r * n;
    C sum = 0;
    for (int64_t i = grp.lane; i < n; i += grp.width) sum += softmax_backward_term<T, Log>(gr[i], yr[i]);
    const C s = group_reduce<Warp>(sum, Plus<C>{}, shared);
    for (int64_t i = grp.lane; i < n; i += grp.width) gxr[i] = softmax_backward_value<T, Log>(gr[i], yr[i], s);
  }
}

template <class T, bool Log>
__global__ void softmax_backward_cols_kernel(const T* g, const T* y, T* gx, int64_t outer, int64_t n, int64_t inner) {
  using C = math::opmath_t<T>;
  const int64_t cols = outer * inner;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; col < cols; col += step) {
    const int64_t off = (col / inner) * n * inner + col % inner;
    C s = 0;
    for (int64_t i = 0; i < n; ++i) s += softmax_backward_term<T, Log>(g[off + i * inner], y[off + i * inner]);
    for (int64_t i = 0; i < n; ++i)
      gx[off + i * inner] = softmax_backward_value<T, Log>(g[off + i * inner], y[off + i * inner], s);
  }
}

template <class T, bool Log>
void run_softmax_backward(const T* g, const T* y, T* gx, int64_t outer, int64_t n, int64_t inner, cudaStream_t s) {
  if (inner == 1) {
    if (n <= kWarpRowMax) {
      const int64_t per = kWarpRowThreads / kWarp;
      softmax_backward_rows_kernel<T, Log, true>
          <<<capped_grid((outer + per - 1) / per), kWarpRowThreads, 0, s>>>(g, y, gx, outer, n);
    } else {
      softmax_backward_rows_kernel<T, Log, false><<<capped_grid(outer), kBlockRowThreads, 0, s>>>(g, y, gx, outer, n);
    }
  } else {
    softmax_backward_cols_kernel<T, Log><<<grid_for(outer * inner), kThreads, 0, s>>>(g, y, gx, outer, n, inner);
  }
}

// ---- _layer_norm_backward (Note [Fused norm and activation backward]) ----
// grad_x: a warp (n <= 1024) or a block per row, three passes over the row (L1/L2-resident for
// GPT-sized rows): the mean; the squared deviations with the sums of gh = g w and gh (x - mean);
// then rstd (gh - mean(gh) - xhat mean(gh xhat)). The row's mean and rstd go to a scratch for
// the column sums of grad_weight and grad_bias.
template <class C>
struct Sum3 {
  C a, b, c;
};
template <class C>
__device__ inline Sum3<C> shfl_xor(Sum3<C> v, int lane_mask) {
  return {__shfl_xor_sync(kFullMask, v.a, lane_mask), __shfl_xor_sync(kFullMask, v.b, lane_mask),
          __shfl_xor_sync(kFullMask, v.c, lane_mask)};
}
template <class C>
struct PlusSum3 {
  __device__ Sum3<C> operator()(Sum3<C> x, Sum3<C> y) const { return {x.a + y.a, x.b + y.b, x.c + y.c}; }
};

template <class T, bool Warp>
__global__ void layer_norm_backward_rows_kernel(const T* g, const T* x, const math::opmath_t<T>* w, T* gx,
                                                math::opmath_t<T>* mean_out, math::opmath_t<T>* rstd_out, int64_t rows,
                                                int64_t n, math::opmath_t<T> eps) {
  using C = math::opmath_t<T>;
  __shared__ C shared[kWarp];
  __shared__ Sum3<C> shared3[kWarp];
  const RowGroup<Warp> grp;
  for (int64_t r = grp.first; r < rows; r += grp.step) {
    const T *gr = g + r * n, *xr = x + r * n;
    T* gxr = gx + r * n;
    C sum = 0;
    for (int64_t i = grp.lane; i < n; i += grp.width) sum += static_cast<C>(xr[i]);
    const C mu = group_reduce<Warp>(sum, Plus<C>{}, shared) / C(n);
    Sum3<C> acc{0, 0, 0};  // sum (x - mu)^2, sum gh, sum gh (x - mu)
    for (int64_t i = grp.lane; i < n; i += grp.width) {
      const C d = static_cast<C>(xr[i]) - mu;
      const C gh = w ? static_cast<C>(gr[i]) * w[i] : static_cast<C>(gr[i]);
      acc.a += d * d;
      acc.b += gh;
      acc.c += gh * d;
    }
    acc = group_reduce<Warp>(acc, PlusSum3<C>{}, shared3);
    const C rstd = C(1) / math::Sqrt{}(acc.a / C(n) + eps);
    const C mg = acc.b / C(n), mgx = acc.c * rstd / C(n);
    for (int64_t i = grp.lane; i < n; i += grp.width) {
      const C xhat = (static_cast<C>(xr[i]) - mu) * rstd;
      const C gh = w ? static_cast<C>(gr[i]) * w[i] : static_cast<C>(gr[i]);
      gxr[i] = T(rstd * (gh - mg - xhat * mgx));
    }
    if (grp.lane == 0) {
      mean_out[r] = mu;
      rstd_out[r] = rstd;
    }
  }
}

// grad_weight / grad_bias, deterministic (no atomics): block (x, y) sums columns
// [32 x, 32 x + 32) over its share of the rows (rows_per_split from y * rows_per_split), its
// 8 thread rows combined in a fixed order, into part[y][col] (weight) and part[splits + y][col]
// (bias); layer_norm_backward_cols_final then sums the splits in order.
constexpr int kColTile = 32, kColRows = 8;

template <class T>
__global__ void layer_norm_backward_cols_kernel(const T* g, const T* x, const math::opmath_t<T>* mean,
                                                const math::opmath_t<T>* rstd, math::opmath_t<T>* part, int64_t rows,
                                                int64_t n, int64_t rows_per_split, int64_t splits) {
  using C = math::opmath_t<T>;
  __shared__ C sw[kColRows][kColTile], sb[kColRows][kColTile];
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kColTile + threadIdx.x;
  const int64_t split = blockIdx.y;
  const int64_t r0 = split * rows_per_split, r1 = r0 + rows_per_split < rows ? r0 + rows_per_split : rows;
  C aw = 0, ab = 0;
  if (col < n) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kColRows) {
      const C gv = static_cast<C>(g[r * n + col]);
      aw += gv * (static_cast<C>(x[r * n + col]) - mean[r]) * rstd[r];
      ab += gv;
    }
  }
  sw[threadIdx.y][threadIdx.x] = aw;
  sb[threadIdx.y][threadIdx.x] = ab;
  __syncthreads();
  if (threadIdx.y == 0 && col < n) {
    for (int k = 1; k < kColRows; ++k) {
      aw += sw[k][threadIdx.x];
      ab += sb[k][threadIdx.x];
    }
    part[split * n + col] = aw;
    part[(splits + split) * n + col] = ab;
  }
}

template <class C>
__global__ void layer_norm_backward_cols_final(const C* part, C* gw, C* gb, int64_t n, int64_t splits) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; col < n; col += step) {
    C aw = 0, ab = 0;
    for (int64_t k = 0; k < splits; ++k) {
      aw += part[k * n + col];
      ab += part[(splits + k) * n + col];
    }
    gw[col] = aw;
    gb[col] = ab;
  }
}

// Rows of at most kWarpRowMax elements (GPT widths): one pass. A warp keeps its row of x and g in
// registers (lane l holds columns l, l + 32, ...: coalesced), so each is read once, and also
// sums its rows' shares of grad_weight and grad_bias in registers, written once per warp to
// part[warp] (weight) and part[warps + warp] (bias); column_partials_final sums them in a fixed
// order (deterministic). The two-kernel path above reads x and g twice.
template <class T, int Per>
__global__ void layer_norm_backward_warp_kernel(const T* g, const T* x, const math::opmath_t<T>* w, T* gx,
                                                math::opmath_t<T>* part, int64_t rows, int64_t n, int64_t warps,
                                                math::opmath_t<T> eps) {
  using C = math::opmath_t<T>;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  if (warp >= warps) return;  // whole warps only: the shuffles below need every lane
  C dw[Per], db[Per];  // the weight is read per row (L1-resident), to keep registers for these
#pragma unroll
  for (int j = 0; j < Per; ++j) dw[j] = db[j] = C(0);
  auto warp_sum = [](C v) {
#pragma unroll
    for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(kFullMask, v, o);
    return v;
  };
  for (int64_t r = warp; r < rows; r += warps) {
    C xv[Per], gv[Per];
    C sum = 0;
#pragma unroll
    for (int j = 0; j < Per; ++j) {
      const int64_t c = lane + j * kWarp;
      xv[j] = c < n ? static_cast<C>(x[r * n + c]) : C(0);
      gv[j] = c < n ? static_cast<C>(g[r * n + c]) : C(0);
      sum += xv[j];
    }
    const C mu = warp_sum(sum) / C(n);
    C a = 0, b = 0, cc = 0;  // sum (x - mu)^2, sum gh, sum gh (x - mu); padding lanes add 0
#pragma unroll
    for (int j = 0; j < Per; ++j) {
      const int64_t c = lane + j * kWarp;
      if (c >= n) continue;
      const C d = xv[j] - mu, gh = w ? gv[j] * w[c] : gv[j];
      a += d * d;
      b += gh;
      cc += gh * d;
    }
    a = warp_sum(a), b = warp_sum(b), cc = warp_sum(cc);
    const C rstd = C(1) / math::Sqrt{}(a / C(n) + eps);
    const C mg = b / C(n), mgx = cc * rstd / C(n);
#pragma unroll
    for (int j = 0; j < Per; ++j) {
      const int64_t c = lane + j * kWarp;
      if (c >= n) continue;
      const C xhat = (xv[j] - mu) * rstd;
      gx[r * n + c] = T(rstd * ((w ? gv[j] * w[c] : gv[j]) - mg - xhat * mgx));
      dw[j] += gv[j] * xhat;
      db[j] += gv[j];
    }
  }
#pragma unroll
  for (int j = 0; j < Per; ++j) {
    const int64_t c = lane + j * kWarp;
    if (c >= n) continue;
    part[warp * n + c] = dw[j];
    part[(warps + warp) * n + c] = db[j];
  }
}

// gw[col] = sum over k of part[k][col], gb[col] of part[splits + k][col]: a block per 32 columns,
// its 32 thread rows taking every 32nd split, combined in a fixed order.
template <class C>
__global__ void column_partials_final(const C* part, C* gw, C* gb, int64_t n, int64_t splits) {
  __shared__ C sw[kWarp][kWarp + 1], sb[kWarp][kWarp + 1];
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kWarp + threadIdx.x;
  C aw = 0, ab = 0;
  if (col < n)
    for (int64_t k = threadIdx.y; k < splits; k += kWarp) {
      aw += part[k * n + col];
      ab += part[(splits + k) * n + col];
    }
  sw[threadIdx.y][threadIdx.x] = aw;
  sb[threadIdx.y][threadIdx.x] = ab;
  __syncthreads();
  if (threadIdx.y == 0 && col < n) {
    for (int k = 1; k < kWarp; ++k) {
      aw += sw[k][threadIdx.x];
      ab += sb[k][threadIdx.x];
    }
    gw[col] = aw;
    gb[col] = ab;
  }
}

// ---- foreach (Note [CUDA foreach]) ----

// The single-tensor ops' scalar conversions: a wrapped number filled into T (kiln::convert:
// through float for Half/BFloat16), or an opmath value.
template <class T>
KILN_HD T scalar_as(double v) {
  if constexpr (is_reduced_float_v<T>)
    return T(static_cast<float>(v));
  else
    return static_cast<T>(v);
}
template <class C>
KILN_HD C alpha_as(ForeachAlpha a) {
  if constexpr (std::is_same_v<C, float>)
    return a.f;
  else
    return static_cast<C>(a.d);
}

// Each functor: built from (scalar, alpha) on host or device, applied to the inputs' elements.
template <class T>
struct FNeg {
  KILN_HD FNeg(double, ForeachAlpha) {}
  KILN_HD T operator()(T a) const { return math::Neg{}(a); }
};
template <class T>
struct FSqrt {
  KILN_HD FSqrt(double, ForeachAlpha) {}
  KILN_HD T operator()(T a) const { return math::Sqrt{}(a); }
};
template <class T>
struct FAddAlpha {
  math::AddAlpha<math::opmath_t<T>> f;
  KILN_HD FAddAlpha(double, ForeachAlpha a) : f{alpha_as<math::opmath_t<T>>(a)} {}
  KILN_HD T operator()(T a, T b) const { return f(a, b); }
};
template <class T, class F>
struct FScalar {
  T s;
  KILN_HD FScalar(double v, ForeachAlpha) : s(scalar_as<T>(v)) {}
  KILN_HD T operator()(T a) const { return F{}(a, s); }
};
template <class T>
using FAddScalar = FScalar<T, math::Add>;
template <class T>
using FMulScalar = FScalar<T, math::Mul>;
template <class T>
using FDivScalar = FScalar<T, math::Div>;
template <class T>
struct FAddcmul {
  math::Addcmul<math::opmath_t<T>> f;
  KILN_HD FAddcmul(double v, ForeachAlpha) : f{static_cast<math::opmath_t<T>>(v)} {}
  KILN_HD T operator()(T a, T b, T c) const { return f(a, b, c); }
};
template <class T>
struct FAddcdiv {
  math::Addcdiv<math::opmath_t<T>> f;
  KILN_HD FAddcdiv(double v, ForeachAlpha) : f{static_cast<math::opmath_t<T>>(v)} {}
  KILN_HD T operator()(T a, T b, T c) const { return f(a, b, c); }
};
template <class T>
struct FLerp {
  T w;
  KILN_HD FLerp(double v, ForeachAlpha) : w(scalar_as<T>(v)) {}
  KILN_HD T operator()(T a, T b) const { return math::Lerp{}(a, b, w); }
};
template <class T>
struct FMaximum {
  KILN_HD FMaximum(double, ForeachAlpha) {}
  KILN_HD T operator()(T a, T b) const { return math::Maximum{}(a, b); }
};

// The multi-tensor launch's argument table (kept well under the 4 KiB kernel-parameter limit):
// up to kMaxTensors tensors and kMaxBlocks blocks, each block one kChunk-element chunk of one
// tensor. 320 blocks of 512 threads keep an H100's 132 SMs busy (PyTorch's sizes).
constexpr int64_t kChunk = 65536;
constexpr int kMaxTensors = 24;
constexpr int kMaxBlocks = 320;
constexpr int kForeachThreads = 512;

template <int N>  // operands: the written one and N - 1 inputs
struct ListMeta {
  void* data[N][kMaxTensors];
  int64_t numel[kMaxTensors];
  double scalar[kMaxTensors];
  int block_chunk[kMaxBlocks];
  unsigned char block_tensor[kMaxBlocks];
};
static_assert(kMaxTensors <= 256, "block_tensor holds a tensor's slot in a byte");
static_assert(sizeof(ListMeta<4>) + sizeof(ForeachAlpha) < 4000, "kernel arguments are limited to 4 KiB");

template <class T, template <class> class F, int N>
__global__ void multi_tensor_kernel(ListMeta<N> m, ForeachAlpha alpha) {
  const int t = m.block_tensor[blockIdx.x];
  const int64_t begin = static_cast<int64_t>(m.block_chunk[blockIdx.x]) * kChunk;
  const int64_t end = begin + kChunk < m.numel[t] ? begin + kChunk : m.numel[t];
  const F<T> f(m.scalar[t], alpha);
  T* out = static_cast<T*>(m.data[0][t]);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    out[i] = [&]<int... K>(std::integer_sequence<int, K...>) {
      return f(static_cast<const T*>(m.data[K + 1][t])[i]...);
    }
    (std::make_integer_sequence<int, N - 1>{});
  }
}

// Fills the argument table m (its numel, block_chunk and block_tensor, and through put(slot,
// item) and move(to, from) its per-tensor fields) with the nonempty items, one block per
// kChunk-element chunk, and calls launch(blocks) whenever it is full and at the end.
template <class Meta, class Item, class Put, class Move, class Launch>
void plan_multi_tensor(Meta& m, const Item* items, int64_t count, const Put& put, const Move& move,
                       const Launch& launch) {
  int nt = 0, nb = 0;  // tensors and blocks in the table
  auto flush = [&] {
    if (nb == 0) return;
    launch(nb);
    nb = 0;
  };
  for (int64_t k = 0; k < count; ++k) {
    const Item& it = items[k];
    if (it.numel == 0) continue;
    put(nt, it);
    m.numel[nt] = it.numel;
    const int64_t chunks = (it.numel + kChunk - 1) / kChunk;
    for (int64_t c = 0; c < chunks; ++c) {
      m.block_tensor[nb] = static_cast<unsigned char>(nt);
      m.block_chunk[nb] = static_cast<int>(c);
      ++nb;
      if (nb == kMaxBlocks) {
        flush();
        if (c + 1 < chunks) {  // this tensor goes on in the next launch, as its slot 0
          move(0, nt);
          m.numel[0] = m.numel[nt];
          nt = 0;
        } else {
          nt = -1;  // done with it: the table starts empty
        }
      }
    }
    ++nt;
    if (nt == kMaxTensors) {
      flush();
      nt = 0;
    }
  }
  flush();
}

template <class T, template <class> class F, int N>
void run_multi_tensor(const ForeachItem* items, int64_t count, ForeachAlpha alpha, cudaStream_t s) {
  ListMeta<N> m{};
  plan_multi_tensor(
      m, items, count,
      [&](int slot, const ForeachItem& it) {
        for (int j = 0; j < N; ++j) m.data[j][slot] = it.data[j];
        m.scalar[slot] = it.scalar;
      },
      [&](int to, int from) {
        for (int j = 0; j < N; ++j) m.data[j][to] = m.data[j][from];
        m.scalar[to] = m.scalar[from];
      },
      [&](int blocks) {
        multi_tensor_kernel<T, F, N><<<blocks, kForeachThreads, 0, s>>>(m, alpha);  // copies m: it may change after
        check_launch();
      });
}

// ---- _fused_adam_ (Note [Fused Adam]) ----
struct AdamMeta {
  void* data[5][kMaxTensors];  // p, g, m, v, vmax (null without amsgrad)
  int64_t numel[kMaxTensors];
  double step_size[kMaxTensors];
  double bc2_sqrt[kMaxTensors];
  int block_chunk[kMaxBlocks];
  unsigned char block_tensor[kMaxBlocks];
};
static_assert(sizeof(AdamMeta) + sizeof(math::AdamStep<double>) < 4000, "kernel arguments are limited to 4 KiB");

template <class T>
struct alignas(16) Pack {
  static constexpr int kN = 16 / sizeof(T);
  T v[kN];
};

// One chunk per block; where the tensor's pointers are 16-byte aligned (a chunk starts at a
// multiple of kChunk elements, so then every pack is), packs of 16 bytes, then the tail.
template <class T>
__global__ void fused_adam_kernel(AdamMeta meta, math::AdamStep<math::opmath_t<T>> f) {
  using C = math::opmath_t<T>;
  const int t = meta.block_tensor[blockIdx.x];
  const int64_t begin = static_cast<int64_t>(meta.block_chunk[blockIdx.x]) * kChunk;
  const int64_t end = begin + kChunk < meta.numel[t] ? begin + kChunk : meta.numel[t];
  f.neg_step_size = static_cast<C>(-meta.step_size[t]);
  f.bc2_sqrt = static_cast<C>(meta.bc2_sqrt[t]);
  T* p = static_cast<T*>(meta.data[0][t]);
  const T* g = static_cast<const T*>(meta.data[1][t]);
  T* m = static_cast<T*>(meta.data[2][t]);
  T* v = static_cast<T*>(meta.data[3][t]);
  T* vmax = static_cast<T*>(meta.data[4][t]);
  constexpr int kN = Pack<T>::kN;
  const uintptr_t bits = reinterpret_cast<uintptr_t>(p) | reinterpret_cast<uintptr_t>(g) |
                         reinterpret_cast<uintptr_t>(m) | reinterpret_cast<uintptr_t>(v) |
                         reinterpret_cast<uintptr_t>(vmax);
  int64_t tail = begin;
  if (bits % 16 == 0) {
    tail = begin + (end - begin) / kN * kN;
    for (int64_t i = begin + static_cast<int64_t>(threadIdx.x) * kN; i < tail;
         i += static_cast<int64_t>(blockDim.x) * kN) {
      Pack<T> pp = *reinterpret_cast<const Pack<T>*>(p + i);
      const Pack<T> gp = *reinterpret_cast<const Pack<T>*>(g + i);
      Pack<T> mp = *reinterpret_cast<const Pack<T>*>(m + i);
      Pack<T> vp = *reinterpret_cast<const Pack<T>*>(v + i);
      Pack<T> xp{};
      if (f.amsgrad) xp = *reinterpret_cast<const Pack<T>*>(vmax + i);
#pragma unroll
      for (int k = 0; k < kN; ++k) f(pp.v[k], gp.v[k], mp.v[k], vp.v[k], &xp.v[k]);
      *reinterpret_cast<Pack<T>*>(p + i) = pp;
      *reinterpret_cast<Pack<T>*>(m + i) = mp;
      *reinterpret_cast<Pack<T>*>(v + i) = vp;
      if (f.amsgrad) *reinterpret_cast<Pack<T>*>(vmax + i) = xp;
    }
  }
  for (int64_t i = tail + threadIdx.x; i < end; i += blockDim.x) f(p[i], g[i], m[i], v[i], vmax ? vmax + i : nullptr);
}

template <class T>
void run_fused_adam(const AdamScalars& h, const AdamItem* items, int64_t count, cudaStream_t s) {
  const auto f = math::AdamStep<math::opmath_t<T>>::make(h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.amsgrad,
                                                         h.maximize, h.decoupled);
  AdamMeta m{};
  plan_multi_tensor(
      m, items, count,
      [&](int slot, const AdamItem& it) {
        for (int j = 0; j < 5; ++j) m.data[j][slot] = it.data[j];
        m.step_size[slot] = it.step_size;
        m.bc2_sqrt[slot] = it.bc2_sqrt;
      },
      [&](int to, int from) {
        for (int j = 0; j < 5; ++j) m.data[j][to] = m.data[j][from];
        m.step_size[to] = m.step_size[from];
        m.bc2_sqrt[to] = m.bc2_sqrt[from];
      },
      [&](int blocks) {
        fused_adam_kernel<T><<<blocks, kForeachThreads, 0, s>>>(m, f);
        check_launch();
      });
}

template <class T, template <class> class F, int N>
void run_strided(const ElementwiseArgs& a, double scalar, ForeachAlpha alpha, cudaStream_t s) {
  const F<T> f(scalar, alpha);
  if constexpr (N == 2)
    launch_elementwise<T, T>(a, f, s);
  else if constexpr (N == 3)
    launch_elementwise<T, T, T>(a, f, s);
  else
    launch_elementwise<T, T, T, T>(a, f, s);
}

// Calls run.template operator()<F, N>() with op's functor and operand count.
template <class Run>
void visit_foreach_op(ForeachOp op, const Run& run) {
  switch (op) {
    case ForeachOp::Neg:
      return run.template operator()<FNeg, 2>();
    case ForeachOp::Sqrt:
      return run.template operator()<FSqrt, 2>();
    case ForeachOp::AddAlpha:
      return run.template operator()<FAddAlpha, 3>();
    case ForeachOp::AddScalar:
      return run.template operator()<FAddScalar, 2>();
    case ForeachOp::MulScalar:
      return run.template operator()<FMulScalar, 2>();
    case ForeachOp::DivScalar:
      return run.template operator()<FDivScalar, 2>();
    case ForeachOp::Addcmul:
      return run.template operator()<FAddcmul, 4>();
    case ForeachOp::Addcdiv:
      return run.template operator()<FAddcdiv, 4>();
    case ForeachOp::Lerp:
      return run.template operator()<FLerp, 3>();
    case ForeachOp::Maximum:
      return run.template operator()<FMaximum, 3>();
  }
  KILN_FAIL("internal: unknown foreach op");
}

// ---- tril / triu, one_hot ----
template <class W>  // an unsigned type of the element's width
__global__ void tri_zero_kernel(bool lower, int64_t k, W* out, int64_t total, int64_t n, int64_t m) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += step) {
    const int64_t j = e % m, i = (e / m) % n;
    if (lower ? j > i + k : j < i + k) out[e] = W(0);
  }
}

__global__ void one_hot_kernel(const int64_t* idx, int64_t count, int64_t classes, int64_t* out, int64_t* bad) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += step) {
    const int64_t v = idx[i];
    if (v < 0 || v >= classes)
      atomicMin(reinterpret_cast<unsigned long long*>(bad), static_cast<unsigned long long>(i));
    else
      out[i * classes + v] = 1;
  }
}

}  // namespace

void launch_softmax(bool log, DType t, const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
                    cudaStream_t s) {
  if (outer * n * inner == 0) return;
  visit_floating(t, log ? "log_softmax" : "softmax", [&]<class T>() {
    const T* xp = static_cast<const T*>(x);
    T* yp = static_cast<T*>(y);
    if (log)
      run_softmax<T, true>(xp, yp, outer, n, inner, s);
    else
      run_softmax<T, false>(xp, yp, outer, n, inner, s);
  });
  check_launch();
}

void launch_layer_norm(DType t, const void* x, const void* weight, const void* bias, void* y, int64_t rows, int64_t n,
                       double eps, cudaStream_t s) {
  if (rows * n == 0) return;
  visit_floating(t, "layer_norm", [&]<class T>() {
    using C = math::opmath_t<T>;
    const T* xp = static_cast<const T*>(x);
    const C* wp = static_cast<const C*>(weight);
    const C* bp = static_cast<const C*>(bias);
    T* yp = static_cast<T*>(y);
    if (n <= kWarpRowMax) {
      const int64_t per = kWarpRowThreads / kWarp;
      layer_norm_kernel<T, true>
          <<<capped_grid((rows + per - 1) / per), kWarpRowThreads, 0, s>>>(xp, wp, bp, yp, rows, n, C(eps));
    } else {
      layer_norm_kernel<T, false><<<capped_grid(rows), kBlockRowThreads, 0, s>>>(xp, wp, bp, yp, rows, n, C(eps));
    }
  });
  check_launch();
}

void launch_softmax_backward(bool log, DType t, const void* g, const void* y, void* gx, int64_t outer, int64_t n,
                             int64_t inner, cudaStream_t s) {
  if (outer * n * inner == 0) return;
  visit_floating(t, "_softmax_backward_data", [&]<class T>() {
    const T *gp = static_cast<const T*>(g), *yp = static_cast<const T*>(y);
    T* gxp = static_cast<T*>(gx);
    if (log)
      run_softmax_backward<T, true>(gp, yp, gxp, outer, n, inner, s);
    else
      run_softmax_backward<T, false>(gp, yp, gxp, outer, n, inner, s);
  });
  check_launch();
}

// Warps of the one-pass kernel: enough to fill a large GPU, few enough that the partial sums
// (2 x warps x n) stay small.
constexpr int64_t kLnBackwardWarps = 1024;

// Rows the one-pass kernel takes: its registers hold 5 values per column a lane owns, which
// spill beyond 24 (float) or 16 (double) columns per lane.
bool layer_norm_backward_one_pass(DType t, int64_t n) { return n <= (t == DType::Float64 ? 16 : 24) * kWarp; }

int64_t layer_norm_backward_splits(DType t, int64_t rows, int64_t n) {
  if (layer_norm_backward_one_pass(t, n)) return rows < 1 ? 1 : (rows < kLnBackwardWarps ? rows : kLnBackwardWarps);
  // Enough blocks for the column sums to fill a large GPU (~1024), each over >= 64 rows.
  const int64_t tiles = (n + kColTile - 1) / kColTile;
  const int64_t by_rows = (rows + 63) / 64, by_blocks = 1024 / tiles > 1 ? 1024 / tiles : 1;
  const int64_t splits = by_rows < by_blocks ? by_rows : by_blocks;
  return splits < 1 ? 1 : (splits > 65535 ? 65535 : splits);
}

void launch_layer_norm_backward(DType t, const void* g, const void* x, const void* weight, void* gx, void* gw, void* gb,
                                void* row_stats, void* part, int64_t rows, int64_t n, int64_t splits, double eps,
                                cudaStream_t s) {
  if (n == 0) return;
  visit_floating(t, "_layer_norm_backward", [&]<class T>() {
    using C = math::opmath_t<T>;
    const T *gp = static_cast<const T*>(g), *xp = static_cast<const T*>(x);
    const C* wp = static_cast<const C*>(weight);
    C* mean = static_cast<C*>(row_stats);
    C* rstd = mean + rows;
    C* pp = static_cast<C*>(part);
    if (rows > 0 && layer_norm_backward_one_pass(t, n)) {
      T* gxp = static_cast<T*>(gx);
      const unsigned blocks = static_cast<unsigned>((splits * kWarp + kWarpRowThreads - 1) / kWarpRowThreads);
      auto run = [&]<int Per>() {
        layer_norm_backward_warp_kernel<T, Per>
            <<<blocks, kWarpRowThreads, 0, s>>>(gp, xp, wp, gxp, pp, rows, n, splits, C(eps));
      };
      if (n <= 4 * kWarp)
        run.template operator()<4>();
      else if (n <= 8 * kWarp)
        run.template operator()<8>();
      else if (n <= 16 * kWarp || t == DType::Float64)
        run.template operator()<16>();
      else
        run.template operator()<24>();
      check_launch();
      column_partials_final<C><<<static_cast<unsigned>((n + kWarp - 1) / kWarp), dim3(kWarp, kWarp), 0, s>>>(
          pp, static_cast<C*>(gw), static_cast<C*>(gb), n, splits);
      return;
    }
    if (rows > 0) {
      T* gxp = static_cast<T*>(gx);
      if (n <= kWarpRowMax) {
        const int64_t per = kWarpRowThreads / kWarp;
        layer_norm_backward_rows_kernel<T, true><<<capped_grid((rows + per - 1) / per), kWarpRowThreads, 0, s>>>(
            gp, xp, wp, gxp, mean, rstd, rows, n, C(eps));
      } else {
        layer_norm_backward_rows_kernel<T, false>
            <<<capped_grid(rows), kBlockRowThreads, 0, s>>>(gp, xp, wp, gxp, mean, rstd, rows, n, C(eps));
      }
      check_launch();
      const int64_t per_split = (rows + splits - 1) / splits;
      const dim3 grid(static_cast<unsigned>((n + kColTile - 1) / kColTile), static_cast<unsigned>(splits));
      layer_norm_backward_cols_kernel<T>
          <<<grid, dim3(kColTile, kColRows), 0, s>>>(gp, xp, mean, rstd, pp, rows, n, per_split, splits);
      check_launch();
    } else {  // no rows: both sums are zero
      KILN_CUDA_CHECK(cudaMemsetAsync(pp, 0, static_cast<size_t>(2 * splits * n) * sizeof(C), s), "cudaMemsetAsync");
    }
    layer_norm_backward_cols_final<C>
        <<<grid_for(n), kThreads, 0, s>>>(pp, static_cast<C*>(gw), static_cast<C*>(gb), n, splits);
  });
  check_launch();
}

int foreach_arity(ForeachOp op) {
  int arity = 0;
  visit_foreach_op(op, [&]<template <class> class F, int N>() { arity = N - 1; });
  return arity;
}

void launch_foreach(ForeachOp op, DType t, const ForeachItem* items, int64_t count, ForeachAlpha alpha,
                    cudaStream_t s) {
  visit_floating(t, "foreach", [&]<class T>() {
    visit_foreach_op(op, [&]<template <class> class F, int N>() { run_multi_tensor<T, F, N>(items, count, alpha, s); });
  });
}

void launch_foreach_strided(ForeachOp op, DType t, const ElementwiseArgs& a, double scalar, ForeachAlpha alpha,
                            cudaStream_t s) {
  if (a.numel == 0) return;
  visit_floating(t, "foreach", [&]<class T>() {
    visit_foreach_op(op, [&]<template <class> class F, int N>() { run_strided<T, F, N>(a, scalar, alpha, s); });
  });
}

void launch_fused_adam(DType t, const AdamScalars& h, const AdamItem* items, int64_t count, cudaStream_t s) {
  visit_floating(t, "_fused_adam_", [&]<class T>() { run_fused_adam<T>(h, items, count, s); });
}

void launch_tri_zero(bool lower, int64_t k, int itemsize, void* out, int64_t mats, int64_t n, int64_t m,
                     cudaStream_t s) {
  const int64_t total = mats * n * m;
  if (total == 0) return;
  auto run = [&]<class W>() {
    tri_zero_kernel<W><<<grid_for(total), kThreads, 0, s>>>(lower, k, static_cast<W*>(out), total, n, m);
  };
  switch (itemsize) {
    case 1:
      run.template operator()<uint8_t>();
      break;
    case 2:
      run.template operator()<uint16_t>();
      break;
    case 4:
      run.template operator()<uint32_t>();
      break;
    default:
      run.template operator()<uint64_t>();
      break;
  }
  check_launch();
}

void launch_one_hot(const int64_t* idx, int64_t count, int64_t classes, int64_t* out, int64_t* bad, cudaStream_t s) {
  if (count * classes > 0)
    KILN_CUDA_CHECK(cudaMemsetAsync(out, 0, static_cast<size_t>(count * classes) * sizeof(int64_t), s),
                    "cudaMemsetAsync");
  if (count == 0) return;
  one_hot_kernel<<<grid_for(count), kThreads, 0, s>>>(idx, count, classes, out, bad);
  check_launch();
}

}  // namespace kiln::cuda
