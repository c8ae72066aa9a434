// The fused attention kernels (attention.h, Note [Flash attention]).
//
// Tensor-core kernels (float16/bfloat16, E == Ev a multiple of 16 up to 128), in the manner of
// FlashAttention-2 with WMMA tiles: a block of 4 warps takes 64 query rows (16 per warp) and walks
// the keys in tiles of 64 held in shared memory; scores, the online softmax's running max and sum,
// and the output accumulator stay in float. The backward recomputes the weights from the saved
// logsumexp: one kernel per key tile accumulates dK and dV over the query tiles, another per query
// tile accumulates dQ over the key tiles (no atomics, so results do not depend on timing).
//
// Plain kernels (every floating dtype and shape): one thread per output element, in the opmath
// type; exact and slow, they serve the shapes the tensor-core kernels do not take (the decomposition
// sends only tensor-core shapes here, so these run for direct calls and tests).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "backend/cuda/attention.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "core/dtype_dispatch.h"
#include "core/scalar_math.h"

namespace kiln::cuda {
namespace {

namespace wmma = nvcuda::wmma;

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

// ---- tensor-core kernels ----

constexpr int kTile = 64;  // query rows per block, keys per tile
constexpr int kWarps = 4;  // 16 rows (or keys) each
constexpr int kTcThreads = kWarps * 32;

template <class T>
__device__ inline T from_float(float x);
template <>
__device__ inline __half from_float<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// Rows row0 .. row0 + 63 of a dense [rows, D] array into a [64][D] shared tile, zeros past `rows`,
// in 16-byte vectors (D is a multiple of 16 and the arrays 16-byte aligned).
template <class T>
__device__ inline void load_tile(T* dst, const T* src, int64_t row0, int64_t rows, int D) {
  const int vecs = D / 8;
  for (int idx = threadIdx.x; idx < kTile * vecs; idx += blockDim.x) {
    int rr = idx / vecs, cv = idx % vecs;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (row0 + rr < rows) val = reinterpret_cast<const uint4*>(src + (row0 + rr) * D)[cv];
    reinterpret_cast<uint4*>(dst + rr * D)[cv] = val;
  }
}

using Acc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;
template <class T>
using RowA = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major>;
template <class T>
using RowB = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major>;
template <class T>
using ColB = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major>;

// out16x64 (float, ld 64) = A (16 x D rows of a [.][D] tile) times B^T where B is 64 rows of a
// [.][D] tile: the scores of 16 rows against 64 others.
template <class T>
__device__ inline void rows_times_rows_t(float* out, const T* a, const T* b, int D) {
  for (int cb = 0; cb < kTile / 16; ++cb) {
    Acc acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int kk = 0; kk < D / 16; ++kk) {
      RowA<T> fa;
      ColB<T> fb;
      wmma::load_matrix_sync(fa, a + kk * 16, D);
      wmma::load_matrix_sync(fb, b + cb * 16 * D + kk * 16, D);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(out + cb * 16, acc, kTile, wmma::mem_row_major);
  }
}

// acc16xD (float, ld D) += A (16 x 64, ld 64) times B (64 rows of a [.][D] tile).
template <class T>
__device__ inline void accumulate_times_tile(float* acc16, const T* a, const T* b, int D) {
  for (int cb = 0; cb < D / 16; ++cb) {
    Acc acc;
    wmma::load_matrix_sync(acc, acc16 + cb * 16, D, wmma::mem_row_major);
    for (int kk = 0; kk < kTile / 16; ++kk) {
      RowA<T> fa;
      RowB<T> fb;
      wmma::load_matrix_sync(fa, a + kk * 16, kTile);
      wmma::load_matrix_sync(fb, b + kk * 16 * D + cb * 16, D);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(acc16 + cb * 16, acc, D, wmma::mem_row_major);
  }
}

// Each lane owns half a row of a warp's 16 x 64 score tile: row lane / 2, columns from
// (lane % 2) * 32; and half of that row's D output columns.
struct LaneSlot {
  int r, h;
  __device__ LaneSlot() : r(static_cast<int>(threadIdx.x % 32) >> 1), h(static_cast<int>(threadIdx.x % 32) & 1) {}
};

// Bytes of shared memory of each kernel for head size D.
constexpr size_t fwd_smem(int D) {
  return 3 * kTile * D * 2 + kWarps * 16 * kTile * (4 + 2) + kWarps * 16 * D * 4;
}
constexpr size_t dq_smem(int D) {
  return 4 * kTile * D * 2 + kWarps * 16 * kTile * (4 + 4 + 2) + kWarps * 16 * D * 4;
}
constexpr size_t dkdv_smem(int D) {
  return 4 * kTile * D * 2 + 2 * kTile * 4 + kWarps * 16 * kTile * (4 + 4 + 2 + 2) + kWarps * 16 * D * 4 * 2;
}

template <class T>
__global__ void __launch_bounds__(kTcThreads) flash_fwd_tc(FlashShape f, const T* __restrict__ q,
                                                           const T* __restrict__ k, const T* __restrict__ v,
                                                           T* __restrict__ out, float* __restrict__ lse) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int D = static_cast<int>(f.E), warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  T* Qs = reinterpret_cast<T*>(smem);
  T* Ks = Qs + kTile * D;
  T* Vs = Ks + kTile * D;
  float* Sw = reinterpret_cast<float*>(Vs + kTile * D) + warp * 16 * kTile;
  T* Pw = reinterpret_cast<T*>(reinterpret_cast<float*>(Vs + kTile * D) + kWarps * 16 * kTile) + warp * 16 * kTile;
  float* Ow = reinterpret_cast<float*>(reinterpret_cast<T*>(reinterpret_cast<float*>(Vs + kTile * D) +
                                                            kWarps * 16 * kTile) +
                                       kWarps * 16 * kTile) +
              warp * 16 * D;
  const int64_t n = blockIdx.y, q0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const T* kn = k + n * f.S * D;
  const T* vn = v + n * f.S * D;
  load_tile(Qs, q + n * f.L * D, q0, f.L, D);
  for (int idx = lane; idx < 16 * D; idx += 32) Ow[idx] = 0.0f;
  const LaneSlot ls;
  const int64_t qi = q0 + warp * 16 + ls.r;
  const float scale = static_cast<float>(f.scale);
  float m = -INFINITY, l = 0.0f;
  const int64_t kv_end = f.causal ? (f.S < q0 + kTile ? f.S : q0 + kTile) : f.S;
  for (int64_t k0 = 0; k0 < kv_end; k0 += kTile) {
    __syncthreads();
    load_tile(Ks, kn, k0, f.S, D);
    load_tile(Vs, vn, k0, f.S, D);
    __syncthreads();
    rows_times_rows_t(Sw, Qs + warp * 16 * D, Ks, D);
    __syncwarp();
    float* srow = Sw + ls.r * kTile + ls.h * 32;
    float mx = -INFINITY;
    for (int c = 0; c < 32; ++c) {
      const int64_t kj = k0 + ls.h * 32 + c;
      const bool keep = kj < f.S && (!f.causal || kj <= qi);
      const float s = keep ? srow[c] * scale : -INFINITY;
      srow[c] = s;
      mx = fmaxf(mx, s);
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    const float m_new = fmaxf(m, mx);
    const float m_use = m_new == -INFINITY ? 0.0f : m_new;
    float sum = 0.0f;
    T* prow = Pw + ls.r * kTile + ls.h * 32;
    for (int c = 0; c < 32; ++c) {
      const float p = __expf(srow[c] - m_use);
      prow[c] = from_float<T>(p);
      sum += p;
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    const float alpha = __expf(m - m_use);
    l = l * alpha + sum;
    m = m_new;
    float* orow = Ow + ls.r * D + ls.h * (D / 2);
    for (int c = 0; c < D / 2; ++c) orow[c] *= alpha;
    __syncwarp();
    accumulate_times_tile(Ow, Pw, Vs, D);
    __syncwarp();
  }
  if (qi < f.L) {
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    const float* orow = Ow + ls.r * D + ls.h * (D / 2);
    T* o = out + (n * f.L + qi) * D + ls.h * (D / 2);
    for (int c = 0; c < D / 2; ++c) o[c] = from_float<T>(orow[c] * inv);
    if (ls.h == 0) lse[n * f.L + qi] = l > 0.0f ? m + logf(l) : -INFINITY;
  }
}

template <class T>
__global__ void __launch_bounds__(kTcThreads)
    flash_bwd_dq_tc(FlashShape f, const T* __restrict__ go, const T* __restrict__ q, const T* __restrict__ k,
                    const T* __restrict__ v, const float* __restrict__ lse, const float* __restrict__ delta,
                    T* __restrict__ dq) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int D = static_cast<int>(f.E), warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  T* Qs = reinterpret_cast<T*>(smem);
  T* dOs = Qs + kTile * D;
  T* Ks = dOs + kTile * D;
  T* Vs = Ks + kTile * D;
  float* fbase = reinterpret_cast<float*>(Vs + kTile * D);
  float* Sw = fbase + warp * 16 * kTile;
  float* dPw = fbase + kWarps * 16 * kTile + warp * 16 * kTile;
  T* tbase = reinterpret_cast<T*>(fbase + 2 * kWarps * 16 * kTile);
  T* dSw = tbase + warp * 16 * kTile;
  float* dQw = reinterpret_cast<float*>(tbase + kWarps * 16 * kTile) + warp * 16 * D;
  const int64_t n = blockIdx.y, q0 = static_cast<int64_t>(blockIdx.x) * kTile;
  load_tile(Qs, q + n * f.L * D, q0, f.L, D);
  load_tile(dOs, go + n * f.L * D, q0, f.L, D);
  for (int idx = lane; idx < 16 * D; idx += 32) dQw[idx] = 0.0f;
  const LaneSlot ls;
  const int64_t qi = q0 + warp * 16 + ls.r;
  const float lse_r = qi < f.L ? lse[n * f.L + qi] : INFINITY;
  const float d_r = qi < f.L ? delta[n * f.L + qi] : 0.0f;
  const float scale = static_cast<float>(f.scale);
  const int64_t kv_end = f.causal ? (f.S < q0 + kTile ? f.S : q0 + kTile) : f.S;
  for (int64_t k0 = 0; k0 < kv_end; k0 += kTile) {
    __syncthreads();
    load_tile(Ks, k + n * f.S * D, k0, f.S, D);
    load_tile(Vs, v + n * f.S * D, k0, f.S, D);
    __syncthreads();
    rows_times_rows_t(Sw, Qs + warp * 16 * D, Ks, D);
    rows_times_rows_t(dPw, dOs + warp * 16 * D, Vs, D);
    __syncwarp();
    const float* srow = Sw + ls.r * kTile + ls.h * 32;
    const float* dprow = dPw + ls.r * kTile + ls.h * 32;
    T* dsrow = dSw + ls.r * kTile + ls.h * 32;
    for (int c = 0; c < 32; ++c) {
      const int64_t kj = k0 + ls.h * 32 + c;
      const bool keep = kj < f.S && (!f.causal || kj <= qi);
      const float p = keep ? __expf(srow[c] * scale - lse_r) : 0.0f;
      dsrow[c] = from_float<T>(p * (dprow[c] - d_r));
    }
    __syncwarp();
    accumulate_times_tile(dQw, dSw, Ks, D);
    __syncwarp();
  }
  if (qi < f.L) {
    const float* row = dQw + ls.r * D + ls.h * (D / 2);
    T* o = dq + (n * f.L + qi) * D + ls.h * (D / 2);
    for (int c = 0; c < D / 2; ++c) o[c] = from_float<T>(row[c] * scale);
  }
}

template <class T>
__global__ void __launch_bounds__(kTcThreads)
    flash_bwd_dkdv_tc(FlashShape f, const T* __restrict__ go, const T* __restrict__ q, const T* __restrict__ k,
                      const T* __restrict__ v, const float* __restrict__ lse, const float* __restrict__ delta,
                      T* __restrict__ dk, T* __restrict__ dv) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int D = static_cast<int>(f.E), warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  T* Ks = reinterpret_cast<T*>(smem);
  T* Vs = Ks + kTile * D;
  T* Qs = Vs + kTile * D;
  T* dOs = Qs + kTile * D;
  float* lse_s = reinterpret_cast<float*>(dOs + kTile * D);
  float* d_s = lse_s + kTile;
  float* fbase = d_s + kTile;
  float* Sw = fbase + warp * 16 * kTile;
  float* dPw = fbase + kWarps * 16 * kTile + warp * 16 * kTile;
  T* tbase = reinterpret_cast<T*>(fbase + 2 * kWarps * 16 * kTile);
  T* Pw = tbase + warp * 16 * kTile;
  T* dSw = tbase + kWarps * 16 * kTile + warp * 16 * kTile;
  float* accs = reinterpret_cast<float*>(tbase + 2 * kWarps * 16 * kTile);
  float* dKw = accs + warp * 16 * D;
  float* dVw = accs + kWarps * 16 * D + warp * 16 * D;
  const int64_t n = blockIdx.y, j0 = static_cast<int64_t>(blockIdx.x) * kTile;
  load_tile(Ks, k + n * f.S * D, j0, f.S, D);
  load_tile(Vs, v + n * f.S * D, j0, f.S, D);
  for (int idx = lane; idx < 16 * D; idx += 32) dKw[idx] = dVw[idx] = 0.0f;
  const LaneSlot ls;
  const int64_t kj = j0 + warp * 16 + ls.r;
  const float scale = static_cast<float>(f.scale);
  // Causal: queries before the tile's first key see none of its keys.
  for (int64_t i0 = f.causal ? j0 : 0; i0 < f.L; i0 += kTile) {
    __syncthreads();
    load_tile(Qs, q + n * f.L * D, i0, f.L, D);
    load_tile(dOs, go + n * f.L * D, i0, f.L, D);
    for (int t = threadIdx.x; t < kTile; t += blockDim.x) {
      const bool in = i0 + t < f.L;
      lse_s[t] = in ? lse[n * f.L + i0 + t] : INFINITY;
      d_s[t] = in ? delta[n * f.L + i0 + t] : 0.0f;
    }
    __syncthreads();
    rows_times_rows_t(Sw, Ks + warp * 16 * D, Qs, D);    // S^T: 16 keys x 64 queries
    rows_times_rows_t(dPw, Vs + warp * 16 * D, dOs, D);  // dP^T
    __syncwarp();
    const float* srow = Sw + ls.r * kTile + ls.h * 32;
    const float* dprow = dPw + ls.r * kTile + ls.h * 32;
    T* prow = Pw + ls.r * kTile + ls.h * 32;
    T* dsrow = dSw + ls.r * kTile + ls.h * 32;
    for (int c = 0; c < 32; ++c) {
      const int col = ls.h * 32 + c;
      const int64_t qi = i0 + col;
      const bool keep = kj < f.S && qi < f.L && (!f.causal || kj <= qi);
      const float p = keep ? __expf(srow[c] * scale - lse_s[col]) : 0.0f;
      prow[c] = from_float<T>(p);
      dsrow[c] = from_float<T>(p * (dprow[c] - d_s[col]));
    }
    __syncwarp();
    accumulate_times_tile(dVw, Pw, dOs, D);
    accumulate_times_tile(dKw, dSw, Qs, D);
    __syncwarp();
  }
  if (kj < f.S) {
    const float* krow = dKw + ls.r * D + ls.h * (D / 2);
    const float* vrow = dVw + ls.r * D + ls.h * (D / 2);
    T* ok = dk + (n * f.S + kj) * D + ls.h * (D / 2);
    T* ov = dv + (n * f.S + kj) * D + ls.h * (D / 2);
    for (int c = 0; c < D / 2; ++c) {
      ok[c] = from_float<T>(krow[c] * scale);
      ov[c] = from_float<T>(vrow[c]);
    }
  }
}

// Runs f with the CUDA half type of t (float16 or bfloat16).
template <class F>
void visit_tc(DType t, F&& f) {
  if (t == DType::Float16)
    f.template operator()<__half>();
  else
    f.template operator()<__nv_bfloat16>();
}

template <class K>
void allow_smem(K kernel, size_t bytes) {
  KILN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
                  "cudaFuncSetAttribute (flash attention shared memory)");
}

unsigned tiles(int64_t n) { return static_cast<unsigned>((n + kTile - 1) / kTile); }

}  // namespace

