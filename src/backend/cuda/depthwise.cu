// Depthwise 2-D convolution (groups = input channels, any channel multiplier), NCHW: cuDNN's
// grouped convolutions with one input channel per group are slow, so PyTorch runs its own
// kernels for these shapes (aten's DepthwiseConv2d.cu) and so does kiln. Half types accumulate
// in float32, float64 in float64; nothing uses atomics, so every result is deterministic.
#include <cstdint>
#include <type_traits>

#include "backend/cuda/depthwise.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "core/dtype_dispatch.h"
#include "core/half.h"

namespace kiln::cuda {
namespace {

template <class T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Below this many elements in every tensor, int32 indexing: the kernels divide per element and
// 64-bit division is emulated on the GPU (several times the cost). A grid-stride step past the
// end (at most 2^24) still fits.
constexpr int64_t kInt32Index = int64_t(1) << 30;

// DepthwiseArgs in the index type I (signed: window positions go below zero in the padding).
template <class I>
struct Dw {
  I N, C, mult, H, W, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
  explicit Dw(const DepthwiseArgs& a)
      : N(I(a.N)),
        C(I(a.C)),
        mult(I(a.mult)),
        H(I(a.H)),
        W(I(a.W)),
        kh(I(a.kh)),
        kw(I(a.kw)),
        sh(I(a.sh)),
        sw(I(a.sw)),
        ph(I(a.ph)),
        pw(I(a.pw)),
        dh(I(a.dh)),
        dw(I(a.dw)),
        oh(I(a.oh)),
        ow(I(a.ow)) {}
};

// KH, KW > 0 fix the window's size at compile time (the loops unroll); 0 takes a.kh, a.kw.
template <class T, class I, int KH, int KW>
__global__ void depthwise_forward_kernel(Dw<I> a, const T* __restrict__ x, const T* __restrict__ w,
                                         const T* __restrict__ bias, T* __restrict__ y, I total) {
  using A = Acc<T>;
  const I kh = KH > 0 ? I(KH) : a.kh, kw = KW > 0 ? I(KW) : a.kw;
  const I cout = a.C * a.mult;
  const I step = I(blockDim.x) * I(gridDim.x);
  for (I i = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); i < total; i += step) {
    const I ow = i % a.ow;
    I t = i / a.ow;
    const I oh = t % a.oh;
    t /= a.oh;
    const I oc = t % cout;
    const I n = t / cout;
    const T* xp = x + (n * a.C + oc / a.mult) * a.H * a.W;
    const T* wp = w + oc * kh * kw;
    A sum = bias ? A(bias[oc]) : A(0);
    const I h0 = oh * a.sh - a.ph, w0 = ow * a.sw - a.pw;
#pragma unroll
    for (I r = 0; r < kh; ++r) {
      const I ih = h0 + r * a.dh;
      if (ih < 0 || ih >= a.H) continue;
#pragma unroll
      for (I s = 0; s < kw; ++s) {
        const I iw = w0 + s * a.dw;
        if (iw >= 0 && iw < a.W) sum += A(xp[ih * a.W + iw]) * A(wp[r * kw + s]);
      }
    }
    y[i] = T(sum);
  }
}

// q / d when q is a multiple of d (the output position a tap reads from), else -1. D > 0 is d
// at compile time (a shift for 2, as PyTorch's kernel templated on the stride).
template <int D, class I>
__device__ inline I exact_div(I q, I d) {
  if constexpr (D == 1) {
    return q;
  } else if constexpr (D > 0) {
    return q % D == 0 ? q / D : I(-1);
  } else {
    const I o = q / d;
    return o * d == q ? o : I(-1);
  }
}

// grad_x[n, c, ih, iw] = the sum over the multiplier's output channels and the taps (r, s) whose
// output position (ih + ph - r * dh) / sh, (iw + pw - s * dw) / sw is whole and inside the output.
// STRIDE > 0: sh = sw = STRIDE (q >= 0 here, so q % 2 and q / 2 are a mask and a shift).
template <class T, class I, int KH, int KW, int STRIDE>
__global__ void depthwise_backward_input_kernel(Dw<I> a, const T* __restrict__ gy, const T* __restrict__ w,
                                                T* __restrict__ gx, I total) {
  using A = Acc<T>;
  const I kh = KH > 0 ? I(KH) : a.kh, kw = KW > 0 ? I(KW) : a.kw;
  const I cout = a.C * a.mult;
  const I step = I(blockDim.x) * I(gridDim.x);
  for (I i = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); i < total; i += step) {
    const I iw = i % a.W;
    I t = i / a.W;
    const I ih = t % a.H;
    t /= a.H;
    const I c = t % a.C;
    const I n = t / a.C;
    A sum = 0;
    for (I m = 0; m < a.mult; ++m) {
      const I oc = c * a.mult + m;
      const T* wp = w + oc * kh * kw;
      const T* gp = gy + (n * cout + oc) * a.oh * a.ow;
#pragma unroll
      for (I r = 0; r < kh; ++r) {
        const I hs = ih + a.ph - r * a.dh;
        if (hs < 0) break;  // it only falls as r grows
        const I oh = exact_div<STRIDE>(hs, a.sh);
        if (oh < 0 || oh >= a.oh) continue;
#pragma unroll
        for (I s = 0; s < kw; ++s) {
          const I ws = iw + a.pw - s * a.dw;
          if (ws < 0) break;
          const I ow = exact_div<STRIDE>(ws, a.sw);
          if (ow >= 0 && ow < a.ow) sum += A(gp[oh * a.ow + ow]) * A(wp[r * kw + s]);
        }
      }
    }
    gx[i] = T(sum);
  }
}

