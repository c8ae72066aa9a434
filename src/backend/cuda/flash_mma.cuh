// Tensor-core flash attention kernels (Note [Flash attention] in attention.cu), written on the PTX
// instructions themselves: mma.sync m16n8k16 with float accumulators for float16/bfloat16 (float32:
// three m16n8k8 TF32 products, below), ldmatrix from padded shared tiles, cp.async double buffering. Scores, weights and accumulators stay in
// registers (FlashAttention-2's arrangement): a warp owns 16 rows and the accumulator layout of one
// product is the operand layout of the next, so P never goes through memory.
//
// Only CUDA headers are included, so the standalone benchmark (bench/cuda/flash_attention.cu) builds
// the very kernels kiln runs with nvcc alone.
//
// Layouts: q [N, L, E], k [N, S, E], v [N, S, E] and grad_out, out [N, L, E] in T, each with its
// own strides (an `Operand`: E contiguous, batch entry n = b H + h at b batch + h head, rows `row`
// apart, every stride a multiple of 16 bytes), so the heads of a [B, L, H, E] projection are read
// where they are; the outputs (out, dq, dk, dv) are dense row-major; lse and delta [N, L] float
// (lse natural-log). D is the padded head dim, 64 or 128 (float32: 64): E <= D, E a
// multiple of 16 (float32: of 8); loops over E's steps are unrolled to D and guarded, so register
// arrays stay statically indexed.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cuda_runtime.h>

#include <cstdint>

namespace kiln::cuda::flash {

constexpr int kRows = 64;     // query rows (or keys) per block: 4 warps x 16
constexpr int kThreads = 128;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Row pitch of a shared tile in elements: 16 bytes of padding, so the 8 rows one ldmatrix reads
// fall in distinct bank groups; for float, whose [k][n] operands are read a value per lane at rows
// 2t and 2t + 1 and columns g, 4 floats make those 32 reads hit 32 banks as well.
template <class T, int D>
__host__ __device__ constexpr int pitch() {
  return sizeof(T) == 2 ? D + 8 : D + 4;
}
template <class T, int D>
__host__ __device__ constexpr int tile_elems() {
  return kRows * pitch<T, D>();
}

struct Operand {
  int64_t batch, head, row;  // in elements
};
struct Problem {
  int64_t N, L, S;
  int E;
  bool causal;
  float scale;  // softmax scale (natural units)
  int64_t H;    // batch entry n is (n / H, n % H) of the operands' two batch dims
  Operand q, k, v, go, o;
  // Every operand dense [N, rows, E].
  static Problem dense(int64_t N, int64_t L, int64_t S, int E, bool causal, float scale) {
    const Operand ql{L * E, 0, E}, kl{S * E, 0, E};
    return Problem{N, L, S, E, causal, scale, 1, ql, kl, kl, ql, ql};
  }
};
// Where batch entry n of operand `o` starts.
__device__ inline int64_t start(const Operand& o, int64_t H, int64_t n) { return (n / H) * o.batch + (n % H) * o.head; }

// ---- PTX wrappers ----

__device__ inline uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// 16 bytes global -> shared, zero-filled when !pred (the source is then not read).
__device__ inline void cp_async16(void* dst, const void* src, bool pred) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(pred ? 16 : 0));
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int Pending>
__device__ inline void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
}

__device__ inline void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// c += a b for a 16x16 A (row), a 16x8 B (col), float accumulators.
template <class T>
__device__ inline void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <>
__device__ inline void mma<__nv_bfloat16>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ inline void mma<__half>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats as a T pair in one register, the lower column in the low half.
template <class T>
__device__ inline uint32_t pack(float lo, float hi);
template <>
__device__ inline uint32_t pack<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}
template <>
__device__ inline uint32_t pack<__half>(float lo, float hi) {
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

__device__ inline float2 to_float2(const __nv_bfloat16* p) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
}
__device__ inline float2 to_float2(const __half* p) { return __half22float2(*reinterpret_cast<const __half2*>(p)); }
__device__ inline float2 to_float2(const float* p) { return *reinterpret_cast<const float2*>(p); }

// ---- fragments ----
// Lane l of a warp holds, of each 16x8 accumulator tile, rows g = l/4 and g + 8 and columns
// 2t, 2t + 1 (t = l % 4): c[0], c[1] on row g, c[2], c[3] on row g + 8.

