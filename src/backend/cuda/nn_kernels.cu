// Pooling (max/avg 2-D and 3-D, adaptive max, their backward) and scans (cumsum/cumprod).
// Each follows the CPU kernel's loop order and accumulator type, so results agree bit for bit;
// backward passes gather over the windows holding an element instead of scattering with atomics.
#include <cub/block/block_scan.cuh>

#include <type_traits>

#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/cuda/nn_kernels.h"
#include "core/dtype_dispatch.h"
#include "core/half.h"

namespace kiln::cuda {
namespace {

// Float32 for the half types and float32, float64 for float64, int64 for integers.
template <class T>
using PoolAcc =
    std::conditional_t<std::is_same_v<T, double>, double, std::conditional_t<std::is_integral_v<T>, int64_t, float>>;

__device__ inline int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
__device__ inline int64_t ceil_div(int64_t a, int64_t b) { return floor_div(a + b - 1, b); }
__device__ inline int64_t clamp(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

template <class A>
__device__ inline bool is_nan(A v) {
  if constexpr (std::is_floating_point_v<A>)
    return v != v;
  else
    return false;
}

// PoolArgs in the index type I: max pooling's kernels divide and take remainders per element,
// and 64-bit division is emulated on the GPU (several times the cost of 32-bit), so tensors with
// fewer than 2^31 elements index in int32.
// Below this many elements, int32 indexing (a grid-stride step past the end still fits).
constexpr int64_t kInt32Index = int64_t(1) << 30;
template <class I>
struct PoolIdx {
  I planes, in[3], k[3], stride[3], pad[3], dil[3], out[3];
  bool adaptive;
  explicit PoolIdx(const PoolArgs& p) : planes(static_cast<I>(p.planes)), adaptive(p.adaptive) {
    for (int j = 0; j < 3; ++j) {
      in[j] = static_cast<I>(p.in[j]);
      k[j] = static_cast<I>(p.k[j]);
      stride[j] = static_cast<I>(p.stride[j]);
      pad[j] = static_cast<I>(p.pad[j]);
      dil[j] = static_cast<I>(p.dil[j]);
      out[j] = static_cast<I>(p.out[j]);
    }
  }
};
// The output's plane and its three coordinates from a flat index, in the index type I.
template <class I>
struct PosI {
  I plane, o[3];
};
template <class I>
__device__ inline PosI<I> unflatten_i(I i, const I* dims) {
  PosI<I> p;
  p.o[2] = i % dims[2];
  i /= dims[2];
  p.o[1] = i % dims[1];
  i /= dims[1];
  p.o[0] = i % dims[0];
  p.plane = i / dims[0];
  return p;
}
template <class I>
__device__ inline I floor_div_i(I a, I b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
template <class I>
__device__ inline I clamp_i(I v, I lo, I hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

template <class T, class I>
__global__ void max_pool_kernel(PoolIdx<I> p, const T* x, T* y, int64_t* indices, I total) {
  using A = PoolAcc<T>;
  const I ip = p.in[0] * p.in[1] * p.in[2];
  const I step = static_cast<I>(blockDim.x) * gridDim.x;
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    PosI<I> q = unflatten_i(i, p.out);
    I lo[3], hi[3], dl[3];
    for (int j = 0; j < 3; ++j) {
      if (p.adaptive) {
        lo[j] = q.o[j] * p.in[j] / p.out[j];
        hi[j] = ((q.o[j] + 1) * p.in[j] + p.out[j] - 1) / p.out[j];
        dl[j] = 1;
      } else {
        lo[j] = q.o[j] * p.stride[j] - p.pad[j];
        hi[j] = lo[j] + (p.k[j] - 1) * p.dil[j] + 1;
        hi[j] = hi[j] < p.in[j] ? hi[j] : p.in[j];
        while (lo[j] < 0) lo[j] += p.dil[j];
        dl[j] = p.dil[j];
      }
    }
    const T* xp = x + static_cast<int64_t>(q.plane) * ip;
    A best = -static_cast<A>(INFINITY);
    I best_i = (lo[0] * p.in[1] + lo[1]) * p.in[2] + lo[2];
    for (I d = lo[0]; d < hi[0]; d += dl[0])
      for (I h = lo[1]; h < hi[1]; h += dl[1])
        for (I w = lo[2]; w < hi[2]; w += dl[2]) {
          const I k = (d * p.in[1] + h) * p.in[2] + w;
          A v = static_cast<A>(xp[k]);
          if (v > best || is_nan(v)) best = v, best_i = k;
        }
    y[i] = T(best);
    indices[i] = best_i;
  }
}

template <class T, class I>
__global__ void max_pool_backward_kernel(PoolIdx<I> p, const T* gy, const int64_t* indices, T* gx, I total) {
  using A = PoolAcc<T>;
  const I op = p.out[0] * p.out[1] * p.out[2];
  const I step = static_cast<I>(blockDim.x) * gridDim.x;
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    PosI<I> q = unflatten_i(i, p.in);
    const int64_t flat = (q.o[0] * p.in[1] + q.o[1]) * p.in[2] + q.o[2];
    I lo[3], hi[3];
    for (int j = 0; j < 3; ++j) {  // the outputs whose windows may hold this position along dim j
      const I pos = q.o[j] + p.pad[j];
      lo[j] = clamp_i<I>(floor_div_i<I>(pos - (p.k[j] - 1) * p.dil[j] + p.stride[j] - 1, p.stride[j]), 0, p.out[j]);
      hi[j] = clamp_i<I>(floor_div_i<I>(pos, p.stride[j]) + 1, 0, p.out[j]);
    }
    A sum = 0;
    const I base = q.plane * op;
    for (I od = lo[0]; od < hi[0]; ++od)
      for (I oh = lo[1]; oh < hi[1]; ++oh)
        for (I ow = lo[2]; ow < hi[2]; ++ow) {
          const I o = base + (od * p.out[1] + oh) * p.out[2] + ow;
          if (indices[o] == flat) sum += static_cast<A>(gy[o]);
        }
    gx[i] = T(sum);
  }
}

// The avg window of output o along dim j: clipped [lo, hi) and its padded length (CPU's avg_span).
__device__ inline void avg_span(const PoolArgs& p, int j, int64_t o, int64_t& lo, int64_t& hi, int64_t& padded) {
  lo = o * p.stride[j] - p.pad[j];
  hi = lo + p.k[j] < p.in[j] + p.pad[j] ? lo + p.k[j] : p.in[j] + p.pad[j];
  padded = hi - lo;
  lo = lo > 0 ? lo : 0;
  hi = hi < p.in[j] ? hi : p.in[j];
}
__device__ inline int64_t avg_divisor(const PoolArgs& p, const int64_t* o) {
  int64_t inside = 1, padded = 1;
  for (int j = 0; j < 3; ++j) {
    int64_t lo, hi, pd;
    avg_span(p, j, o[j], lo, hi, pd);
    inside *= hi - lo;
    padded *= pd;
  }
  if (inside <= 0) return 0;
  return p.divisor_override ? p.divisor_override : p.count_include_pad ? padded : inside;
}

template <class T>
__global__ void avg_pool_kernel(PoolArgs p, const T* x, T* y, int64_t total) {
  using A = PoolAcc<T>;
  const int64_t ip = p.in[0] * p.in[1] * p.in[2];
  int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    PosI<int64_t> q = unflatten_i<int64_t>(i, p.out);
    int64_t lo[3], hi[3], pd;
    for (int j = 0; j < 3; ++j) avg_span(p, j, q.o[j], lo[j], hi[j], pd);
    const int64_t div = avg_divisor(p, q.o);
    const T* xp = x + q.plane * ip;
    A sum = 0;
    for (int64_t d = lo[0]; d < hi[0]; ++d)
      for (int64_t h = lo[1]; h < hi[1]; ++h)
        for (int64_t w = lo[2]; w < hi[2]; ++w) sum += static_cast<A>(xp[(d * p.in[1] + h) * p.in[2] + w]);
    y[i] = div ? T(sum / static_cast<A>(div)) : T(0);
  }
}

template <class T>
__global__ void avg_pool_backward_kernel(PoolArgs p, const T* gy, T* gx, int64_t total) {
  using A = PoolAcc<T>;
  const int64_t op = p.out[0] * p.out[1] * p.out[2];
  int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    PosI<int64_t> q = unflatten_i<int64_t>(i, p.in);
    int64_t lo[3], hi[3];
    for (int j = 0; j < 3; ++j) {
      // Windows [o*s - pad, o*s - pad + k) holding the position (avg pools have no dilation).
      lo[j] = clamp(ceil_div(q.o[j] + p.pad[j] - p.k[j] + 1, p.stride[j]), 0, p.out[j]);
      hi[j] = clamp(floor_div(q.o[j] + p.pad[j], p.stride[j]) + 1, 0, p.out[j]);
    }
    A sum = 0;
    const int64_t base = q.plane * op;
    for (int64_t od = lo[0]; od < hi[0]; ++od)
      for (int64_t oh = lo[1]; oh < hi[1]; ++oh)
        for (int64_t ow = lo[2]; ow < hi[2]; ++ow) {
          const int64_t o[3] = {od, oh, ow};
          const int64_t div = avg_divisor(p, o);
          if (!div) continue;
          sum += static_cast<A>(gy[base + (od * p.out[1] + oh) * p.out[2] + ow]) / static_cast<A>(div);
        }
    gx[i] = T(sum);
  }
}

template <class T, bool Sum>
__global__ void scan_kernel(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  using A =
      std::conditional_t<std::is_integral_v<T>, int64_t, std::conditional_t<is_reduced_float_v<T>, float, double>>;
  const int64_t lines = outer * inner;
  int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t l = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; l < lines; l += step) {
    const int64_t base = (l / inner) * n * inner + l % inner;
    A acc = Sum ? A(0) : A(1);
    for (int64_t k = 0; k < n; ++k) {
      A v = static_cast<A>(x[base + k * inner]);
      if constexpr (std::is_integral_v<A>) {  // wrapping, as the CPU's int64 scans
        auto u = static_cast<unsigned long long>(acc), w = static_cast<unsigned long long>(v);
        acc = static_cast<A>(Sum ? u + w : u * w);
      } else {
        acc = Sum ? acc + v : acc * v;
      }
      y[base + k * inner] = T(acc);
    }
  }
}

