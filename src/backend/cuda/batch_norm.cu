// batch_norm's CUDA kernels (batch_norm.h), in place of the decomposition's ~20 launches:
// training takes the per-channel statistics in one read of x (Welford partials of a few blocks
// per channel, then a thread per channel combines them, finishes mean / rstd and updates the
// running statistics), then one elementwise pass normalises. _batch_norm_backward likewise takes
// x's and g's per-channel moments in one read of both, then writes grad_x in a second.
#include <cstdint>

#include "backend/cuda/batch_norm.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "core/dtype_dispatch.h"
#include "core/scalar_math.h"

namespace kiln::cuda {
namespace {

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kStatThreads = 256;
constexpr int64_t kMinPerSplit = 4096;  // values per statistics block, at least (when split)
constexpr int64_t kTargetBlocks = 528;  // 4 per SM of an H100
constexpr int64_t kMaxSplits = 1024;

// Count, mean and sum of squared deviations of the values seen (Welford; Chan et al. to merge).
template <class C>
struct Welford {
  C mean, m2, n;
};

template <class C>
__device__ inline Welford<C> welford_merge(Welford<C> a, Welford<C> b) {
  const C n = a.n + b.n;
  if (n == C(0)) return a;
  const C d = b.mean - a.mean, fb = b.n / n;
  return {a.mean + d * fb, a.m2 + b.m2 + d * d * a.n * fb, n};
}

template <class C>
__device__ inline Welford<C> shfl_down(Welford<C> v, int off) {
  return {__shfl_down_sync(kFullMask, v.mean, off), __shfl_down_sync(kFullMask, v.m2, off),
          __shfl_down_sync(kFullMask, v.n, off)};
}

// The statistics of the backward (Note [Fused batch_norm backward]): count, means of x and g,
// x's sum of squared deviations and the co-moment sum (x - mean x)(g - mean g), merged as
// Welford's (the co-moment's online form is Welford's with one factor from each variable).
template <class C>
struct CoMoments {
  C n, mx, m2, mg, cxg;
};

template <class C>
__device__ inline CoMoments<C> welford_merge(CoMoments<C> a, CoMoments<C> b) {
  const C n = a.n + b.n;
  if (n == C(0)) return a;
  const C dx = b.mx - a.mx, dg = b.mg - a.mg, fb = b.n / n;
  return {n, a.mx + dx * fb, a.m2 + b.m2 + dx * dx * a.n * fb, a.mg + dg * fb, a.cxg + b.cxg + dx * dg * a.n * fb};
}

template <class C>
__device__ inline CoMoments<C> shfl_down(CoMoments<C> v, int off) {
  return {__shfl_down_sync(kFullMask, v.n, off), __shfl_down_sync(kFullMask, v.mx, off),
          __shfl_down_sync(kFullMask, v.m2, off), __shfl_down_sync(kFullMask, v.mg, off),
          __shfl_down_sync(kFullMask, v.cxg, off)};
}

// Thread 0 gets the merge of every thread's v, in a fixed order (the result does not depend on
// timing). blockDim.x: a multiple of 32, at most 1024.
template <class W>
__device__ inline W block_merge(W v) {
  __shared__ W shared[kWarp];
  for (int off = kWarp / 2; off > 0; off >>= 1) v = welford_merge(v, shfl_down(v, off));
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    const int warps = static_cast<int>(blockDim.x) / kWarp;
    for (int w = 1; w < warps; ++w) v = welford_merge(v, shared[w]);
  }
  return v;
}

// A thread's walk over one channel's values j = first, first + step, ... (value j is element
// ((j / hw) * c + ch) * hw + j % hw): one division up front where hw >= step (a step then
// crosses at most one row), one per value otherwise.
template <class Index>
struct ChannelWalk {
  Index b, i, hw, step;
  bool incremental;
  __device__ ChannelWalk(Index first, Index hw_, Index step_) : hw(hw_), step(step_), incremental(hw_ >= step_) {
    b = first / hw;
    i = first - b * hw;
  }
  __device__ Index offset(Index c, Index ch) const { return (b * c + ch) * hw + i; }
  __device__ void next(Index j_next) {
    if (incremental) {
      i += step;
      if (i >= hw) {
        i -= hw;
        ++b;
      }
    } else {
      b = j_next / hw;
      i = j_next - b * hw;
    }
  }
};

// Block (channel ch = blockIdx.x, split = blockIdx.y) covers the channel's values
// [split * chunk, min((split + 1) * chunk, n * hw)), value j at x[((j / hw) * c + ch) * hw + j % hw].
template <class T, class Index>
__global__ void bn_partial_kernel(const T* x, Index c, Index hw, Index per_channel, Index chunk,
                                  Welford<math::opmath_t<T>>* part) {
  using C = math::opmath_t<T>;
  const Index ch = blockIdx.x, split = blockIdx.y;
  const Index begin = split * chunk;
  // (unsigned Index: no subtraction below zero; a split past the end is empty)
  const Index end = begin >= per_channel ? begin : (per_channel - begin < chunk ? per_channel : begin + chunk);
  Welford<C> w{C(0), C(0), C(0)};
  ChannelWalk<Index> p(begin + threadIdx.x, hw, blockDim.x);
  for (Index j = begin + threadIdx.x; j < end; j += blockDim.x) {
    const C v = static_cast<C>(x[p.offset(c, ch)]);
    p.next(j + blockDim.x);
    w.n += C(1);
    const C d = v - w.mean;
    w.mean += d / w.n;
    w.m2 += d * (v - w.mean);
  }
  w = block_merge(w);
  if (threadIdx.x == 0) part[static_cast<int64_t>(ch) * gridDim.y + split] = w;
}

// A thread per channel: the channel's partials merged in order, then the statistics.
template <class C>
__global__ void bn_finalize_kernel(const Welford<C>* part, int64_t splits, int64_t c, C count, C eps, C keep,
                                   C momentum, C unbias, C* running_mean, C* running_var, C* mean, C* rstd) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t ch = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; ch < c; ch += step) {
    Welford<C> w = part[ch * splits];
    for (int64_t k = 1; k < splits; ++k) w = welford_merge(w, part[ch * splits + k]);
    const C var = w.m2 / count;
    mean[ch] = w.mean;
    rstd[ch] = C(1) / ::sqrt(var + eps);
    if (running_mean) {
      running_mean[ch] = running_mean[ch] * keep + w.mean * momentum;
      running_var[ch] = running_var[ch] * keep + var * unbias * momentum;
    }
  }
}

