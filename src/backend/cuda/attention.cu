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
// Shared-memory row pitches, padded so that the 16 rows a WMMA load walks do not start in one
// bank; the per-element passes give a row's consecutive columns to consecutive lanes.
constexpr int ld_t(int D) { return D + 8; }  // 16-bit tiles [64][D]
constexpr int kLdS = kTile + 4;              // float score tiles [16][64]
constexpr int kLdP = kTile + 8;              // 16-bit weight tiles [16][64]
constexpr int ld_o(int D) { return D + 4; }  // float accumulators [16][D]
constexpr size_t tile_bytes(int D) { return size_t(kTile) * ld_t(D) * 2; }
constexpr size_t score_bytes() { return size_t(kWarps) * 16 * kLdS * 4; }
constexpr size_t weight_bytes() { return size_t(kWarps) * 16 * kLdP * 2; }
constexpr size_t acc_bytes(int D) { return size_t(kWarps) * 16 * ld_o(D) * 4; }
constexpr size_t fwd_smem(int D) { return 3 * tile_bytes(D) + score_bytes() + weight_bytes() + acc_bytes(D); }
constexpr size_t dq_smem(int D) { return 4 * tile_bytes(D) + 2 * score_bytes() + weight_bytes() + acc_bytes(D); }
constexpr size_t dkdv_smem(int D) {
  return 4 * tile_bytes(D) + 2 * kTile * 4 + 2 * score_bytes() + 2 * weight_bytes() + 2 * acc_bytes(D);
}

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

__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Carves a kernel's shared memory into regions, in order.
struct Carve {
  unsigned char* p;
  template <class X>
  __device__ X* take(size_t bytes) {
    X* r = reinterpret_cast<X*>(p);
    p += bytes;
    return r;
  }
};

// Rows row0 .. row0 + 63 of a dense [rows, D] array into a [64][ld_t(D)] shared tile, zeros past
// `rows`, in 16-byte vectors (D is a multiple of 16 and the arrays 16-byte aligned).
template <class T>
__device__ inline void load_tile(T* dst, const T* src, int64_t row0, int64_t rows, int D) {
  const int vecs = D / 8, ld = ld_t(D);
  for (int idx = threadIdx.x; idx < kTile * vecs; idx += blockDim.x) {
    int rr = idx / vecs, cv = idx % vecs;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (row0 + rr < rows) val = reinterpret_cast<const uint4*>(src + (row0 + rr) * D)[cv];
    reinterpret_cast<uint4*>(dst + rr * ld)[cv] = val;
  }
}

using Acc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;
template <class T>
using RowA = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major>;
template <class T>
using RowB = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major>;
template <class T>
using ColB = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major>;

// out [16][kLdS] (float) = the 16 rows at `a` times the transpose of the 64 rows of tile `b`
// (both pitch ld_t(D)): scores of 16 rows against 64 others.
template <class T>
__device__ inline void rows_times_rows_t(float* out, const T* a, const T* b, int D) {
  const int ld = ld_t(D);
  for (int cb = 0; cb < kTile / 16; ++cb) {
    Acc acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int kk = 0; kk < D / 16; ++kk) {
      RowA<T> fa;
      ColB<T> fb;
      wmma::load_matrix_sync(fa, a + kk * 16, ld);
      wmma::load_matrix_sync(fb, b + cb * 16 * ld + kk * 16, ld);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(out + cb * 16, acc, kLdS, wmma::mem_row_major);
  }
}