template <class T>
__global__ void im2col_kernel(FoldArgs f, const T* x, T* cols, int64_t total) {
  const int64_t L = f.oh * f.ow, rows = f.C * f.kh * f.kw;
  int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const int64_t l = i % L, row = (i / L) % rows, n = i / (L * rows);
    const int64_t kw = row % f.kw, kh = (row / f.kw) % f.kh, c = row / (f.kw * f.kh);
    const int64_t h = (l / f.ow) * f.sh - f.ph + kh * f.dh, w = (l % f.ow) * f.sw - f.pw + kw * f.dw;
    cols[i] = h >= 0 && h < f.H && w >= 0 && w < f.W ? x[((n * f.C + c) * f.H + h) * f.W + w] : T(0.0f);
  }
}

template <class T>
__global__ void col2im_kernel(FoldArgs f, const T* cols, T* image, int64_t total) {
  using A = PoolAcc<T>;
  const int64_t L = f.oh * f.ow, rows = f.C * f.kh * f.kw;
  int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const int64_t w = i % f.W, h = (i / f.W) % f.H, c = (i / (f.W * f.H)) % f.C, n = i / (f.W * f.H * f.C);
    A sum = 0;
    for (int64_t kh = 0; kh < f.kh; ++kh) {
      const int64_t hh = h + f.ph - kh * f.dh;
      if (hh < 0 || hh % f.sh != 0 || hh / f.sh >= f.oh) continue;
      for (int64_t kw = 0; kw < f.kw; ++kw) {
        const int64_t ww = w + f.pw - kw * f.dw;
        if (ww < 0 || ww % f.sw != 0 || ww / f.sw >= f.ow) continue;
        const int64_t row = (c * f.kh + kh) * f.kw + kw;
        sum += static_cast<A>(cols[(n * rows + row) * L + (hh / f.sh) * f.ow + ww / f.sw]);
      }
    }
    image[i] = T(sum);
  }
}