// The A operand (16 rows x 16 of k) at `tile` (pitch P), rows r0.., k from k0.
template <int P, class T>
__device__ inline void load_a(uint32_t (&a)[4], const T* tile, int r0, int k0, int lane) {
  ldmatrix_x4(a, tile + (r0 + (lane & 15)) * P + k0 + (lane >> 4) * 8);
}
// B operands of two 8-wide n-tiles (n0.., n0 + 8..) for k0..k0+15 from a tile stored [n][k]
// (keys by head dim: the B of S = Q K^T): b[0], b[1] for the first n-tile, b[2], b[3] the second.
template <int P, class T>
__device__ inline void load_b_nk(uint32_t (&b)[4], const T* tile, int n0, int k0, int lane) {
  ldmatrix_x4(b, tile + (n0 + (lane & 7) + (lane >> 4) * 8) * P + k0 + ((lane >> 3) & 1) * 8);
}
// The same from a tile stored [k][n] (keys by head dim as the B of P V), transposed on the way.
template <int P, class T>
__device__ inline void load_b_kn(uint32_t (&b)[4], const T* tile, int k0, int n0, int lane) {
  ldmatrix_x4_trans(b, tile + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * P + n0 + (lane >> 4) * 8);
}
// The A operand for k-step kk made from accumulator tiles 2kk and 2kk + 1 (scores as weights).
template <class T>
__device__ inline void acc_to_a(uint32_t (&a)[4], const float (&c0)[4], const float (&c1)[4]) {
  a[0] = pack<T>(c0[0], c0[1]);
  a[1] = pack<T>(c0[2], c0[3]);
  a[2] = pack<T>(c1[0], c1[1]);
  a[3] = pack<T>(c1[2], c1[3]);
}

// Rows row0 .. row0 + 63 of a [rows, E] array (rows `ld` apart) into a [64][pitch] tile by
// cp.async, zeros past `rows`; columns past E are left alone (never read: every loop over E is
// guarded).
template <int D, class T>
__device__ inline void load_tile_async(T* tile, const T* src, int64_t ld, int64_t row0, int64_t rows, int E) {
  constexpr int kVec = 16 / sizeof(T);
  const int vecs = E / kVec;
  for (int idx = threadIdx.x; idx < kRows * vecs; idx += kThreads) {
    const int r = idx / vecs, c = (idx % vecs) * kVec;
    const bool in = row0 + r < rows;
    cp_async16(tile + r * pitch<T, D>() + c, src + (in ? (row0 + r) * ld + c : 0), in);
  }
}

__device__ inline float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ inline float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// ---- float32: three TF32 products per product (3xTF32) ----
// x = big + small with both TF32 (10-bit mantissas); a b ~ big_a big_b + big_a small_b + small_a
// big_b loses only small_a small_b, about 2^-22 of the product: float32-level accuracy on tensor
// cores (mma.sync m16n8k8), as CUTLASS's OpMultiplyAddFastF32, which PyTorch's float32 attention
// uses. A 16x8 TF32 A holds (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4); a B (k = t, n = g)
// and (t + 4, g).

//
// The split is two integer operations and a subtraction: big is x rounded to TF32 at half an ulp
// (add half the dropped range, clear the 13 low bits), small the exact remainder x - big, passed
// as it is: the tensor cores read only the 19 high bits of a TF32 operand, so small is truncated,
// an error of at most 2^-10 of small, itself at most 2^-11 of x. cvt.rna.tf32.f32 did the same
// with one conversion each, and conversions run at a quarter of the rate of the integer and float
// pipes: in the float32 kernels, which split every operand they read, they cost more than the
// products.
__device__ inline uint32_t round_tf32(float x) { return (__float_as_uint(x) + 0x1000u) & 0xffffe000u; }
template <int N>
struct Split {
  uint32_t big[N], small[N];
  __device__ explicit Split(const float (&x)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      big[i] = round_tf32(x[i]);
      small[i] = __float_as_uint(x[i] - __uint_as_float(big[i]));
    }
  }
};
__device__ inline void mma_tf32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// c += a b, the small terms first.
__device__ inline void mma3(float (&c)[4], const Split<4>& a, const Split<2>& b) {
  mma_tf32(c, a.small, b.big[0], b.big[1]);
  mma_tf32(c, a.big, b.small[0], b.small[1]);
  mma_tf32(c, a.big, b.big[0], b.big[1]);
}
__device__ inline float f(uint32_t bits) { return __uint_as_float(bits); }