// The most threads of a weight element's block (a power of two: the tree reduction halves it).
constexpr int kWeightThreads = 1024;

// A block per weight element e = (oc, r, s): its threads stride over the batch and output
// positions in a fixed order, then a fixed tree in shared memory adds their partial sums. The
// block's size (a power of two) is a function of the shape only, so the order is too.
template <class T, class I>
__global__ void __launch_bounds__(kWeightThreads)
    depthwise_backward_weight_kernel(Dw<I> a, const T* __restrict__ gy, const T* __restrict__ x, T* __restrict__ gw,
                                     I weights) {
  using A = Acc<T>;
  __shared__ A part[kWeightThreads];
  const I plane = a.oh * a.ow, positions = a.N * plane, cout = a.C * a.mult;
  for (I e = I(blockIdx.x); e < weights; e += I(gridDim.x)) {
    const I s = e % a.kw;
    I t = e / a.kw;
    const I r = t % a.kh;
    const I oc = t / a.kh;
    const I c = oc / a.mult;
    const I hoff = r * a.dh - a.ph, woff = s * a.dw - a.pw;
    A sum = 0;
    for (I j = I(threadIdx.x); j < positions; j += I(blockDim.x)) {
      const I n = j / plane, p = j - n * plane;
      const I oh = p / a.ow, ow = p - oh * a.ow;
      const I ih = oh * a.sh + hoff, iw = ow * a.sw + woff;
      if (ih >= 0 && ih < a.H && iw >= 0 && iw < a.W)
        sum += A(gy[(n * cout + oc) * plane + p]) * A(x[((n * a.C + c) * a.H + ih) * a.W + iw]);
    }
    part[threadIdx.x] = sum;
    __syncthreads();
    for (int k = int(blockDim.x) / 2; k > 0; k >>= 1) {
      if (int(threadIdx.x) < k) part[threadIdx.x] += part[threadIdx.x + k];
      __syncthreads();
    }
    if (threadIdx.x == 0) gw[e] = T(part[0]);
    __syncthreads();  // part is rewritten for the next element
  }
}