// Long contiguous lines (inner == 1), few of them: one block per line, a block-wide scan per
// chunk of kScanBlock elements plus the carry from the chunks before (the same accumulator types;
// for floats the order of additions differs from the CPU's, within its rounding).
constexpr int kScanBlock = 512;

template <class A, bool Sum>
struct ScanOp {
  __device__ A operator()(A a, A b) const {
    if constexpr (std::is_integral_v<A>) {
      auto u = static_cast<unsigned long long>(a), w = static_cast<unsigned long long>(b);
      return static_cast<A>(Sum ? u + w : u * w);
    } else {
      return Sum ? a + b : a * b;
    }
  }
};

template <class T, bool Sum>
__global__ void __launch_bounds__(kScanBlock) scan_block_kernel(const T* x, T* y, int64_t n) {
  using A =
      std::conditional_t<std::is_integral_v<T>, int64_t, std::conditional_t<is_reduced_float_v<T>, float, double>>;
  using BlockScan = cub::BlockScan<A, kScanBlock>;
  __shared__ typename BlockScan::TempStorage temp;
  __shared__ A carry;
  const ScanOp<A, Sum> op;
  const T* xl = x + static_cast<int64_t>(blockIdx.x) * n;
  T* yl = y + static_cast<int64_t>(blockIdx.x) * n;
  if (threadIdx.x == 0) carry = Sum ? A(0) : A(1);
  __syncthreads();
  for (int64_t base = 0; base < n; base += kScanBlock) {
    const int64_t i = base + threadIdx.x;
    A v = i < n ? static_cast<A>(xl[i]) : (Sum ? A(0) : A(1));
    A r;
    BlockScan(temp).InclusiveScan(v, r, op);
    r = op(carry, r);
    if (i < n) yl[i] = T(r);
    __syncthreads();  // every thread has read carry and temp
    if (threadIdx.x == kScanBlock - 1) carry = r;
    __syncthreads();
  }
}