template <int D>
__device__ inline void scores_f32(float (&s)[8][4], const float* a_tile, int a0, const float* b_tile, int E,
                                  int lane) {
  constexpr int P = pitch<float, D>();
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < D / 8; ++kk) {
    if (kk * 8 >= E) break;
    uint32_t r[4];  // an ldmatrix of 32-bit values: lane holds (row g, column t) of four 8x4 blocks
    ldmatrix_x4(r, a_tile + (a0 + (lane & 15)) * P + kk * 8 + (lane >> 4) * 4);
    const Split<4> a({f(r[0]), f(r[1]), f(r[2]), f(r[3])});
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      ldmatrix_x4(r, b_tile + (np * 16 + (lane & 7) + (lane >> 4) * 8) * P + kk * 8 + ((lane >> 3) & 1) * 4);
      mma3(s[2 * np], a, Split<2>({f(r[0]), f(r[1])}));
      mma3(s[2 * np + 1], a, Split<2>({f(r[2]), f(r[3])}));
    }
  }
}

// The weights' k index is permuted: the A slot t of key tile kk holds the thread's column 2t
// and slot t + 4 column 2t + 1 (the accumulator layout), and B is read with the same rows.
template <int D>
__device__ inline void weights_times_tile_f32(float (&acc)[D / 8][4], const float (&w)[8][4], const float* tile,
                                              int E, int lane) {
  constexpr int P = pitch<float, D>();
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    const Split<4> a({w[kk][0], w[kk][2], w[kk][1], w[kk][3]});
    const float* r0 = tile + (kk * 8 + 2 * t) * P + g;
#pragma unroll
    for (int nt = 0; nt < D / 8; ++nt) {
      if (nt * 8 >= E) break;
      mma3(acc[nt], a, Split<2>({r0[nt * 8], r0[P + nt * 8]}));
    }
  }
}

// Scores of the warp's 16 rows (A from `a_tile` rows a0..) against 64 columns of `b_tile`
// (stored [n][k]): s[nt] is the accumulator tile of columns 8 nt ..
template <int D, class T>
__device__ inline void scores_16(float (&s)[8][4], const T* a_tile, int a0, const T* b_tile, int E, int lane) {
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    if (kk * 16 >= E) break;
    uint32_t a[4];
    load_a<pitch<T, D>()>(a, a_tile, a0, kk * 16, lane);
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      uint32_t b[4];
      load_b_nk<pitch<T, D>()>(b, b_tile, np * 16, kk * 16, lane);
      mma<T>(s[2 * np], a, b[0], b[1]);
      mma<T>(s[2 * np + 1], a, b[2], b[3]);
    }
  }
}

// The warp's A fragments of a 16-row tile, loaded once where every key tile reuses them (the
// forward's Q): D / 16 k-steps of 4 registers.
template <int D, class T>
__device__ inline void load_a_rows(uint32_t (&a)[D / 16][4], const T* tile, int a0, int E, int lane) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    if (kk * 16 < E) load_a<pitch<T, D>()>(a[kk], tile, a0, kk * 16, lane);
}
// acc [16 x E] += w [16 x 64] (accumulator tiles, as weights) times `tile` [64][E] (stored [k][n]).
template <int D, class T>
__device__ inline void weights_times_tile_16(float (&acc)[D / 8][4], const float (&w)[8][4], const T* tile, int E,
                                             int lane) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    uint32_t a[4];
    acc_to_a<T>(a, w[2 * kk], w[2 * kk + 1]);
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      if (dp * 16 >= E) break;
      uint32_t b[4];
      load_b_kn<pitch<T, D>()>(b, tile, kk * 16, dp * 16, lane);
      mma<T>(acc[2 * dp], a, b[0], b[1]);
      mma<T>(acc[2 * dp + 1], a, b[2], b[3]);
    }
  }
}

template <int D, class T>
__device__ inline void scores(float (&s)[8][4], const T* a_tile, int a0, const T* b_tile, int E, int lane) {
  if constexpr (sizeof(T) == 4)
    scores_f32<D>(s, a_tile, a0, b_tile, E, lane);
  else
    scores_16<D, T>(s, a_tile, a0, b_tile, E, lane);
}
template <int D, class T>
__device__ inline void weights_times_tile(float (&acc)[D / 8][4], const float (&w)[8][4], const T* tile, int E,
                                          int lane) {
  if constexpr (sizeof(T) == 4)
    weights_times_tile_f32<D>(acc, w, tile, E, lane);
  else
    weights_times_tile_16<D, T>(acc, w, tile, E, lane);
}

// Writes the warp's 16 x E accumulator rows (times `mul`) to dst rows row0.. of a [rows, E] array.
template <int D, class T>
__device__ inline void store_rows(T* dst, const float (&acc)[D / 8][4], int64_t row0, int64_t rows, int E, float mul0,
                                  float mul1, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t r = row0 + g + 8 * h;
    if (r >= rows) continue;
    const float mul = h ? mul1 : mul0;
#pragma unroll
    for (int nt = 0; nt < D / 8; ++nt) {
      if (nt * 8 >= E) break;
      if constexpr (sizeof(T) == 4)
        *reinterpret_cast<float2*>(dst + r * E + nt * 8 + 2 * t) =
            make_float2(acc[nt][2 * h] * mul, acc[nt][2 * h + 1] * mul);
      else
        *reinterpret_cast<uint32_t*>(dst + r * E + nt * 8 + 2 * t) =
            pack<T>(acc[nt][2 * h] * mul, acc[nt][2 * h + 1] * mul);
    }
  }
}