// f<I>() with I = int32_t when every tensor of the convolution has fewer than kInt32Index elements.
template <class F>
void visit_index(const DepthwiseArgs& a, F&& f) {
  const int64_t x = a.N * a.C * a.H * a.W, y = a.N * a.C * a.mult * a.oh * a.ow, w = a.C * a.mult * a.kh * a.kw;
  if (x < kInt32Index && y < kInt32Index && w < kInt32Index)
    f.template operator()<int32_t>();
  else
    f.template operator()<int64_t>();
}

// f<KH, KW>() for MobileNet's and EfficientNet's 3x3 and 5x5 windows, f<0, 0>() for the rest
// and for 64-bit indexing (rare: fewer instantiations to compile).
template <class I, class F>
void visit_window(const DepthwiseArgs& a, F&& f) {
  if (sizeof(I) == 8)
    f.template operator()<0, 0>();
  else if (a.kh == 3 && a.kw == 3)
    f.template operator()<3, 3>();
  else if (a.kh == 5 && a.kw == 5)
    f.template operator()<5, 5>();
  else
    f.template operator()<0, 0>();
}

}  // namespace

void launch_depthwise_forward(const DepthwiseArgs& a, DType t, const void* x, const void* w, const void* bias, void* y,
                              cudaStream_t s) {
  const int64_t total = a.N * a.C * a.mult * a.oh * a.ow;
  if (total == 0) return;
  visit_floating(t, "convolution", [&]<class T>() {
    visit_index(a, [&]<class I>() {
      visit_window<I>(a, [&]<int KH, int KW>() {
        depthwise_forward_kernel<T, I, KH, KW>
            <<<grid_for(total), kThreads, 0, s>>>(Dw<I>(a), static_cast<const T*>(x), static_cast<const T*>(w),
                                                  static_cast<const T*>(bias), static_cast<T*>(y), I(total));
      });
    });
  });
  check_launch();
}

void launch_depthwise_backward_input(const DepthwiseArgs& a, DType t, const void* grad_y, const void* w, void* grad_x,
                                     cudaStream_t s) {
  const int64_t total = a.N * a.C * a.H * a.W;
  if (total == 0) return;
  visit_floating(t, "convolution_backward", [&]<class T>() {
    visit_index(a, [&]<class I>() {
      visit_window<I>(a, [&]<int KH, int KW>() {
        auto run = [&]<int STRIDE>() {
          depthwise_backward_input_kernel<T, I, KH, KW, STRIDE><<<grid_for(total), kThreads, 0, s>>>(
              Dw<I>(a), static_cast<const T*>(grad_y), static_cast<const T*>(w), static_cast<T*>(grad_x), I(total));
        };
        // The stride divides per tap here: 1 and 2 (MobileNet's) at compile time.
        if constexpr (KH > 0) {
          if (a.sh == 1 && a.sw == 1) return run.template operator()<1>();
          if (a.sh == 2 && a.sw == 2) return run.template operator()<2>();
        }
        run.template operator()<0>();
      });
    });
  });
  check_launch();
}

void launch_depthwise_backward_weight(const DepthwiseArgs& a, DType t, const void* grad_y, const void* x, void* grad_w,
                                      cudaStream_t s) {
  const int64_t weights = a.C * a.mult * a.kh * a.kw;
  if (weights == 0) return;
  const unsigned blocks = static_cast<unsigned>(weights < 65536 ? weights : 65536);
  // Few weights with many positions each (MobileNet's first layers: 288 blocks over 800k
  // positions) need big blocks to fill the GPU; many small ones do better with small blocks.
  const int64_t positions = a.N * a.oh * a.ow;
  int threads = 64;
  while (threads < kWeightThreads && threads * int64_t(16) < positions) threads *= 2;
  visit_floating(t, "convolution_backward", [&]<class T>() {
    visit_index(a, [&]<class I>() {
      depthwise_backward_weight_kernel<T, I><<<blocks, threads, 0, s>>>(
          Dw<I>(a), static_cast<const T*>(grad_y), static_cast<const T*>(x), static_cast<T*>(grad_w), I(weights));
    });
  });
  check_launch();
}

}  // namespace kiln::cuda