template <class C>
__global__ void bn_eval_stats_kernel(const C* running_mean, const C* running_var, int64_t c, C eps, C* mean, C* rstd) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t ch = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; ch < c; ch += step) {
    mean[ch] = running_mean[ch];
    rstd[ch] = C(1) / ::sqrt(running_var[ch] + eps);
  }
}

// ---- per-element passes: f(e, ch) for every element e of dense [n, c, hw] (ch its channel):
// a block per row of hw values where rows are long (no division per element), else a
// grid-stride loop over all elements ----
constexpr int64_t kRowMin = 128;

template <class Index, class F>
__global__ void bn_rows_kernel(F f, Index rows, Index c, Index hw) {
  for (Index r = blockIdx.x; r < rows; r += gridDim.x) {
    const Index ch = r % c;
    for (Index i = threadIdx.x; i < hw; i += blockDim.x) f(r * hw + i, ch);
  }
}

template <class Index, class F>
__global__ void bn_flat_kernel(F f, Index total, Index c, Index hw) {
  const Index step = static_cast<Index>(blockDim.x) * gridDim.x;
  for (Index e = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += step) f(e, (e / hw) % c);
}

template <class Index, class F>
void launch_per_element(const F& f, int64_t n, int64_t c, int64_t hw, cudaStream_t s) {
  const int64_t rows = n * c;
  if (hw >= kRowMin)
    bn_rows_kernel<Index, F><<<static_cast<unsigned>(rows < 65536 ? rows : 65536), kThreads, 0, s>>>(
        f, static_cast<Index>(rows), static_cast<Index>(c), static_cast<Index>(hw));
  else
    bn_flat_kernel<Index, F><<<grid_for(rows * hw), kThreads, 0, s>>>(f, static_cast<Index>(rows * hw),
                                                                      static_cast<Index>(c), static_cast<Index>(hw));
  check_launch();
}

// The decomposition's order of operations: (x - mean) * rstd, then * weight, then + bias.
template <class T>
struct ApplyFn {
  using C = math::opmath_t<T>;
  const T* x;
  const C *mean, *rstd, *weight, *bias;
  T* y;
  template <class Index>
  __device__ void operator()(Index e, Index ch) const {
    C v = (static_cast<C>(x[e]) - mean[ch]) * rstd[ch];
    if (weight) v *= weight[ch];
    if (bias) v += bias[ch];
    y[e] = T(v);
  }
};

// ---- _batch_norm_backward ----