template <int D>
__device__ inline void zero(float (&acc)[D / 8][4]) {
#pragma unroll
  for (int nt = 0; nt < D / 8; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
}

// Buffers per streamed tile: two (double buffering) where a block's shared memory still lets
// several blocks share an SM. float32 tiles are twice as large: with two buffers each backward
// block took 105 KB, two blocks an SM, 8 warps; with one (70 KB), three blocks hide each other's
// loads instead.
template <class T>
__host__ __device__ constexpr int stages() {
  return sizeof(T) == 4 ? 1 : 2;
}
template <class T>
__device__ inline int buffer(int j) {
  return stages<T>() == 2 ? (j & 1) : 0;
}

// Double buffering: starts tile j + 1 on its way into the other buffer (stage(j + 1, buffer)),
// then waits until tile j has arrived and every thread may read it. One buffer: loads tile j
// (tile 0 was started before the loop) and waits for it.
template <int Stages, class Stage>
__device__ inline void next_tile(int j, int tiles, const Stage& stage) {
  if constexpr (Stages == 1) {
    if (j > 0) {
      stage(j, 0);
      cp_async_commit();
    }
    cp_async_wait<0>();
  } else if (j + 1 < tiles) {
    stage(j + 1, (j & 1) ^ 1);
    cp_async_commit();
    cp_async_wait<1>();
  } else {
    cp_async_wait<0>();
  }
  __syncthreads();
}

// Grids are (N, tiles): batch entries on x (no 65535 limit), tiles on y, the slower index, so
// every batch entry's block of one tile starts before any block of the next. Under a causal mask
// the last query tiles see the most keys; they go first (a block per query tile takes its tile
// from the end), so the short blocks fill the tail of the grid instead of the long ones (the key
// tiles of dK/dV are longest first already).
__device__ inline int64_t query_tile() { return static_cast<int64_t>(gridDim.y - 1 - blockIdx.y); }

// ---- forward: a block per 64 M query rows of one batch entry; keys in double-buffered tiles ----
// Each warp owns M tiles of 16 query rows. With M = 2 (16-bit types, head dim 64, as
// FlashAttention-2's 128-row blocks) every key or value fragment read from shared memory feeds two
// products, halving the shared-memory traffic per product, and a warp has twice the independent
// products in flight; larger head dims keep M = 1 (the accumulators would not fit in registers).

template <class T, int D>
__host__ __device__ constexpr int forward_m() {
  return 1;  // 2 measured no faster on an H100 (gpt2: forward 0.144 ms either way) and slower for short rows
}
template <class T, int D>
__host__ __device__ constexpr int forward_rows() {
  return kRows * forward_m<T, D>();
}
template <class T, int D>
constexpr size_t forward_smem() {
  return size_t(forward_m<T, D>() + 2 * stages<T>()) * tile_elems<T, D>() * sizeof(T);  // Q, then K and V
}

// scores_16 for M row tiles sharing each key fragment.
template <int D, class T, int M>
__device__ inline void scores_16m(float (&s)[M][8][4], const uint32_t (&a)[M][D / 16][4], const T* b_tile, int E,
                                  int lane) {
#pragma unroll
  for (int mt = 0; mt < M; ++mt)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    if (kk * 16 >= E) break;
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      uint32_t b[4];
      load_b_nk<pitch<T, D>()>(b, b_tile, np * 16, kk * 16, lane);
#pragma unroll
      for (int mt = 0; mt < M; ++mt) {
        mma<T>(s[mt][2 * np], a[mt][kk], b[0], b[1]);
        mma<T>(s[mt][2 * np + 1], a[mt][kk], b[2], b[3]);
      }
    }
  }
}
// weights_times_tile_16 for M row tiles sharing each value fragment.
template <int D, class T, int M>
__device__ inline void weights_times_tile_16m(float (&acc)[M][D / 8][4], const float (&w)[M][8][4], const T* tile,
                                              int E, int lane) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    uint32_t a[M][4];
#pragma unroll
    for (int mt = 0; mt < M; ++mt) acc_to_a<T>(a[mt], w[mt][2 * kk], w[mt][2 * kk + 1]);
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      if (dp * 16 >= E) break;
      uint32_t b[4];
      load_b_kn<pitch<T, D>()>(b, tile, kk * 16, dp * 16, lane);