template <class T>
__global__ void searchsorted_kernel(const T* seq, const T* values, const int64_t* sorter, void* out, bool out_int32,
                                    bool right, int64_t len, int64_t nv, int64_t vrow, bool one_row, int64_t* bad) {
  using K = std::conditional_t<is_reduced_float_v<T>, float, T>;
  int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < nv; i += step) {
    const int64_t row0 = one_row || vrow == 0 ? 0 : (i / vrow) * len;
    const K v = static_cast<K>(values[i]);
    int64_t lo = 0, hi = len;
    while (lo < hi) {
      const int64_t mid = lo + ((hi - lo) >> 1);
      int64_t at = mid;
      if (sorter) {
        at = sorter[row0 + mid];
        if (at < 0 || at >= len) {
          if (atomicCAS(reinterpret_cast<unsigned long long*>(bad), 0ull, 1ull) == 0ull) bad[1] = at;
          break;
        }
      }
      const K mv = static_cast<K>(seq[row0 + at]);
      if (right ? !(mv > v) : !(mv >= v))
        lo = mid + 1;
      else
        hi = mid;
    }
    if (out_int32)
      static_cast<int32_t*>(out)[i] = static_cast<int32_t>(lo);
    else
      static_cast<int64_t*>(out)[i] = lo;
  }
}

int64_t plane_size(const int64_t* d) { return d[0] * d[1] * d[2]; }

template <class F>
void visit_float(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::Float32:
      return f.template operator()<float>();
    case DType::Float64:
      return f.template operator()<double>();
    case DType::Float16:
      return f.template operator()<Half>();
    case DType::BFloat16:
      return f.template operator()<BFloat16>();
    default:
      KILN_FAIL(op, ": not supported yet on cuda for dtype ", t);
  }
}

}  // namespace

void launch_max_pool(const PoolArgs& p, DType t, const void* x, void* y, int64_t* indices, cudaStream_t s) {
  const int64_t total = p.planes * plane_size(p.out);
  if (total == 0) return;
  const int64_t in_total = p.planes * plane_size(p.in);
  visit_float(t, "max_pool", [&]<class T>() {
    if (total < kInt32Index && in_total < kInt32Index)
      max_pool_kernel<T, int32_t><<<grid_for(total), kThreads, 0, s>>>(
          PoolIdx<int32_t>(p), static_cast<const T*>(x), static_cast<T*>(y), indices, static_cast<int32_t>(total));
    else
      max_pool_kernel<T, int64_t><<<grid_for(total), kThreads, 0, s>>>(PoolIdx<int64_t>(p), static_cast<const T*>(x),
                                                                      static_cast<T*>(y), indices, total);
  });
  check_launch();
}

