// The fused attention kernels (attention.h, Note [Flash attention]).
//
// Tensor-core kernels (float16/bfloat16 with E == Ev a multiple of 16 up to 128; float32 with E a
// multiple of 8 up to 64, in three TF32 products for float32 accuracy): flash_mma.cuh, in
// the manner of FlashAttention-2 on mma.sync: a block of 4 warps takes 64 query rows (16 per warp)
// and walks the keys in double-buffered tiles of 64; scores, the online softmax's running max and
// sum, the weights and the output accumulator stay in registers. The backward recomputes the weights
// from the saved logsumexp: one kernel per key tile accumulates dK and dV over the query tiles,
// another per query tile accumulates dQ over the key tiles (no atomics, so results do not depend on
// timing). bench/cuda/flash_attention.cu checks and times them alone (H100, gpt2's shape N=96,
// L=1024, E=64 causal, bfloat16: forward 0.114 ms, backward 0.367 ms; the WMMA kernels before them
// took 0.57 and 1.86 ms; float32: 0.334 and 1.17 ms, PyTorch's memory-efficient kernel 0.509 and
// 1.279). q, k, v, grad_out and out are read through their strides where the tensor-core kernels
// run (attention_ops.cpp), so the heads of one qkv projection need no copies.
//
// Plain kernels (every floating dtype and shape): one thread per output element, in the opmath
// type; exact and slow, they serve the shapes the tensor-core kernels do not take (the decomposition
// sends only tensor-core shapes here, so these run for direct calls and tests).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "backend/cuda/attention.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/cuda/flash_mma.cuh"
#include "core/dtype_dispatch.h"
#include "core/scalar_math.h"

namespace kiln::cuda {
namespace {

// ---- plain kernels ----

template <class C>
__device__ inline C neg_inf() {
  return -std::numeric_limits<C>::infinity();
}
__device__ inline bool keeps(const FlashShape& f, int64_t i, int64_t j) { return !f.causal || j <= i; }

template <class T, class C>
__device__ inline C dot(const T* a, const T* b, int64_t n) {
  C s = 0;
  for (int64_t e = 0; e < n; ++e) s += C(a[e]) * C(b[e]);
  return s;
}

inline unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

// logsumexp of row r's scaled scores (-inf without keys), one thread per row.
template <class T, class C>
__global__ void plain_lse(FlashShape f, const T* q, const T* k, C* lse) {
  int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= f.N * f.L) return;
  int64_t n = r / f.L, i = r % f.L;
  C m = neg_inf<C>(), l = 0;
  for (int64_t j = 0; j < f.S; ++j) {
    if (!keeps(f, i, j)) continue;
    C s = dot<T, C>(q + r * f.E, k + (n * f.S + j) * f.E, f.E) * C(f.scale);
    if (s > m) {
      l = l * exp(m - s) + C(1);
      m = s;
    } else {
      l += exp(s - m);
    }
  }
  lse[r] = l > 0 ? m + log(l) : neg_inf<C>();
}

// out[r, c] = sum_j exp(s_rj - lse_r) v[j, c], one thread per output element.
template <class T, class C>
__global__ void plain_out(FlashShape f, const T* q, const T* k, const T* v, const C* lse, T* out) {
  int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= f.N * f.L * f.Ev) return;
  int64_t r = idx / f.Ev, c = idx % f.Ev, n = r / f.L, i = r % f.L;
  C acc = 0;
  if (lse[r] != neg_inf<C>())
    for (int64_t j = 0; j < f.S; ++j) {
      if (!keeps(f, i, j)) continue;
      C p = exp(dot<T, C>(q + r * f.E, k + (n * f.S + j) * f.E, f.E) * C(f.scale) - lse[r]);
      acc += p * C(v[(n * f.S + j) * f.Ev + c]);
    }
  out[idx] = T(acc);
}

// D_r = sum_c dO[r, c] out[r, c] - grad_lse[r], one thread per row (both kernel families).
template <class T, class C>
__global__ void row_delta(FlashShape f, const T* go, const T* o, const C* glse, C* delta) {
  int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= f.N * f.L) return;
  C d = glse ? -glse[r] : C(0);
  for (int64_t c = 0; c < f.Ev; ++c) d += C(go[r * f.Ev + c]) * C(o[r * f.Ev + c]);
  delta[r] = d;
}