// acc16 [16][ld_o(D)] (float) += a [16][kLdP] (16-bit) times the 64 rows of tile `b`.
template <class T>
__device__ inline void accumulate_times_tile(float* acc16, const T* a, const T* b, int D) {
  const int ld = ld_t(D), lo = ld_o(D);
  for (int cb = 0; cb < D / 16; ++cb) {
    Acc acc;
    wmma::load_matrix_sync(acc, acc16 + cb * 16, lo, wmma::mem_row_major);
    for (int kk = 0; kk < kTile / 16; ++kk) {
      RowA<T> fa;
      RowB<T> fb;
      wmma::load_matrix_sync(fa, a + kk * 16, kLdP);
      wmma::load_matrix_sync(fb, b + kk * 16 * ld + cb * 16, ld);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(acc16 + cb * 16, acc, lo, wmma::mem_row_major);
  }
}

template <class T>
__global__ void __launch_bounds__(kTcThreads) flash_fwd_tc(FlashShape f, const T* __restrict__ q,
                                                           const T* __restrict__ k, const T* __restrict__ v,
                                                           T* __restrict__ out, float* __restrict__ lse) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int D = static_cast<int>(f.E), LT = ld_t(D), LO = ld_o(D);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  Carve cv{smem};
  T* Qs = cv.take<T>(tile_bytes(D));
  T* Ks = cv.take<T>(tile_bytes(D));
  T* Vs = cv.take<T>(tile_bytes(D));
  float* Sw = cv.take<float>(score_bytes()) + warp * 16 * kLdS;
  T* Pw = cv.take<T>(weight_bytes()) + warp * 16 * kLdP;
  float* Ow = cv.take<float>(acc_bytes(D)) + warp * 16 * LO;
  const int64_t n = blockIdx.y, q0 = static_cast<int64_t>(blockIdx.x) * kTile, row0 = q0 + warp * 16;
  load_tile(Qs, q + n * f.L * D, q0, f.L, D);
  for (int idx = lane; idx < 16 * LO; idx += 32) Ow[idx] = 0.0f;
  const float scale = static_cast<float>(f.scale);
  float m[16], l[16];
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }
  const int64_t kv_end = f.causal ? (f.S < q0 + kTile ? f.S : q0 + kTile) : f.S;
  for (int64_t k0 = 0; k0 < kv_end; k0 += kTile) {
    __syncthreads();
    load_tile(Ks, k + n * f.S * D, k0, f.S, D);
    load_tile(Vs, v + n * f.S * D, k0, f.S, D);
    __syncthreads();
    rows_times_rows_t(Sw, Qs + warp * 16 * LT, Ks, D);
    __syncwarp();
#pragma unroll
    for (int r = 0; r < 16; ++r) {
      const int64_t qi = row0 + r, kj0 = k0 + lane, kj1 = kj0 + 32;
      const float* srow = Sw + r * kLdS;
      const float s0 = kj0 < f.S && (!f.causal || kj0 <= qi) ? srow[lane] * scale : -INFINITY;
      const float s1 = kj1 < f.S && (!f.causal || kj1 <= qi) ? srow[lane + 32] * scale : -INFINITY;
      const float m_new = fmaxf(m[r], warp_max(fmaxf(s0, s1)));
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;
      const float p0 = __expf(s0 - m_use), p1 = __expf(s1 - m_use);
      Pw[r * kLdP + lane] = from_float<T>(p0);
      Pw[r * kLdP + lane + 32] = from_float<T>(p1);
      const float alpha = __expf(m[r] - m_use);
      l[r] = l[r] * alpha + warp_sum(p0 + p1);
      m[r] = m_new;
      for (int c = lane; c < D; c += 32) Ow[r * LO + c] *= alpha;
    }
    __syncwarp();
    accumulate_times_tile(Ow, Pw, Vs, D);
    __syncwarp();
  }
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    const int64_t qi = row0 + r;
    if (qi >= f.L) continue;
    const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
    T* o = out + (n * f.L + qi) * D;
    for (int c = lane; c < D; c += 32) o[c] = from_float<T>(Ow[r * LO + c] * inv);
    if (lane == 0) lse[n * f.L + qi] = l[r] > 0.0f ? m[r] + logf(l[r]) : -INFINITY;
  }
}

template <class T>
__global__ void __launch_bounds__(kTcThreads)
    flash_bwd_dq_tc(FlashShape f, const T* __restrict__ go, const T* __restrict__ q, const T* __restrict__ k,
                    const T* __restrict__ v, const float* __restrict__ lse, const float* __restrict__ delta,
                    T* __restrict__ dq) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int D = static_cast<int>(f.E), LT = ld_t(D), LO = ld_o(D);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  Carve cv{smem};
  T* Qs = cv.take<T>(tile_bytes(D));
  T* dOs = cv.take<T>(tile_bytes(D));
  T* Ks = cv.take<T>(tile_bytes(D));
  T* Vs = cv.take<T>(tile_bytes(D));
  float* Sw = cv.take<float>(score_bytes()) + warp * 16 * kLdS;
  float* dPw = cv.take<float>(score_bytes()) + warp * 16 * kLdS;
  T* dSw = cv.take<T>(weight_bytes()) + warp * 16 * kLdP;
  float* dQw = cv.take<float>(acc_bytes(D)) + warp * 16 * LO;
  const int64_t n = blockIdx.y, q0 = static_cast<int64_t>(blockIdx.x) * kTile, row0 = q0 + warp * 16;
  load_tile(Qs, q + n * f.L * D, q0, f.L, D);
  load_tile(dOs, go + n * f.L * D, q0, f.L, D);
  for (int idx = lane; idx < 16 * LO; idx += 32) dQw[idx] = 0.0f;
  float lse_r[16], d_r[16];
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    const int64_t qi = row0 + r;
    lse_r[r] = qi < f.L ? lse[n * f.L + qi] : INFINITY;  // rows past L: every weight 0
    d_r[r] = qi < f.L ? delta[n * f.L + qi] : 0.0f;
  }
  const float scale = static_cast<float>(f.scale);
  const int64_t kv_end = f.causal ? (f.S < q0 + kTile ? f.S : q0 + kTile) : f.S;
  for (int64_t k0 = 0; k0 < kv_end; k0 += kTile) {
    __syncthreads();
    load_tile(Ks, k + n * f.S * D, k0, f.S, D);
    load_tile(Vs, v + n * f.S * D, k0, f.S, D);
    __syncthreads();
    rows_times_rows_t(Sw, Qs + warp * 16 * LT, Ks, D);
    rows_times_rows_t(dPw, dOs + warp * 16 * LT, Vs, D);
    __syncwarp();
#pragma unroll
    for (int r = 0; r < 16; ++r) {
      const int64_t qi = row0 + r;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int col = lane + 32 * h;
        const int64_t kj = k0 + col;
        const bool keep = kj < f.S && (!f.causal || kj <= qi);
        const float p = keep ? __expf(Sw[r * kLdS + col] * scale - lse_r[r]) : 0.0f;
        dSw[r * kLdP + col] = from_float<T>(p * (dPw[r * kLdS + col] - d_r[r]));
      }
    }
    __syncwarp();
    accumulate_times_tile(dQw, dSw, Ks, D);
    __syncwarp();
  }
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    const int64_t qi = row0 + r;
    if (qi >= f.L) continue;
    T* o = dq + (n * f.L + qi) * D;
    for (int c = lane; c < D; c += 32) o[c] = from_float<T>(dQw[r * LO + c] * scale);
  }
}