// As bn_partial_kernel, over x and g together.
template <class T, class Index>
__global__ void bn_grad_partial_kernel(const T* x, const T* g, Index c, Index hw, Index per_channel, Index chunk,
                                       CoMoments<math::opmath_t<T>>* part) {
  using C = math::opmath_t<T>;
  const Index ch = blockIdx.x, split = blockIdx.y;
  const Index begin = split * chunk;
  const Index end = begin >= per_channel ? begin : (per_channel - begin < chunk ? per_channel : begin + chunk);
  CoMoments<C> w{C(0), C(0), C(0), C(0), C(0)};
  ChannelWalk<Index> p(begin + threadIdx.x, hw, blockDim.x);
  for (Index j = begin + threadIdx.x; j < end; j += blockDim.x) {
    const Index e = p.offset(c, ch);
    p.next(j + blockDim.x);
    const C xv = static_cast<C>(x[e]), gv = static_cast<C>(g[e]);
    w.n += C(1);
    const C r = C(1) / w.n;
    const C dx = xv - w.mx, dg = gv - w.mg;
    w.mx += dx * r;
    w.m2 += dx * (xv - w.mx);
    w.mg += dg * r;
    w.cxg += (xv - w.mx) * dg;
  }
  w = block_merge(w);
  if (threadIdx.x == 0) part[static_cast<int64_t>(ch) * gridDim.y + split] = w;
}

// A thread per channel: grad_weight = sum g * xhat, grad_bias = sum g, and grad_x's
// coefficients coef[k * c + ch]: k = 0 the mean, 1 a = weight * rstd, 2 mean(g), 3 b = rstd *
// mean(g * xhat), so that grad_x = a * (g - mean(g) - (x - mean) * b) in training.
template <class C>
__global__ void bn_grad_finalize_kernel(const CoMoments<C>* part, int64_t splits, int64_t c, C count, bool training,
                                        const C* running_mean, const C* running_var, const C* weight, C eps,
                                        C* grad_weight, C* grad_bias, C* coef) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t ch = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; ch < c; ch += step) {
    CoMoments<C> w = part[ch * splits];
    for (int64_t k = 1; k < splits; ++k) w = welford_merge(w, part[ch * splits + k]);
    const C sg = w.mg * count;
    C mean, rstd, sgx;
    if (training) {
      mean = w.mx;
      rstd = C(1) / ::sqrt(w.m2 / count + eps);
      sgx = w.cxg * rstd;
    } else {
      // sum g (x - rm) = sum (g - mean g)(x - mean x) + (mean x - rm) sum g
      mean = running_mean[ch];
      rstd = C(1) / ::sqrt(running_var[ch] + eps);
      sgx = (w.cxg + (w.mx - mean) * sg) * rstd;
    }
    grad_weight[ch] = sgx;
    grad_bias[ch] = sg;
    coef[ch] = mean;
    coef[c + ch] = (weight ? weight[ch] : C(1)) * rstd;
    coef[2 * c + ch] = training ? w.mg : C(0);
    coef[3 * c + ch] = training ? rstd * (sgx / count) : C(0);
  }
}

template <class T>
struct GradInputFn {
  using C = math::opmath_t<T>;
  const T *x, *g;
  const C* coef;
  bool training;
  int64_t c;
  T* gx;
  template <class Index>
  __device__ void operator()(Index e, Index ch) const {
    const C gv = static_cast<C>(g[e]), a = coef[c + ch];
    gx[e] =
        training ? T(a * (gv - coef[2 * c + ch] - (static_cast<C>(x[e]) - coef[ch]) * coef[3 * c + ch])) : T(a * gv);
  }
};

// 32-bit indices where every element offset (and a grid stride past the end) fits.
bool fits_index32(int64_t numel) { return numel < (int64_t{1} << 31); }

unsigned channel_grid(int64_t c) {
  const int64_t blocks = (c + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65536 ? blocks : 65536);
}

}  // namespace

int64_t batch_norm_splits(int64_t c, int64_t per_channel) {
  int64_t want = (kTargetBlocks + c - 1) / (c > 0 ? c : 1);
  const int64_t most = (per_channel + kMinPerSplit - 1) / kMinPerSplit;
  if (want > most) want = most;
  if (want > kMaxSplits) want = kMaxSplits;
  return want < 1 ? 1 : want;
}

void launch_batch_norm_stats(DType t, const void* x, int64_t n, int64_t c, int64_t hw, int64_t splits, double eps,
                             double momentum, void* part, void* running_mean, void* running_var, void* mean, void* rstd,
                             cudaStream_t s) {
  const int64_t per_channel = n * hw;
  if (per_channel * c == 0) return;
  KILN_CHECK(splits >= 1 && splits <= kMaxSplits && c <= 0x7fffffff, "internal: batch_norm statistics of ", c,
             " channels in ", splits, " splits");
  const int64_t chunk = (per_channel + splits - 1) / splits;
  visit_floating(t, "batch_norm", [&]<class T>() {
    using C = math::opmath_t<T>;
    const T* xp = static_cast<const T*>(x);
    auto* pp = static_cast<Welford<C>*>(part);
    const dim3 grid(static_cast<unsigned>(c), static_cast<unsigned>(splits));
    if (fits_index32(per_channel * c))
      bn_partial_kernel<T, uint32_t>
          <<<grid, kStatThreads, 0, s>>>(xp, static_cast<uint32_t>(c), static_cast<uint32_t>(hw),
                                         static_cast<uint32_t>(per_channel), static_cast<uint32_t>(chunk), pp);
    else
      bn_partial_kernel<T, int64_t><<<grid, kStatThreads, 0, s>>>(xp, c, hw, per_channel, chunk, pp);
    check_launch();
    const double pc = static_cast<double>(per_channel);
    bn_finalize_kernel<C><<<channel_grid(c), kThreads, 0, s>>>(
        pp, splits, c, C(pc), C(eps), C(1.0 - momentum), C(momentum), C(pc / (pc - 1)), static_cast<C*>(running_mean),
        static_cast<C*>(running_var), static_cast<C*>(mean), static_cast<C*>(rstd));
    check_launch();
  });
}