bool flash_tensor_cores(DType t, const FlashShape& f) {
  return (t == DType::Float16 || t == DType::BFloat16) && f.E == f.Ev && f.E % 16 == 0 && f.E >= 16 && f.E <= 128 &&
         f.N <= 65535;
}

void launch_flash_forward(DType t, const FlashShape& f, const void* q, const void* k, const void* v, void* out,
                          void* lse, cudaStream_t s) {
  if (f.N * f.L == 0) return;
  if (flash_tensor_cores(t, f)) {
    const size_t bytes = fwd_smem(static_cast<int>(f.E));
    visit_tc(t, [&]<class T>() {
      allow_smem(flash_fwd_tc<T>, bytes);
      flash_fwd_tc<T><<<dim3(tiles(f.L), static_cast<unsigned>(f.N)), kTcThreads, bytes, s>>>(
          f, static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), static_cast<T*>(out),
          static_cast<float*>(lse));
    });
    check_launch();
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
  const bool tc = flash_tensor_cores(t, f);
  visit_floating(t, "_scaled_dot_product_flash_attention_backward", [&]<class T>() {
    using C = math::opmath_t<T>;
    const T *gp = static_cast<const T*>(grad_out), *qp = static_cast<const T*>(q), *kp = static_cast<const T*>(k),
            *vp = static_cast<const T*>(v), *op = static_cast<const T*>(out);
    const C* lp = static_cast<const C*>(lse);
    C* dp = static_cast<C*>(scratch);
    if (f.N * f.L > 0)
      row_delta<T, C><<<blocks_for(f.N * f.L), kThreads, 0, s>>>(f, gp, op, static_cast<const C*>(grad_lse), dp);
    if (tc) return;
    if (f.N * f.L * f.E > 0)
      plain_dq<T, C><<<blocks_for(f.N * f.L * f.E), kThreads, 0, s>>>(f, gp, qp, kp, vp, lp, dp,
                                                                      static_cast<T*>(grad_q));
    const int64_t nkv = f.N * f.S * (f.E + f.Ev);
    if (nkv > 0)
      plain_dkdv<T, C><<<blocks_for(nkv), kThreads, 0, s>>>(f, gp, qp, kp, vp, lp, dp, static_cast<T*>(grad_k),
                                                            static_cast<T*>(grad_v));
  });
  check_launch();
  if (!tc) return;
  const int D = static_cast<int>(f.E);
  visit_tc(t, [&]<class T>() {
    const T *gp = static_cast<const T*>(grad_out), *qp = static_cast<const T*>(q), *kp = static_cast<const T*>(k),
            *vp = static_cast<const T*>(v);
    const float *lp = static_cast<const float*>(lse), *dp = static_cast<const float*>(scratch);
    if (f.N * f.L > 0) {
      allow_smem(flash_bwd_dq_tc<T>, dq_smem(D));
      flash_bwd_dq_tc<T><<<dim3(tiles(f.L), static_cast<unsigned>(f.N)), kTcThreads, dq_smem(D), s>>>(
          f, gp, qp, kp, vp, lp, dp, static_cast<T*>(grad_q));
    }
    if (f.N * f.S > 0) {
      allow_smem(flash_bwd_dkdv_tc<T>, dkdv_smem(D));
      flash_bwd_dkdv_tc<T><<<dim3(tiles(f.S), static_cast<unsigned>(f.N)), kTcThreads, dkdv_smem(D), s>>>(
          f, gp, qp, kp, vp, lp, dp, static_cast<T*>(grad_k), static_cast<T*>(grad_v));
    }
  });
  check_launch();
}

}  // namespace kiln::cuda