#pragma unroll
      for (int mt = 0; mt < M; ++mt) {
        mma<T>(acc[mt][2 * dp], a[mt], b[0], b[1]);
        mma<T>(acc[mt][2 * dp + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

template <class T, int D>
__global__ void __launch_bounds__(kThreads) forward(Problem p, const T* __restrict__ q, const T* __restrict__ k,
                                                    const T* __restrict__ v, T* __restrict__ out,
                                                    float* __restrict__ lse) {
  constexpr int M = forward_m<T, D>(), QR = forward_rows<T, D>();
  extern __shared__ __align__(16) unsigned char smem[];
  T* Qs = reinterpret_cast<T*>(smem);   // QR rows
  T* Ks = Qs + M * tile_elems<T, D>();  // [stages] tiles
  T* Vs = Ks + stages<T>() * tile_elems<T, D>();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, E = p.E;
  const int64_t n = blockIdx.x, q0 = query_tile() * QR, rw = q0 + warp * 16 * M;  // the warp's first row
  const T* kb = k + start(p.k, p.H, n);
  const T* vb = v + start(p.v, p.H, n);
  const int64_t kv_end = p.causal ? (p.S < q0 + QR ? p.S : q0 + QR) : p.S;
  const int tiles = static_cast<int>((kv_end + kRows - 1) / kRows);
#pragma unroll
  for (int mt = 0; mt < M; ++mt)
    load_tile_async<D, T>(Qs + mt * tile_elems<T, D>(), q + start(p.q, p.H, n), p.q.row, q0 + mt * kRows, p.L, E);
  // Key and value tile j into buffer b.
  auto stage = [&](int j, int b) {
    load_tile_async<D, T>(Ks + b * tile_elems<T, D>(), kb, p.k.row, j * int64_t(kRows), p.S, E);
    load_tile_async<D, T>(Vs + b * tile_elems<T, D>(), vb, p.v.row, j * int64_t(kRows), p.S, E);
  };
  if (tiles > 0) stage(0, 0);
  cp_async_commit();
  const float c = p.scale * kLog2e;  // scores in log2 units: exp2 is one instruction
  float o[M][D / 8][4];
#pragma unroll
  for (int mt = 0; mt < M; ++mt) zero<D>(o[mt]);
  float m[M][2], l[M][2];
#pragma unroll
  for (int mt = 0; mt < M; ++mt) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.0f;
  uint32_t qa[M][D / 16][4];  // 16-bit types: the warp's Q fragments, read from shared memory once
  for (int j = 0; j < tiles; ++j) {
    const int buf = buffer<T>(j);
    next_tile<stages<T>()>(j, tiles, stage);
    const T* Kt = Ks + buf * tile_elems<T, D>();
    const T* Vt = Vs + buf * tile_elems<T, D>();
    float s[M][8][4];
    if constexpr (sizeof(T) == 2) {
      if (j == 0)  // Q arrived with tile 0
#pragma unroll
        for (int mt = 0; mt < M; ++mt) load_a_rows<D, T>(qa[mt], Qs, warp * 16 * M + 16 * mt, E, lane);
      scores_16m<D, T, M>(s, qa, Kt, E, lane);
    } else {
      scores<D, T>(s[0], Qs, warp * 16, Kt, E, lane);
    }
    const int64_t k0 = int64_t(j) * kRows;
#pragma unroll
    for (int mt = 0; mt < M; ++mt) {
      const int64_t r0 = rw + 16 * mt;
      const bool edge = k0 + kRows > p.S || (p.causal && k0 + kRows - 1 > r0);
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int64_t kj = k0 + nt * 8 + 2 * t + (e & 1), qi = r0 + g + 8 * (e >> 1);
          const bool keep = !edge || (kj < p.S && (!p.causal || kj <= qi));
          s[mt][nt][e] = keep ? s[mt][nt][e] * c : -INFINITY;
        }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = m[mt][h];
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * h], s[mt][nt][2 * h + 1]));
        mx = quad_max(mx);
        const float use = mx == -INFINITY ? 0.0f : mx;
        const float alpha = exp2f(m[mt][h] - use);
        float sum = 0.0f;
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          s[mt][nt][2 * h] = exp2f(s[mt][nt][2 * h] - use);
          s[mt][nt][2 * h + 1] = exp2f(s[mt][nt][2 * h + 1] - use);
          sum += s[mt][nt][2 * h] + s[mt][nt][2 * h + 1];
        }
        l[mt][h] = l[mt][h] * alpha + sum;  // this thread's columns only; summed over the quad at the end
        m[mt][h] = mx;
#pragma unroll
        for (int nt = 0; nt < D / 8; ++nt) {
          o[mt][nt][2 * h] *= alpha;
          o[mt][nt][2 * h + 1] *= alpha;
        }
      }
    }
    if constexpr (sizeof(T) == 2)
      weights_times_tile_16m<D, T, M>(o, s, Vt, E, lane);
    else
      weights_times_tile<D, T>(o[0], s[0], Vt, E, lane);
    __syncthreads();  // every warp is done with this buffer before the next prefetch fills it
  }