void launch_batch_norm_eval_stats(DType t, const void* running_mean, const void* running_var, int64_t c, double eps,
                                  void* mean, void* rstd, cudaStream_t s) {
  if (c == 0) return;
  visit_floating(t, "batch_norm", [&]<class T>() {
    using C = math::opmath_t<T>;
    bn_eval_stats_kernel<C><<<channel_grid(c), kThreads, 0, s>>>(static_cast<const C*>(running_mean),
                                                                 static_cast<const C*>(running_var), c, C(eps),
                                                                 static_cast<C*>(mean), static_cast<C*>(rstd));
    check_launch();
  });
}

void launch_batch_norm_apply(DType t, const void* x, const void* mean, const void* rstd, const void* weight,
                             const void* bias, void* y, int64_t n, int64_t c, int64_t hw, cudaStream_t s) {
  const int64_t total = n * c * hw;
  if (total == 0) return;
  visit_floating(t, "batch_norm", [&]<class T>() {
    using C = math::opmath_t<T>;
    const T* xp = static_cast<const T*>(x);
    const C *mp = static_cast<const C*>(mean), *rp = static_cast<const C*>(rstd);
    const C *wp = static_cast<const C*>(weight), *bp = static_cast<const C*>(bias);
    const ApplyFn<T> f{xp, mp, rp, wp, bp, static_cast<T*>(y)};
    if (fits_index32(total))
      launch_per_element<uint32_t>(f, n, c, hw, s);
    else
      launch_per_element<int64_t>(f, n, c, hw, s);
  });
}

void launch_batch_norm_backward(DType t, const void* g, const void* x, const void* weight, const void* running_mean,
                                const void* running_var, bool training, double eps, int64_t n, int64_t c, int64_t hw,
                                int64_t splits, void* part, void* coef, void* grad_x, void* grad_weight,
                                void* grad_bias, cudaStream_t s) {
  const int64_t per_channel = n * hw, total = per_channel * c;
  if (total == 0) return;
  KILN_CHECK(splits >= 1 && splits <= kMaxSplits && c <= 0x7fffffff, "internal: batch_norm backward of ", c,
             " channels in ", splits, " splits");
  const int64_t chunk = (per_channel + splits - 1) / splits;
  visit_floating(t, "_batch_norm_backward", [&]<class T>() {
    using C = math::opmath_t<T>;
    const T *xp = static_cast<const T*>(x), *gp = static_cast<const T*>(g);
    auto* pp = static_cast<CoMoments<C>*>(part);
    C* cp = static_cast<C*>(coef);
    const dim3 grid(static_cast<unsigned>(c), static_cast<unsigned>(splits));
    const bool i32 = fits_index32(total);
    if (i32)
      bn_grad_partial_kernel<T, uint32_t>
          <<<grid, kStatThreads, 0, s>>>(xp, gp, static_cast<uint32_t>(c), static_cast<uint32_t>(hw),
                                         static_cast<uint32_t>(per_channel), static_cast<uint32_t>(chunk), pp);
    else
      bn_grad_partial_kernel<T, int64_t><<<grid, kStatThreads, 0, s>>>(xp, gp, c, hw, per_channel, chunk, pp);
    check_launch();
    bn_grad_finalize_kernel<C><<<channel_grid(c), kThreads, 0, s>>>(
        pp, splits, c, C(static_cast<double>(per_channel)), training, static_cast<const C*>(running_mean),
        static_cast<const C*>(running_var), static_cast<const C*>(weight), C(eps), static_cast<C*>(grad_weight),
        static_cast<C*>(grad_bias), cp);
    check_launch();
    const GradInputFn<T> f{xp, gp, cp, training, c, static_cast<T*>(grad_x)};
    if (i32)
      launch_per_element<uint32_t>(f, n, c, hw, s);
    else
      launch_per_element<int64_t>(f, n, c, hw, s);
  });
}

}  // namespace kiln::cuda
