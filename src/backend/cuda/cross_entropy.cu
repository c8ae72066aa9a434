// The fused cross_entropy kernels (cross_entropy.h): a block per row (rows in a grid-stride
// loop), the row read once forward (online max and sum of exp) and once backward. The logits are
// read in their dtype T and everything else is in its opmath dtype C; only the logits' gradient
// is written in T (bf16 logits: no float32 copy of them or of their gradient).
#include <limits>
#include <type_traits>

#include "backend/cuda/cross_entropy.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "core/dtype_dispatch.h"
#include "core/scalar_math.h"

namespace kiln::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kMaxThreads = 512;

// A block's threads for rows of c classes: a warp for short rows, up to 512 for long ones.
int threads_for(int64_t c) {
  int64_t t = (c + kWarp - 1) / kWarp * kWarp;
  return static_cast<int>(t < kWarp ? kWarp : t > kMaxThreads ? kMaxThreads : t);
}
unsigned grid_for_rows(int64_t n) { return static_cast<unsigned>(n < 65536 ? (n < 1 ? 1 : n) : 65536); }

// The running max m and sum s of exp(x - m); -inf adds nothing, NaN and +inf make s NaN (as the
// CPU's max-then-sum: a row with NaN gives NaN).
template <class C>
struct MaxSum {
  C m, s, xsum;  // xsum: the weighted sum of the row, for label smoothing
};

template <class C>
__device__ inline MaxSum<C> combine(MaxSum<C> a, MaxSum<C> b) {
  const C nm = a.m < b.m ? b.m : a.m;
  if (nm == -std::numeric_limits<C>::infinity()) return {nm, a.s + b.s, a.xsum + b.xsum};
  return {nm, a.s * math::Exp{}(a.m - nm) + b.s * math::Exp{}(b.m - nm), a.xsum + b.xsum};
}

// Every thread gets the block's combination, the warps' partials combined in warp order (the
// same answer run to run).
template <class C>
__device__ inline MaxSum<C> block_reduce(MaxSum<C> v, MaxSum<C>* shared) {
  for (int off = kWarp / 2; off > 0; off >>= 1) {
    MaxSum<C> o{__shfl_xor_sync(0xffffffffu, v.m, off), __shfl_xor_sync(0xffffffffu, v.s, off),
                __shfl_xor_sync(0xffffffffu, v.xsum, off)};
    v = combine(v, o);
  }
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  __syncthreads();  // the previous row's reads of shared are done
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  MaxSum<C> r = shared[0];
  for (int w = 1; w < static_cast<int>(blockDim.x) / kWarp; ++w) r = combine(r, shared[w]);
  return r;
}

template <class T, bool Smooth>
__global__ void fused_ce_kernel(const T* x, const int64_t* target, const math::opmath_t<T>* weight,
                                const math::opmath_t<T>* wsum, int64_t n, int64_t c, int64_t ignore, double ls,
                                math::opmath_t<T>* loss, math::opmath_t<T>* tw, math::opmath_t<T>* lse, int64_t* bad) {
  using C = math::opmath_t<T>;
  __shared__ MaxSum<C> shared[kMaxThreads / kWarp];
  const C ninf = -std::numeric_limits<C>::infinity();
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    const T* xr = x + r * c;
    MaxSum<C> a{ninf, C(0), C(0)};
    for (int64_t k = threadIdx.x; k < c; k += blockDim.x) {
      const C v = static_cast<C>(xr[k]);
      if constexpr (Smooth) a.xsum += (weight ? weight[k] : C(1)) * v;
      if (v == ninf) continue;
      if (v > a.m) {  // one exp per element but where the max moves
        a.s = a.s * math::Exp{}(a.m - v) + C(1);
        a.m = v;
      } else {
        a.s += math::Exp{}(v - a.m);  // NaN (v or the max) makes the sum NaN
      }
    }
    a = block_reduce(a, shared);
    if (threadIdx.x != 0) continue;
    const C l = a.m + math::Log{}(a.s);
    lse[r] = l;
    const int64_t t = target[r];
    if (t == ignore) {
      loss[r] = C(0);
      tw[r] = C(0);
      continue;
    }
    if (t < 0 || t >= c) {
      if (atomicCAS(reinterpret_cast<unsigned long long*>(bad), 0ull, 1ull) == 0ull) bad[1] = t;
      loss[r] = std::numeric_limits<C>::quiet_NaN();
      tw[r] = C(0);
      continue;
    }
    const C wt = weight ? weight[t] : C(1);
    C v = wt * (l - static_cast<C>(xr[t]));
    if constexpr (Smooth) {
      const C W = wsum ? *wsum : static_cast<C>(c);
      v = C(1 - ls) * v + C(ls / static_cast<double>(c)) * (l * W - a.xsum);  // sum_c w_c (lse - x_c)
    }
    loss[r] = v;
    tw[r] = wt;
  }
}