#pragma unroll
  for (int mt = 0; mt < M; ++mt) {
    const int64_t r0 = rw + 16 * mt;
    float inv[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float lsum = quad_sum(l[mt][h]);
      inv[h] = lsum > 0.0f ? 1.0f / lsum : 0.0f;
      const int64_t qi = r0 + g + 8 * h;
      if (t == 0 && qi < p.L) lse[n * p.L + qi] = lsum > 0.0f ? m[mt][h] * kLn2 + logf(lsum) : -INFINITY;
    }
    store_rows<D, T>(out + n * p.L * E, o[mt], r0, p.L, E, inv[0], inv[1], lane);
  }
}

// ---- backward ----
// dS = P (dP - delta) with delta = rowsum(dO * O) - grad_lse (computed before, one per row).
// Two kernels without atomics, so results do not depend on timing: one per 64 keys accumulates dK
// and dV over the query tiles, one per 64 queries accumulates dQ over the key tiles.

template <class T, int D>
constexpr size_t dq_smem() {
  return size_t(2 + 2 * stages<T>()) * tile_elems<T, D>() * sizeof(T);  // Q, dO, then K and V
}

template <class T, int D>
__global__ void __launch_bounds__(kThreads)
    backward_dq(Problem p, const T* __restrict__ go, const T* __restrict__ q, const T* __restrict__ k,
                const T* __restrict__ v, const float* __restrict__ lse, const float* __restrict__ delta,
                T* __restrict__ dq) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* Qs = reinterpret_cast<T*>(smem);
  T* dOs = Qs + tile_elems<T, D>();
  T* Ks = dOs + tile_elems<T, D>();  // [stages]
  T* Vs = Ks + stages<T>() * tile_elems<T, D>();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, E = p.E;
  const int64_t n = blockIdx.x, q0 = query_tile() * kRows, r0 = q0 + warp * 16;
  const T* kb = k + start(p.k, p.H, n);
  const T* vb = v + start(p.v, p.H, n);
  const int64_t kv_end = p.causal ? (p.S < q0 + kRows ? p.S : q0 + kRows) : p.S;
  const int tiles = static_cast<int>((kv_end + kRows - 1) / kRows);
  load_tile_async<D, T>(Qs, q + start(p.q, p.H, n), p.q.row, q0, p.L, E);
  load_tile_async<D, T>(dOs, go + start(p.go, p.H, n), p.go.row, q0, p.L, E);
  // Key and value tile j into buffer b.
  auto stage = [&](int j, int b) {
    load_tile_async<D, T>(Ks + b * tile_elems<T, D>(), kb, p.k.row, j * int64_t(kRows), p.S, E);
    load_tile_async<D, T>(Vs + b * tile_elems<T, D>(), vb, p.v.row, j * int64_t(kRows), p.S, E);
  };
  if (tiles > 0) stage(0, 0);
  cp_async_commit();
  const float c = p.scale * kLog2e;
  float lse2[2], dl[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t qi = r0 + g + 8 * h;
    const float x = qi < p.L ? lse[n * p.L + qi] : INFINITY;
    lse2[h] = x == -INFINITY ? INFINITY : x * kLog2e;  // a row without keys (or past L): weights 0
    dl[h] = qi < p.L ? delta[n * p.L + qi] : 0.0f;
  }
  float acc[D / 8][4];
  zero<D>(acc);
  for (int j = 0; j < tiles; ++j) {
    const int buf = buffer<T>(j);
    next_tile<stages<T>()>(j, tiles, stage);
    const T* Kt = Ks + buf * tile_elems<T, D>();
    const T* Vt = Vs + buf * tile_elems<T, D>();
    float s[8][4], dp[8][4];
    scores<D, T>(s, Qs, warp * 16, Kt, E, lane);
    scores<D, T>(dp, dOs, warp * 16, Vt, E, lane);
    const int64_t k0 = int64_t(j) * kRows;
    const bool edge = k0 + kRows > p.S || (p.causal && k0 + kRows - 1 > r0);
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e >> 1;
        const int64_t kj = k0 + nt * 8 + 2 * t + (e & 1), qi = r0 + g + 8 * h;
        const bool keep = !edge || (kj < p.S && (!p.causal || kj <= qi));
        const float w = keep ? exp2f(s[nt][e] * c - lse2[h]) : 0.0f;
        s[nt][e] = w * (dp[nt][e] - dl[h]);  // dS
      }
    weights_times_tile<D, T>(acc, s, Kt, E, lane);
    __syncthreads();
  }
  store_rows<D, T>(dq + n * p.L * E, acc, r0, p.L, E, p.scale, p.scale, lane);
}