void launch_max_pool_backward(const PoolArgs& p, DType t, const void* grad_out, const int64_t* indices, void* grad_in,
                              cudaStream_t s) {
  const int64_t total = p.planes * plane_size(p.in);
  if (total == 0) return;
  const int64_t out_total = p.planes * plane_size(p.out);
  visit_float(t, "max_pool_backward", [&]<class T>() {
    if (total < kInt32Index && out_total < kInt32Index)
      max_pool_backward_kernel<T, int32_t><<<grid_for(total), kThreads, 0, s>>>(
          PoolIdx<int32_t>(p), static_cast<const T*>(grad_out), indices, static_cast<T*>(grad_in),
          static_cast<int32_t>(total));
    else
      max_pool_backward_kernel<T, int64_t><<<grid_for(total), kThreads, 0, s>>>(
          PoolIdx<int64_t>(p), static_cast<const T*>(grad_out), indices, static_cast<T*>(grad_in), total);
  });
  check_launch();
}

void launch_avg_pool(const PoolArgs& p, DType t, const void* x, void* y, cudaStream_t s) {
  const int64_t total = p.planes * plane_size(p.out);
  if (total == 0) return;
  auto run = [&]<class T>() {
    avg_pool_kernel<T><<<grid_for(total), kThreads, 0, s>>>(p, static_cast<const T*>(x), static_cast<T*>(y), total);
  };
  if (t == DType::Int64)
    run.template operator()<int64_t>();
  else
    visit_float(t, "avg_pool", run);
  check_launch();
}

void launch_avg_pool_backward(const PoolArgs& p, DType t, const void* grad_out, void* grad_in, cudaStream_t s) {
  const int64_t total = p.planes * plane_size(p.in);
  if (total == 0) return;
  visit_float(t, "avg_pool_backward", [&]<class T>() {
    avg_pool_backward_kernel<T>
        <<<grid_for(total), kThreads, 0, s>>>(p, static_cast<const T*>(grad_out), static_cast<T*>(grad_in), total);
  });
  check_launch();
}

void launch_scan(bool sum, DType t, const void* x, void* y, int64_t outer, int64_t n, int64_t inner, cudaStream_t s) {
  const int64_t lines = outer * inner;
  if (lines == 0 || n == 0) return;
  visit_dtype(t, [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      KILN_FAIL(sum ? "cumsum" : "cumprod", ": not implemented for output dtype Bool");
    } else {
      auto xp = static_cast<const T*>(x);
      auto yp = static_cast<T*>(y);
      if (inner == 1 && n >= 4 * kScanBlock && outer <= 65535) {
        if (sum)
          scan_block_kernel<T, true><<<static_cast<unsigned>(outer), kScanBlock, 0, s>>>(xp, yp, n);
        else
          scan_block_kernel<T, false><<<static_cast<unsigned>(outer), kScanBlock, 0, s>>>(xp, yp, n);
      } else if (sum)
        scan_kernel<T, true><<<grid_for(lines), kThreads, 0, s>>>(xp, yp, outer, n, inner);
      else
        scan_kernel<T, false><<<grid_for(lines), kThreads, 0, s>>>(xp, yp, outer, n, inner);
    }
  });
  check_launch();
}

void launch_im2col(const FoldArgs& f, DType t, const void* image, void* cols, cudaStream_t s) {
  const int64_t total = f.N * f.C * f.kh * f.kw * f.oh * f.ow;
  if (total == 0) return;
  visit_float(t, "im2col", [&]<class T>() {
    im2col_kernel<T>
        <<<grid_for(total), kThreads, 0, s>>>(f, static_cast<const T*>(image), static_cast<T*>(cols), total);
  });
  check_launch();
}

void launch_col2im(const FoldArgs& f, DType t, const void* cols, void* image, cudaStream_t s) {
  const int64_t total = f.N * f.C * f.H * f.W;
  if (total == 0) return;
  visit_float(t, "col2im", [&]<class T>() {
    col2im_kernel<T>
        <<<grid_for(total), kThreads, 0, s>>>(f, static_cast<const T*>(cols), static_cast<T*>(image), total);
  });
  check_launch();
}

void launch_searchsorted(DType t, const void* seq, const void* values, const int64_t* sorter, void* out, bool out_int32,
                         bool right, int64_t len, int64_t nv, int64_t vrow, bool one_row, int64_t* bad,
                         cudaStream_t s) {
  if (nv == 0) return;
  visit_dtype(t, [&]<class T>() {
    searchsorted_kernel<T><<<grid_for(nv), kThreads, 0, s>>>(static_cast<const T*>(seq), static_cast<const T*>(values),
                                                             sorter, out, out_int32, right, len, nv, vrow, one_row,
                                                             bad);
  });
  check_launch();
}

}  // namespace kiln::cuda