template <class T>
__global__ void fused_ce_backward_kernel(const math::opmath_t<T>* g, const T* x, const int64_t* target,
                                         const math::opmath_t<T>* weight, const math::opmath_t<T>* wsum,
                                         const math::opmath_t<T>* lse, const math::opmath_t<T>* glse, int64_t n,
                                         int64_t c, int64_t ignore, double ls, T* gx, int64_t* bad) {
  using C = math::opmath_t<T>;
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    const int64_t t = target[r];
    const bool kept = t != ignore && t >= 0 && t < c;
    if (!kept && t != ignore && threadIdx.x == 0 &&
        atomicCAS(reinterpret_cast<unsigned long long*>(bad), 0ull, 1ull) == 0ull)
      bad[1] = t;  // the row's gradient is grad_lse p alone, as an ignored row's
    const C gr = g[r], l = lse[r], gl = glse ? glse[r] : C(0);
    const C wt = kept ? (weight ? weight[t] : C(1)) : C(0);
    const C k1 = gr * C(1 - ls) * wt, k2 = kept ? gr * C(ls / static_cast<double>(c)) : C(0);
    const C W = wsum ? *wsum : static_cast<C>(c);
    const T* xr = x + r * c;
    T* gxr = gx + r * c;
    for (int64_t k = threadIdx.x; k < c; k += blockDim.x) {
      const C p = math::Exp{}(static_cast<C>(xr[k]) - l);
      C d = k1 * (k == t ? p - C(1) : p) + gl * p;
      if (k2 != C(0)) d += k2 * (W * p - (weight ? weight[k] : C(1)));
      gxr[k] = T(d);
    }
  }
}

}  // namespace

void launch_fused_cross_entropy(DType t, const void* x, const int64_t* target, const void* weight, const void* wsum,
                                int64_t n, int64_t c, int64_t ignore_index, double label_smoothing, void* loss,
                                void* target_weight, void* lse, int64_t* bad, cudaStream_t s) {
  if (n == 0) return;
  visit_floating(t, "_fused_cross_entropy", [&]<class T>() {
    using C = math::opmath_t<T>;
    auto run = [&]<bool Smooth>() {
      fused_ce_kernel<T, Smooth><<<grid_for_rows(n), threads_for(c), 0, s>>>(
          static_cast<const T*>(x), target, static_cast<const C*>(weight), static_cast<const C*>(wsum), n, c,
          ignore_index, label_smoothing, static_cast<C*>(loss), static_cast<C*>(target_weight), static_cast<C*>(lse),
          bad);
    };
    if (label_smoothing > 0)
      run.template operator()<true>();
    else
      run.template operator()<false>();
  });
  check_launch();
}

void launch_fused_cross_entropy_backward(DType t, const void* grad_loss, const void* x, const int64_t* target,
                                         const void* weight, const void* wsum, const void* lse, const void* grad_lse,
                                         int64_t n, int64_t c, int64_t ignore_index, double label_smoothing,
                                         void* grad_x, int64_t* bad, cudaStream_t s) {
  if (n == 0) return;  // c == 0 still runs: every target but ignore_index is bad
  visit_floating(t, "_fused_cross_entropy_backward", [&]<class T>() {
    using C = math::opmath_t<T>;
    fused_ce_backward_kernel<T><<<grid_for_rows(n), threads_for(c), 0, s>>>(
        static_cast<const C*>(grad_loss), static_cast<const T*>(x), target, static_cast<const C*>(weight),
        static_cast<const C*>(wsum), static_cast<const C*>(lse), static_cast<const C*>(grad_lse), n, c, ignore_index,
        label_smoothing, static_cast<T*>(grad_x), bad);
  });
  check_launch();
}

}  // namespace kiln::cuda