template <class T, int D>
constexpr size_t dkdv_smem() {
  // K, V, then Q, dO, lse and delta
  return size_t(2 + 2 * stages<T>()) * tile_elems<T, D>() * sizeof(T) + 2 * stages<T>() * kRows * sizeof(float);
}

template <class T, int D>
__global__ void __launch_bounds__(kThreads)
    backward_dkdv(Problem p, const T* __restrict__ go, const T* __restrict__ q, const T* __restrict__ k,
                  const T* __restrict__ v, const float* __restrict__ lse, const float* __restrict__ delta,
                  T* __restrict__ dk, T* __restrict__ dv) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* Ks = reinterpret_cast<T*>(smem);
  T* Vs = Ks + tile_elems<T, D>();
  T* Qs = Vs + tile_elems<T, D>();  // [stages]
  T* dOs = Qs + stages<T>() * tile_elems<T, D>();  // [stages]
  float* lse_s = reinterpret_cast<float*>(dOs + stages<T>() * tile_elems<T, D>());  // [stages][64], log2 units
  float* d_s = lse_s + stages<T>() * kRows;                                      // [stages][64]
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, E = p.E;
  const int64_t n = blockIdx.x, j0 = static_cast<int64_t>(blockIdx.y) * kRows, key0 = j0 + warp * 16;
  const T* qb = q + start(p.q, p.H, n);
  const T* gb = go + start(p.go, p.H, n);
  const float* lb = lse + n * p.L;
  const float* db = delta + n * p.L;
  // Causal: queries before the block's first key see none of its keys.
  const int64_t i_begin = p.causal ? j0 : 0;
  const int tiles = i_begin < p.L ? static_cast<int>((p.L - i_begin + kRows - 1) / kRows) : 0;
  auto stage = [&](int j, int buf) {
    const int64_t i0 = i_begin + int64_t(j) * kRows;
    load_tile_async<D, T>(Qs + buf * tile_elems<T, D>(), qb, p.q.row, i0, p.L, E);
    load_tile_async<D, T>(dOs + buf * tile_elems<T, D>(), gb, p.go.row, i0, p.L, E);
    for (int r = threadIdx.x; r < kRows; r += kThreads) {
      const bool in = i0 + r < p.L;
      const float x = in ? lb[i0 + r] : INFINITY;
      lse_s[buf * kRows + r] = x == -INFINITY ? INFINITY : x * kLog2e;
      d_s[buf * kRows + r] = in ? db[i0 + r] : 0.0f;
    }
  };
  load_tile_async<D, T>(Ks, k + start(p.k, p.H, n), p.k.row, j0, p.S, E);
  load_tile_async<D, T>(Vs, v + start(p.v, p.H, n), p.v.row, j0, p.S, E);
  if (tiles > 0) stage(0, 0);
  cp_async_commit();
  const float c = p.scale * kLog2e;
  float dkacc[D / 8][4], dvacc[D / 8][4];
  zero<D>(dkacc);
  zero<D>(dvacc);
  for (int j = 0; j < tiles; ++j) {
    const int buf = buffer<T>(j);
    next_tile<stages<T>()>(j, tiles, stage);
    const T* Qt = Qs + buf * tile_elems<T, D>();
    const T* dOt = dOs + buf * tile_elems<T, D>();
    const float* ls = lse_s + buf * kRows;
    const float* ds = d_s + buf * kRows;
    float s[8][4], dp[8][4];  // transposed: the warp's 16 keys by 64 queries
    scores<D, T>(s, Ks, warp * 16, Qt, E, lane);
    scores<D, T>(dp, Vs, warp * 16, dOt, E, lane);
    const int64_t i0 = i_begin + int64_t(j) * kRows;
    const bool edge = i0 + kRows > p.L || key0 + 16 > p.S || (p.causal && key0 + 15 > i0);
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = nt * 8 + 2 * t + (e & 1);
        const int64_t qi = i0 + col, kj = key0 + g + 8 * (e >> 1);
        const bool keep = !edge || (qi < p.L && kj < p.S && (!p.causal || kj <= qi));
        const float w = keep ? exp2f(s[nt][e] * c - ls[col]) : 0.0f;
        s[nt][e] = w;                         // P^T
        dp[nt][e] = w * (dp[nt][e] - ds[col]);  // dS^T
      }
    weights_times_tile<D, T>(dvacc, s, dOt, E, lane);
    weights_times_tile<D, T>(dkacc, dp, Qt, E, lane);
    __syncthreads();
  }
  store_rows<D, T>(dk + n * p.S * E, dkacc, key0, p.S, E, p.scale, p.scale, lane);
  store_rows<D, T>(dv + n * p.S * E, dvacc, key0, p.S, E, 1.0f, 1.0f, lane);
}