// The weight P and dS = P (dP - D) of query row r (batch n, position i) and key j.
template <class T, class C>
__device__ inline void weight_and_ds(const FlashShape& f, const T* go, const T* q, const T* k, const T* v,
                                     const C* lse, const C* delta, int64_t n, int64_t i, int64_t j, C& p, C& ds) {
  int64_t r = n * f.L + i;
  p = exp(dot<T, C>(q + r * f.E, k + (n * f.S + j) * f.E, f.E) * C(f.scale) - lse[r]);
  C dp = dot<T, C>(go + r * f.Ev, v + (n * f.S + j) * f.Ev, f.Ev);
  ds = p * (dp - delta[r]);
}

// dq[r, e] = scale sum_j dS_rj k[j, e].
template <class T, class C>
__global__ void plain_dq(FlashShape f, const T* go, const T* q, const T* k, const T* v, const C* lse, const C* delta,
                         T* dq) {
  int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= f.N * f.L * f.E) return;
  int64_t r = idx / f.E, e = idx % f.E, n = r / f.L, i = r % f.L;
  C acc = 0;
  if (lse[r] != neg_inf<C>())
    for (int64_t j = 0; j < f.S; ++j) {
      if (!keeps(f, i, j)) continue;
      C p, ds;
      weight_and_ds<T, C>(f, go, q, k, v, lse, delta, n, i, j, p, ds);
      acc += ds * C(k[(n * f.S + j) * f.E + e]);
    }
  dq[idx] = T(acc * C(f.scale));
}

// dk[j, e] = scale sum_i dS_ij q[i, e] and dv[j, c] = sum_i P_ij dO[i, c]: one thread per element
// of dk (idx < N S E) or of dv (the rest).
template <class T, class C>
__global__ void plain_dkdv(FlashShape f, const T* go, const T* q, const T* k, const T* v, const C* lse,
                           const C* delta, T* dk, T* dv) {
  int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nk = f.N * f.S * f.E, nv = f.N * f.S * f.Ev;
  if (idx >= nk + nv) return;
  const bool is_k = idx < nk;
  const int64_t w = is_k ? f.E : f.Ev, local = is_k ? idx : idx - nk;
  const int64_t row = local / w, c = local % w, n = row / f.S, j = row % f.S;
  C acc = 0;
  for (int64_t i = 0; i < f.L; ++i) {
    int64_t r = n * f.L + i;
    if (!keeps(f, i, j) || lse[r] == neg_inf<C>()) continue;
    C p, ds;
    weight_and_ds<T, C>(f, go, q, k, v, lse, delta, n, i, j, p, ds);
    acc += is_k ? ds * C(q[r * f.E + c]) : p * C(go[r * f.Ev + c]);
  }
  if (is_k)
    dk[local] = T(acc * C(f.scale));
  else
    dv[local] = T(acc);
}

// Runs f with the CUDA type of t (float16, bfloat16 or float32).
template <class F>
void visit_tc(DType t, F&& f) {
  if (t == DType::Float16)
    f.template operator()<__half>();
  else if (t == DType::BFloat16)
    f.template operator()<__nv_bfloat16>();
  else
    f.template operator()<float>();
}

flash::Problem problem(const FlashShape& f) {
  flash::Problem p = flash::Problem::dense(f.N, f.L, f.S, static_cast<int>(f.E), f.causal, static_cast<float>(f.scale));
  if (f.strided) {
    auto op = [](const FlashLayout& l) { return flash::Operand{l.batch, l.head, l.row}; };
    p.H = f.H;
    p.q = op(f.q), p.k = op(f.k), p.v = op(f.v), p.go = op(f.go), p.o = op(f.o);
  }
  return p;
}

}  // namespace