template <class T>
__global__ void __launch_bounds__(kTcThreads)
    flash_bwd_dkdv_tc(FlashShape f, const T* __restrict__ go, const T* __restrict__ q, const T* __restrict__ k,
                      const T* __restrict__ v, const float* __restrict__ lse, const float* __restrict__ delta,
                      T* __restrict__ dk, T* __restrict__ dv) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int D = static_cast<int>(f.E), LT = ld_t(D), LO = ld_o(D);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  Carve cv{smem};
  T* Ks = cv.take<T>(tile_bytes(D));
  T* Vs = cv.take<T>(tile_bytes(D));
  T* Qs = cv.take<T>(tile_bytes(D));
  T* dOs = cv.take<T>(tile_bytes(D));
  float* lse_s = cv.take<float>(kTile * 4);
  float* d_s = cv.take<float>(kTile * 4);
  float* Sw = cv.take<float>(score_bytes()) + warp * 16 * kLdS;
  float* dPw = cv.take<float>(score_bytes()) + warp * 16 * kLdS;
  T* Pw = cv.take<T>(weight_bytes()) + warp * 16 * kLdP;
  T* dSw = cv.take<T>(weight_bytes()) + warp * 16 * kLdP;
  float* dKw = cv.take<float>(acc_bytes(D)) + warp * 16 * LO;
  float* dVw = cv.take<float>(acc_bytes(D)) + warp * 16 * LO;
  const int64_t n = blockIdx.y, j0 = static_cast<int64_t>(blockIdx.x) * kTile, key0 = j0 + warp * 16;
  load_tile(Ks, k + n * f.S * D, j0, f.S, D);
  load_tile(Vs, v + n * f.S * D, j0, f.S, D);
  for (int idx = lane; idx < 16 * LO; idx += 32) dKw[idx] = dVw[idx] = 0.0f;
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
    rows_times_rows_t(Sw, Ks + warp * 16 * LT, Qs, D);    // S^T: 16 keys x 64 queries
    rows_times_rows_t(dPw, Vs + warp * 16 * LT, dOs, D);  // dP^T
    __syncwarp();
#pragma unroll
    for (int r = 0; r < 16; ++r) {
      const int64_t kj = key0 + r;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int col = lane + 32 * h;
        const int64_t qi = i0 + col;
        const bool keep = kj < f.S && qi < f.L && (!f.causal || kj <= qi);
        const float p = keep ? __expf(Sw[r * kLdS + col] * scale - lse_s[col]) : 0.0f;
        Pw[r * kLdP + col] = from_float<T>(p);
        dSw[r * kLdP + col] = from_float<T>(p * (dPw[r * kLdS + col] - d_s[col]));
      }
    }
    __syncwarp();
    accumulate_times_tile(dVw, Pw, dOs, D);
    accumulate_times_tile(dKw, dSw, Qs, D);
    __syncwarp();
  }
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    const int64_t kj = key0 + r;
    if (kj >= f.S) continue;
    T* ok = dk + (n * f.S + kj) * D;
    T* ov = dv + (n * f.S + kj) * D;
    for (int c = lane; c < D; c += 32) {
      ok[c] = from_float<T>(dKw[r * LO + c] * scale);
      ov[c] = from_float<T>(dVw[r * LO + c]);
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