// delta[r] = sum_e dO[r, e] O[r, e] - grad_lse[r] (grad_lse may be null): a warp per row r = n L + i.
template <class T>
__global__ void __launch_bounds__(kThreads) row_delta(Problem p, const T* __restrict__ go, const T* __restrict__ o,
                                                      const float* __restrict__ glse, float* __restrict__ delta) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * (kThreads / 32) + (threadIdx.x >> 5);
  if (r >= p.N * p.L) return;
  const int lane = threadIdx.x & 31, E = p.E;
  const int64_t n = r / p.L, i = r % p.L;
  const T* gr = go + start(p.go, p.H, n) + i * p.go.row;
  const T* orow = o + start(p.o, p.H, n) + i * p.o.row;
  float d = 0.0f;
  for (int e = 2 * lane; e < E; e += 64) {
    const float2 a = to_float2(gr + e), b = to_float2(orow + e);
    d += a.x * b.x + a.y * b.y;
  }
  for (int off = 16; off > 0; off >>= 1) d += __shfl_xor_sync(0xffffffffu, d, off);
  if (lane == 0) delta[r] = d - (glse ? glse[r] : 0.0f);
}

// ---- launchers: E as above; they return the first CUDA error (the caller checks) ----

inline unsigned blocks(int64_t n, int rows = kRows) { return static_cast<unsigned>((n + rows - 1) / rows); }

template <class K>
cudaError_t allow_smem(K kernel, size_t bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
}

// Calls f.template operator()<D>() with the padded head dim for E (float: 64 only).
template <class T, class F>
cudaError_t with_head_dim(int E, F&& f) {
  if constexpr (sizeof(T) == 4)
    return f.template operator()<64>();
  else
    return E <= 64 ? f.template operator()<64>() : f.template operator()<128>();
}

template <class T>
cudaError_t launch_forward(const Problem& p, const T* q, const T* k, const T* v, T* out, float* lse, cudaStream_t s) {
  if (p.N * p.L == 0) return cudaSuccess;
  return with_head_dim<T>(p.E, [&]<int D>() {
    cudaError_t e = allow_smem(forward<T, D>, forward_smem<T, D>());
    if (e != cudaSuccess) return e;
    forward<T, D><<<dim3(static_cast<unsigned>(p.N), blocks(p.L, forward_rows<T, D>())), kThreads, forward_smem<T, D>(), s>>>(p, q, k, v, out,
                                                                                                   lse);
    return cudaGetLastError();
  });
}

// delta: N * L floats of scratch. grad_lse may be null.
template <class T>
cudaError_t launch_backward(const Problem& p, const T* go, const T* q, const T* k, const T* v, const T* out,
                            const float* lse, const float* grad_lse, float* delta, T* dq, T* dk, T* dv,
                            cudaStream_t s) {
  const int64_t rows = p.N * p.L;
  if (rows > 0) {
    row_delta<T><<<static_cast<unsigned>((rows + kThreads / 32 - 1) / (kThreads / 32)), kThreads, 0, s>>>(
        p, go, out, grad_lse, delta);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  return with_head_dim<T>(p.E, [&]<int D>() {
    cudaError_t e = cudaSuccess;
    if (rows > 0) {
      if ((e = allow_smem(backward_dq<T, D>, dq_smem<T, D>())) != cudaSuccess) return e;
      backward_dq<T, D><<<dim3(static_cast<unsigned>(p.N), blocks(p.L)), kThreads, dq_smem<T, D>(), s>>>(
          p, go, q, k, v, lse, delta, dq);
      if ((e = cudaGetLastError()) != cudaSuccess) return e;
    }
    if (p.N * p.S > 0) {
      if ((e = allow_smem(backward_dkdv<T, D>, dkdv_smem<T, D>())) != cudaSuccess) return e;
      backward_dkdv<T, D><<<dim3(static_cast<unsigned>(p.N), blocks(p.S)), kThreads, dkdv_smem<T, D>(), s>>>(
          p, go, q, k, v, lse, delta, dk, dv);
      e = cudaGetLastError();
    }
    return e;
  });
}

}  // namespace kiln::cuda::flash