bool flash_tensor_cores(DType t, const FlashShape& f) {
  // Grids are (N, 64-row tiles): x takes any N below 2^31, y at most 65535 tiles.
  constexpr int64_t kMaxTiles = 65535;
  if (f.E != f.Ev || f.E < 8 || f.N > INT32_MAX || (f.L + flash::kRows - 1) / flash::kRows > kMaxTiles ||
      (f.S + flash::kRows - 1) / flash::kRows > kMaxTiles)
    return false;
  if (t == DType::Float32) return f.E % 8 == 0 && f.E <= 64;
  return (t == DType::Float16 || t == DType::BFloat16) && f.E % 16 == 0 && f.E <= 128;
}

void launch_flash_forward(DType t, const FlashShape& f, const void* q, const void* k, const void* v, void* out,
                          void* lse, cudaStream_t s) {
  if (f.N * f.L == 0) return;
  if (flash_tensor_cores(t, f)) {
    visit_tc(t, [&]<class T>() {
      KILN_CUDA_CHECK(flash::launch_forward<T>(problem(f), static_cast<const T*>(q), static_cast<const T*>(k),
                                               static_cast<const T*>(v), static_cast<T*>(out), static_cast<float*>(lse),
                                               s),
                      "flash attention forward");
    });
    return;
  }
  visit_floating(t, "_scaled_dot_product_flash_attention", [&]<class T>() {
    using C = math::opmath_t<T>;
    const T *qp = static_cast<const T*>(q), *kp = static_cast<const T*>(k), *vp = static_cast<const T*>(v);
    plain_lse<T, C><<<blocks_for(f.N * f.L), kThreads, 0, s>>>(f, qp, kp, static_cast<C*>(lse));
    if (f.Ev > 0)
      plain_out<T, C><<<blocks_for(f.N * f.L * f.Ev), kThreads, 0, s>>>(f, qp, kp, vp, static_cast<const C*>(lse),
                                                                        static_cast<T*>(out));
  });
  check_launch();
}

void launch_flash_backward(DType t, const FlashShape& f, const void* grad_out, const void* q, const void* k,
                           const void* v, const void* out, const void* lse, const void* grad_lse, void* grad_q,
                           void* grad_k, void* grad_v, void* scratch, cudaStream_t s) {
  if (flash_tensor_cores(t, f)) {
    visit_tc(t, [&]<class T>() {
      KILN_CUDA_CHECK(flash::launch_backward<T>(
                          problem(f), static_cast<const T*>(grad_out), static_cast<const T*>(q),
                          static_cast<const T*>(k), static_cast<const T*>(v), static_cast<const T*>(out),
                          static_cast<const float*>(lse), static_cast<const float*>(grad_lse),
                          static_cast<float*>(scratch), static_cast<T*>(grad_q), static_cast<T*>(grad_k),
                          static_cast<T*>(grad_v), s),
                      "flash attention backward");
    });
    return;
  }
  visit_floating(t, "_scaled_dot_product_flash_attention_backward", [&]<class T>() {
    using C = math::opmath_t<T>;
    const T *gp = static_cast<const T*>(grad_out), *qp = static_cast<const T*>(q), *kp = static_cast<const T*>(k),
            *vp = static_cast<const T*>(v), *op = static_cast<const T*>(out);
    const C* lp = static_cast<const C*>(lse);
    C* dp = static_cast<C*>(scratch);
    if (f.N * f.L > 0)
      row_delta<T, C><<<blocks_for(f.N * f.L), kThreads, 0, s>>>(f, gp, op, static_cast<const C*>(grad_lse), dp);
    if (f.N * f.L * f.E > 0)
      plain_dq<T, C><<<blocks_for(f.N * f.L * f.E), kThreads, 0, s>>>(f, gp, qp, kp, vp, lp, dp,
                                                                      static_cast<T*>(grad_q));
    const int64_t nkv = f.N * f.S * (f.E + f.Ev);
    if (nkv > 0)
      plain_dkdv<T, C><<<blocks_for(nkv), kThreads, 0, s>>>(f, gp, qp, kp, vp, lp, dp, static_cast<T*>(grad_k),
                                                            static_cast<T*>(grad_v));
  });
  check_launch();
}

}  // namespace kiln::cuda
