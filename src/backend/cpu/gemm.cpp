#include "backend/cpu/gemm.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "core/parallel.h"

#ifdef KILN_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace kiln::cpu {
namespace {

// Note [GEMM vector width]
// The micro-kernel uses GCC vector extensions instead of intrinsics so the file
// builds for any target. A vector must match a real register (a wider one is
// split by GCC and spills the accumulators), so the kernel is a template on
// the vector width, compiled three times on x86: for the compiler's baseline
// (SSE2 unless -march says more) and, through target attributes, for AVX2+FMA
// and AVX-512. The widest one the CPU supports is picked at run time, so the
// default build (no -march=native) still runs AVX-512 code where it can.
#if defined(__AVX512F__)
constexpr int kBaseVecBytes = 64;
constexpr int kBaseVecRegs = 32;
#elif defined(__AVX__)
constexpr int kBaseVecBytes = 32;
constexpr int kBaseVecRegs = 16;
#else
constexpr int kBaseVecBytes = 16;
constexpr int kBaseVecRegs = 16;
#endif

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define KILN_GEMM_MULTI_ISA 1
#endif

// Register tile MR x NR (NR = 2 vectors) and cache blocks, BLIS style:
// a KC x NR micro-panel of B stays in L1, an MC x KC block of A in L2 and a
// KC x NC panel of B in L3. MR leaves two registers for B and one for the
// broadcast A value: 2*MR accumulators + 3 <= number of vector registers.
template <class T, int VecBytes, int VecRegs>
struct Blocking {
  static constexpr int VB = VecBytes;
  static constexpr int VL = VecBytes / static_cast<int>(sizeof(T));
  static constexpr int NR = 2 * VL;
  static constexpr int MR = VecRegs == 32 ? 12 : 6;
  static constexpr int64_t KC = 256;
  static constexpr int64_t MC = MR * (sizeof(T) == 4 ? 12 : 8);
  static constexpr int64_t NC = sizeof(T) == 4 ? 4096 : 2048;
};

constexpr int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Grow-only, 64-byte aligned scratch that lives as long as its thread, so
// repeated GEMM calls do not pay for page faults on fresh allocations.
struct ScratchBuffer {
  void* data = nullptr;
  size_t bytes = 0;
  ScratchBuffer() = default;
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ~ScratchBuffer() { std::free(data); }
  void* get(size_t n) {
    if (n > bytes) {
      std::free(data);
      size_t rounded = static_cast<size_t>(round_up(static_cast<int64_t>(n), 64));
      data = std::aligned_alloc(64, rounded);
      if (!data) {
        bytes = 0;
        throw std::bad_alloc();
      }
      bytes = rounded;
    }
    return data;
  }
};

// Slot 0 holds packed A (one per worker thread), slot 1 packed B (owned by the
// calling thread and shared read-only with the workers).
template <class T, int Slot>
T* thread_scratch(int64_t elems) {
  thread_local ScratchBuffer buf;
  return static_cast<T*>(buf.get(static_cast<size_t>(elems) * sizeof(T)));
}

// Integer arithmetic is done in an unsigned type of at least 32 bits so
// overflow wraps (as PyTorch's integer matmul does) instead of being UB, and
// uint16 * uint16 cannot hit signed-int promotion overflow. Modular arithmetic
// makes the truncated result equal to wrapping in T itself.
template <class T>
using Wrapping = std::conditional_t<sizeof(T) <= 4, uint32_t, uint64_t>;

template <class T>
T mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<Wrapping<T>>(a) * static_cast<Wrapping<T>>(b));
  } else {
    return a * b;
  }
}

template <class T>
void scale_c(int64_t M, int64_t N, T beta, T* C, int64_t ldc) {
  if (beta == T(1)) return;
  for (int64_t i = 0; i < M; ++i) {
    T* c = C + i * ldc;
    if (beta == T(0)) {
      std::fill(c, c + N, T(0));  // not 0 * c: C may hold NaN
    } else {
      for (int64_t j = 0; j < N; ++j) c[j] = mul(beta, c[j]);
    }
  }
}

// Packs rows [0, mc) x cols [0, kc) of A (A(i,k) = A[i*rs + k*cs]) into
// micro-panels of MR rows, each stored k-major: dst[p*MR*kc + k*MR + r].
// Rows past mc are zero so the micro-kernel never needs a row mask.
template <class T, int MR>
void pack_a(int64_t mc, int64_t kc, const T* A, int64_t rs, int64_t cs, T* dst) {
  for (int64_t i = 0; i < mc; i += MR, dst += MR * kc) {
    const int64_t mr = std::min<int64_t>(MR, mc - i);
    const T* a = A + i * rs;
    if (mr == MR && cs == 1) {
      for (int r = 0; r < MR; ++r) {
        const T* ar = a + r * rs;
        for (int64_t k = 0; k < kc; ++k) dst[k * MR + r] = ar[k];
      }
    } else if (mr == MR && rs == 1) {
      for (int64_t k = 0; k < kc; ++k) {
        const T* ak = a + k * cs;
        for (int r = 0; r < MR; ++r) dst[k * MR + r] = ak[r];
      }
    } else {
      for (int64_t k = 0; k < kc; ++k) {
        for (int64_t r = 0; r < mr; ++r) dst[k * MR + r] = a[r * rs + k * cs];
        for (int64_t r = mr; r < MR; ++r) dst[k * MR + r] = T(0);
      }
    }
  }
}

// Packs panels [q0, q1) of NR columns of the kc x nc block of B
// (B(k,j) = B[k*rs + j*cs]) as dst[q*NR*kc + k*NR + c], zero-padding columns.
template <class T, int NR>
void pack_b(int64_t q0, int64_t q1, int64_t nc, int64_t kc, const T* B, int64_t rs, int64_t cs,
            T* dst) {
  for (int64_t q = q0; q < q1; ++q) {
    const int64_t j = q * NR;
    const int64_t nr = std::min<int64_t>(NR, nc - j);
    const T* b = B + j * cs;
    T* d = dst + q * NR * kc;
    if (nr == NR && cs == 1) {
      for (int64_t k = 0; k < kc; ++k) std::memcpy(d + k * NR, b + k * rs, NR * sizeof(T));
    } else if (nr == NR && rs == 1) {
      for (int c = 0; c < NR; ++c) {
        const T* bc = b + c * cs;
        for (int64_t k = 0; k < kc; ++k) d[k * NR + c] = bc[k];
      }
    } else {
      for (int64_t k = 0; k < kc; ++k) {
        for (int64_t c = 0; c < nr; ++c) d[k * NR + c] = b[k * rs + c * cs];
        for (int64_t c = nr; c < NR; ++c) d[k * NR + c] = T(0);
      }
    }
  }
}

// C[0:MR, 0:NR] = alpha * Ap @ Bp + beta * C over packed micro-panels.
// beta == 0 does not read C. Ap and Bp are 64-byte aligned and NR*sizeof(T) is
// a multiple of the vector size, so B loads are aligned; C accesses go through
// memcpy because C rows have arbitrary alignment.
template <class T, int VB, int MR, int NR>
[[gnu::always_inline]] inline void micro_kernel(int64_t kc, const T* __restrict Ap,
                                                const T* __restrict Bp, T* __restrict C,
                                                int64_t ldc, T alpha, T beta) {
  typedef T V __attribute__((vector_size(VB)));
  constexpr int VL = VB / static_cast<int>(sizeof(T));
  constexpr int NV = NR / VL;
  static_assert(NR % VL == 0, "NR must be whole vectors");
  Bp = static_cast<const T*>(__builtin_assume_aligned(Bp, VB));

  V acc[MR][NV];
#pragma GCC unroll 32
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = V{};

  for (int64_t k = 0; k < kc; ++k) {
    V b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) std::memcpy(&b[v], Bp + v * VL, sizeof(V));
#pragma GCC unroll 32
    for (int r = 0; r < MR; ++r) {
      const T a = Ap[r];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] += a * b[v];
    }
    Ap += MR;
    Bp += NR;
  }

  if (beta == T(0)) {
#pragma GCC unroll 32
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        V x = alpha * acc[r][v];
        std::memcpy(C + r * ldc + v * VL, &x, sizeof(V));
      }
  } else {
#pragma GCC unroll 32
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        V old;
        std::memcpy(&old, C + r * ldc + v * VL, sizeof(V));
        V x = alpha * acc[r][v] + beta * old;
        std::memcpy(C + r * ldc + v * VL, &x, sizeof(V));
      }
  }
}

// Partial tile at a matrix edge: run the full kernel into a scratch tile
// (the packed panels are zero-padded) and copy out the valid part.
template <class T, int VB, int MR, int NR>
[[gnu::always_inline]] inline void edge_kernel(int64_t mr, int64_t nr, int64_t kc, const T* Ap,
                                               const T* Bp, T* C, int64_t ldc, T alpha, T beta) {
  alignas(64) T tile[MR * NR];
  micro_kernel<T, VB, MR, NR>(kc, Ap, Bp, tile, NR, alpha, T(0));
  for (int64_t r = 0; r < mr; ++r) {
    T* c = C + r * ldc;
    const T* t = tile + r * NR;
    if (beta == T(0)) {
      for (int64_t j = 0; j < nr; ++j) c[j] = t[j];
    } else {
      for (int64_t j = 0; j < nr; ++j) c[j] = t[j] + beta * c[j];
    }
  }
}

// Packed A block (mc x kc) times column panels [q0, q1) of the packed B panel
// (nc columns) into C (already offset to the block's corner).
template <class T, class Bk>
[[gnu::always_inline]] inline void macro_kernel_body(int64_t mc, int64_t nc, int64_t q0, int64_t q1,
                                                     int64_t kc, const T* apack, const T* bpack,
                                                     T* C, int64_t ldc, T alpha, T beta) {
  constexpr int MR = Bk::MR, NR = Bk::NR, VB = Bk::VB;
  for (int64_t q = q0; q < q1; ++q) {
    const int64_t j = q * NR;
    const int64_t nr = std::min<int64_t>(NR, nc - j);
    const T* bp = bpack + q * NR * kc;
    for (int64_t ir = 0; ir < mc; ir += MR) {
      const int64_t mr = std::min<int64_t>(MR, mc - ir);
      T* c = C + ir * ldc + j;
      const T* ap = apack + ir * kc;
      if (mr == MR && nr == NR) {
        micro_kernel<T, VB, MR, NR>(kc, ap, bp, c, ldc, alpha, beta);
      } else {
        edge_kernel<T, VB, MR, NR>(mr, nr, kc, ap, bp, c, ldc, alpha, beta);
      }
    }
  }
}

template <class T>
using MacroKernel = void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, const T*, const T*, T*,
                             int64_t, T, T);

template <class T>
using BaseBlocking = Blocking<T, kBaseVecBytes, kBaseVecRegs>;

template <class T>
void macro_kernel_base(int64_t mc, int64_t nc, int64_t q0, int64_t q1, int64_t kc, const T* apack,
                       const T* bpack, T* C, int64_t ldc, T alpha, T beta) {
  macro_kernel_body<T, BaseBlocking<T>>(mc, nc, q0, q1, kc, apack, bpack, C, ldc, alpha, beta);
}

#ifdef KILN_GEMM_MULTI_ISA
template <class T>
using Avx2Blocking = Blocking<T, 32, 16>;
template <class T>
using Avx512Blocking = Blocking<T, 64, 32>;

template <class T>
[[gnu::target("avx2,fma")]] void macro_kernel_avx2(int64_t mc, int64_t nc, int64_t q0, int64_t q1,
                                                   int64_t kc, const T* apack, const T* bpack, T* C,
                                                   int64_t ldc, T alpha, T beta) {
  macro_kernel_body<T, Avx2Blocking<T>>(mc, nc, q0, q1, kc, apack, bpack, C, ldc, alpha, beta);
}

template <class T>
[[gnu::target("avx512f,avx2,fma")]] void macro_kernel_avx512(int64_t mc, int64_t nc, int64_t q0,
                                                             int64_t q1, int64_t kc, const T* apack,
                                                             const T* bpack, T* C, int64_t ldc,
                                                             T alpha, T beta) {
  macro_kernel_body<T, Avx512Blocking<T>>(mc, nc, q0, q1, kc, apack, bpack, C, ldc, alpha, beta);
}
#endif

// Threads only pay off above ~0.5 MFLOP: a fork/join costs a few microseconds.
int64_t gemm_threads(int64_t M, int64_t N, int64_t K) {
  if (in_parallel_region() || M * N * K < int64_t(64) * 64 * 64) return 1;
  return get_num_threads();
}

// Whether splitting the rows (m_units blocks) among nt threads balances at
// least as well as splitting the columns (n_units blocks).
bool split_rows(int64_t m_units, int64_t n_units, int64_t nt) {
  auto waste = [nt](int64_t units) { return (units + nt - 1) / nt * nt - units; };
  return waste(m_units) * n_units <= waste(n_units) * m_units;
}

// Blocked float/double GEMM over element-strided A and B and row-major C.
// Loop order jc (NC) -> pc (KC, pack B shared) -> ic (MC, pack A per thread)
// -> jr (NR) -> ir (MR). Threads split the rows of C (or its columns when C
// has too few row panels), so no two threads write the same element.
template <class T, class Bk>
void gemm_blocked(MacroKernel<T> macro_kernel, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                  int64_t ars, int64_t acs, const T* B, int64_t brs, int64_t bcs, T beta, T* C,
                  int64_t ldc) {
  constexpr int MR = Bk::MR;
  constexpr int NR = Bk::NR;
  const int64_t KC = Bk::KC;
  const int64_t MC = Bk::MC;
  const int64_t NC = Bk::NC;

  const int64_t nt = gemm_threads(M, N, K);
  const bool threaded = nt > 1;

  // Equal K blocks: K = 257 runs as 129 + 128 rather than 256 + a 1-deep block.
  const int64_t k_blocks = (K + KC - 1) / KC;
  const int64_t kc_step = (K + k_blocks - 1) / k_blocks;
  const int64_t nc_cap = std::min(NC, round_up(N, NR));
  T* bpack = thread_scratch<T, 1>(kc_step * nc_cap);

  for (int64_t jc = 0; jc < N; jc += NC) {
    const int64_t nc = std::min(NC, N - jc);
    const int64_t n_panels = (nc + NR - 1) / NR;
    for (int64_t pc = 0; pc < K; pc += kc_step) {
      const int64_t kc = std::min(kc_step, K - pc);
      const T beta_k = pc == 0 ? beta : T(1);  // later K blocks accumulate
      const T* Bblk = B + pc * brs + jc * bcs;
      const T* Ablk = A + pc * acs;

      auto pack = [&](int64_t q0, int64_t q1) {
        pack_b<T, NR>(q0, q1, nc, kc, Bblk, brs, bcs, bpack);
      };
      if (threaded) {
        parallel_for(0, n_panels, 1, pack);
      } else {
        pack(0, n_panels);
      }

      // Rows [i0, i1) (i0 a multiple of MR) against column panels [q0, q1).
      auto compute = [&](int64_t i0, int64_t i1, int64_t q0, int64_t q1) {
        T* apack = thread_scratch<T, 0>(MC * kc);
        for (int64_t ic = i0; ic < i1; ic += MC) {
          const int64_t mc = std::min(MC, i1 - ic);
          pack_a<T, MR>(mc, kc, Ablk + ic * ars, ars, acs, apack);
          macro_kernel(mc, nc, q0, q1, kc, apack, bpack, C + ic * ldc + jc, ldc, alpha, beta_k);
        }
      };

      const int64_t m_panels = (M + MR - 1) / MR;
      if (!threaded) {
        compute(0, M, 0, n_panels);
      } else if (split_rows(m_panels, n_panels, nt)) {
        // parallel_for hands each thread one contiguous, equal run of panels.
        parallel_for(0, m_panels, 1, [&](int64_t b, int64_t e) {
          compute(b * MR, std::min(e * MR, M), 0, n_panels);
        });
      } else {
        // Each thread packs all of A itself; cheap next to its share of columns.
        parallel_for(0, n_panels, 1, [&](int64_t b, int64_t e) { compute(0, M, b, e); });
      }
    }
  }
}

// Kernel variant levels: 0 = compiler baseline, 1 = AVX2+FMA, 2 = AVX-512.
int best_isa_level() {
#ifdef KILN_GEMM_MULTI_ISA
  // libgcc's checks include the OS having enabled the ymm/zmm register state.
  __builtin_cpu_init();
  const bool fma_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (fma_avx2 && __builtin_cpu_supports("avx512f")) return 2;
  if (fma_avx2) return 1;
#endif
  return 0;
}

std::atomic<int>& isa_level() {
  static std::atomic<int> level{best_isa_level()};
  return level;
}

constexpr const char* kIsaNames[] = {"baseline", "avx2", "avx512"};

template <class T>
void gemm_blocked_dispatch(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t ars,
                           int64_t acs, const T* B, int64_t brs, int64_t bcs, T beta, T* C,
                           int64_t ldc) {
  switch (isa_level().load(std::memory_order_relaxed)) {
#ifdef KILN_GEMM_MULTI_ISA
    case 2:
      gemm_blocked<T, Avx512Blocking<T>>(&macro_kernel_avx512<T>, M, N, K, alpha, A, ars, acs, B,
                                         brs, bcs, beta, C, ldc);
      return;
    case 1:
      gemm_blocked<T, Avx2Blocking<T>>(&macro_kernel_avx2<T>, M, N, K, alpha, A, ars, acs, B, brs,
                                       bcs, beta, C, ldc);
      return;
#endif
    default:
      gemm_blocked<T, BaseBlocking<T>>(&macro_kernel_base<T>, M, N, K, alpha, A, ars, acs, B, brs,
                                       bcs, beta, C, ldc);
  }
}

// Integer GEMM, wrapping on overflow (see Wrapping).
template <class T>
void gemm_integer(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t ars, int64_t acs,
                  const T* B, int64_t brs, int64_t bcs, T beta, T* C, int64_t ldc) {
  using U = Wrapping<T>;
  // op(B) as a contiguous K x N copy: unit-stride inner loop that vectorizes,
  // and the widening happens once instead of M times.
  std::vector<U> b(static_cast<size_t>(K * N));
  parallel_for(0, K, std::max<int64_t>(1, 16384 / std::max<int64_t>(N, 1)),
               [&](int64_t k0, int64_t k1) {
                 for (int64_t k = k0; k < k1; ++k)
                   for (int64_t j = 0; j < N; ++j)
                     b[k * N + j] = static_cast<U>(B[k * brs + j * bcs]);
               });

  // Blocks of kRows rows x kCols columns reuse each B row segment kRows times
  // while the accumulators stay in L1.
  constexpr int64_t kRows = 8;
  constexpr int64_t kCols = 256;
  const U ualpha = static_cast<U>(alpha);
  const U ubeta = static_cast<U>(beta);
  const int64_t row_blocks = (M + kRows - 1) / kRows;
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(N * K * kRows, 1));
  parallel_for(0, row_blocks, grain, [&](int64_t rb0, int64_t rb1) {
    U acc[kRows][kCols];
    for (int64_t rb = rb0; rb < rb1; ++rb) {
      const int64_t i0 = rb * kRows;
      const int64_t rows = std::min(kRows, M - i0);
      for (int64_t j0 = 0; j0 < N; j0 += kCols) {
        const int64_t cols = std::min(kCols, N - j0);
        for (int64_t r = 0; r < rows; ++r) std::fill(acc[r], acc[r] + cols, U(0));
        for (int64_t k = 0; k < K; ++k) {
          const U* brow = b.data() + k * N + j0;
          for (int64_t r = 0; r < rows; ++r) {
            const U a = static_cast<U>(A[(i0 + r) * ars + k * acs]);
            U* acc_r = acc[r];
            for (int64_t j = 0; j < cols; ++j) acc_r[j] += a * brow[j];
          }
        }
        for (int64_t r = 0; r < rows; ++r) {
          T* c = C + (i0 + r) * ldc + j0;
          for (int64_t j = 0; j < cols; ++j) {
            U v = ualpha * acc[r][j];
            if (beta != T(0)) v += ubeta * static_cast<U>(c[j]);
            c[j] = static_cast<T>(v);
          }
        }
      }
    }
  });
}


#ifdef KILN_HAVE_OPENBLAS
// Note [OpenBLAS threading]
// Debian's default OpenBLAS runs its own pthread pool. Alternating with kiln's
// OpenMP regions (im2col, elementwise ops), the two pools' spinning threads
// fight over the cores: a 2-thread conv measured 3x slower. So kiln splits C
// into one block per OpenMP thread, one cblas call each, and OpenBLAS runs on
// one thread inside that region (Note [Thread budget]: kiln's parallel regions
// set it to 1); outside regions OpenBLAS has the budget, for LAPACK's calls.
void blas_call(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
               int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(M), static_cast<blasint>(N), static_cast<blasint>(K), alpha, A,
              static_cast<blasint>(lda), B, static_cast<blasint>(ldb), beta, C,
              static_cast<blasint>(ldc));
}
void blas_call(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
               int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(M), static_cast<blasint>(N), static_cast<blasint>(K), alpha, A,
              static_cast<blasint>(lda), B, static_cast<blasint>(ldb), beta, C,
              static_cast<blasint>(ldc));
}

// cblas rejects leading dimensions below the row width (and Debian's OpenBLAS
// uses 32-bit ints); such calls go to the fallback, which accepts any stride.
bool blas_accepts(bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t& lda, int64_t& ldb,
                  int64_t& ldc) {
  constexpr int64_t kMaxInt = (int64_t(1) << 31) - 1;
  auto fix = [](int64_t rows, int64_t cols, int64_t& ld) {
    if (rows == 1) ld = std::max(ld, cols);
    return ld >= std::max<int64_t>(cols, 1) && ld <= kMaxInt;
  };
  const bool ok_a = ta ? fix(K, M, lda) : fix(M, K, lda);
  const bool ok_b = tb ? fix(N, K, ldb) : fix(K, N, ldb);
  if (M == 1) ldc = std::max(ldc, N);
  const bool ok_c = ldc >= std::max<int64_t>(N, 1);
  return ok_a && ok_b && ok_c && M <= kMaxInt && N <= kMaxInt && K <= kMaxInt && ldc <= kMaxInt;
}

// gemm() through cblas, threaded over row (or column) blocks of C. Blocks are
// whole multiples of 16 rows/columns, a multiple of OpenBLAS's register tiles.
template <class T>
void blas_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
               const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  const int64_t nt = gemm_threads(M, N, K);
  if (nt <= 1) {
    blas_call(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  constexpr int64_t kBlock = 16;
  const int64_t m_units = (M + kBlock - 1) / kBlock, n_units = (N + kBlock - 1) / kBlock;
  if (split_rows(m_units, n_units, nt)) {
    parallel_for(0, m_units, 1, [&](int64_t b, int64_t e) {
      const int64_t i0 = b * kBlock, i1 = std::min(e * kBlock, M);
      blas_call(ta, tb, i1 - i0, N, K, alpha, ta ? A + i0 : A + i0 * lda, lda, B, ldb, beta,
                C + i0 * ldc, ldc);
    });
  } else {
    parallel_for(0, n_units, 1, [&](int64_t b, int64_t e) {
      const int64_t j0 = b * kBlock, j1 = std::min(e * kBlock, N);
      blas_call(ta, tb, M, j1 - j0, K, alpha, A, lda, tb ? B + j0 * ldb : B + j0, ldb, beta, C + j0,
                ldc);
    });
  }
}
#endif

}  // namespace

// Whether a rows x cols operand with element strides (s0, s1) can be handed
// to cblas as a row-major matrix (trans = false) or the transpose of one
// (trans = true), and with which leading dimension. Strides of size-1
// dimensions do not matter, but cblas still insists on ld >= max(1, width).
bool as_blas_operand(int64_t rows, int64_t cols, int64_t s0, int64_t s1, bool& trans, int64_t& ld) {
  if ((cols == 1 || s1 == 1) && (rows == 1 || s0 >= std::max<int64_t>(cols, 1))) {
    trans = false;
    ld = rows == 1 ? std::max<int64_t>(cols, 1) : s0;
    return true;
  }
  if ((rows == 1 || s0 == 1) && (cols == 1 || s1 >= std::max<int64_t>(rows, 1))) {
    trans = true;
    ld = cols == 1 ? std::max<int64_t>(rows, 1) : s1;
    return true;
  }
  return false;
}

namespace detail {

template <class T>
void gemm_fallback(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                   int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0 || alpha == T(0)) {
    scale_c(M, N, beta, C, ldc);
    return;
  }
  const int64_t ars = trans_a ? 1 : lda, acs = trans_a ? lda : 1;
  const int64_t brs = trans_b ? 1 : ldb, bcs = trans_b ? ldb : 1;
  if constexpr (std::is_floating_point_v<T>) {
    gemm_blocked_dispatch<T>(M, N, K, alpha, A, ars, acs, B, brs, bcs, beta, C, ldc);
  } else {
    gemm_integer<T>(M, N, K, alpha, A, ars, acs, B, brs, bcs, beta, C, ldc);
  }
}

const char* gemm_fallback_isa() { return kIsaNames[isa_level().load(std::memory_order_relaxed)]; }

bool set_gemm_fallback_isa(const char* name) {
  const std::string want = name ? name : "";
  for (int level = 0; level <= best_isa_level(); ++level) {
    if (want == kIsaNames[level]) {
      isa_level().store(level, std::memory_order_relaxed);
      return true;
    }
  }
  return false;
}

}  // namespace detail

template <class T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
          int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0 || alpha == T(0)) {
    scale_c(M, N, beta, C, ldc);
    return;
  }
#ifdef KILN_HAVE_OPENBLAS
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (blas_accepts(trans_a, trans_b, M, N, K, lda, ldb, ldc)) {
      blas_gemm<T>(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
      return;
    }
  }
#endif
  detail::gemm_fallback<T>(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

template <class T>
void gemm_strided(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t sa0, int64_t sa1,
                  const T* B, int64_t sb0, int64_t sb1, T beta, T* C, int64_t sc0, int64_t sc1) {
  if (M <= 0 || N <= 0) return;

  // C must be row-major-like; a column-major C is handled as C^T = B^T A^T.
  bool tc = false;
  int64_t ldc = 0;
  const bool c_ok = as_blas_operand(M, N, sc0, sc1, tc, ldc);
  if (c_ok && tc) {
    gemm_strided<T>(N, M, K, alpha, B, sb1, sb0, A, sa1, sa0, beta, C, sc1, sc0);
    return;
  }

  // Any other layout is gathered into contiguous row-major temporaries.
  std::vector<T> a_tmp, b_tmp, c_tmp;
  bool ta = false, tb = false;
  int64_t lda = 0, ldb = 0;
  if (K > 0 && !as_blas_operand(M, K, sa0, sa1, ta, lda)) {
    a_tmp.resize(static_cast<size_t>(M * K));
    for (int64_t i = 0; i < M; ++i)
      for (int64_t k = 0; k < K; ++k) a_tmp[i * K + k] = A[i * sa0 + k * sa1];
    A = a_tmp.data();
    ta = false;
    lda = K;
  }
  if (K > 0 && !as_blas_operand(K, N, sb0, sb1, tb, ldb)) {
    b_tmp.resize(static_cast<size_t>(K * N));
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) b_tmp[k * N + j] = B[k * sb0 + j * sb1];
    B = b_tmp.data();
    tb = false;
    ldb = N;
  }
  if (K <= 0) lda = ldb = 1;  // A and B are not read

  T* c = C;
  if (!c_ok) {
    c_tmp.resize(static_cast<size_t>(M * N));
    if (beta != T(0)) {
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) c_tmp[i * N + j] = C[i * sc0 + j * sc1];
    }
    c = c_tmp.data();
    ldc = N;
  }
  gemm<T>(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, c, ldc);
  if (!c_ok) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * sc0 + j * sc1] = c_tmp[i * N + j];
  }
}

const char* blas_name() {
#ifdef KILN_HAVE_OPENBLAS
  return "openblas";
#else
  return "kiln";
#endif
}

#define KILN_INSTANTIATE_GEMM(T)                                                               \
  template void gemm<T>(bool, bool, int64_t, int64_t, int64_t, T, const T*, int64_t, const T*, \
                        int64_t, T, T*, int64_t);                                              \
  template void gemm_strided<T>(int64_t, int64_t, int64_t, T, const T*, int64_t, int64_t,      \
                                const T*, int64_t, int64_t, T, T*, int64_t, int64_t);          \
  template void detail::gemm_fallback<T>(bool, bool, int64_t, int64_t, int64_t, T, const T*,   \
                                         int64_t, const T*, int64_t, T, T*, int64_t);

KILN_INSTANTIATE_GEMM(float)
KILN_INSTANTIATE_GEMM(double)
KILN_INSTANTIATE_GEMM(int64_t)
KILN_INSTANTIATE_GEMM(int32_t)
KILN_INSTANTIATE_GEMM(int16_t)
KILN_INSTANTIATE_GEMM(int8_t)
KILN_INSTANTIATE_GEMM(uint8_t)

#undef KILN_INSTANTIATE_GEMM

}  // namespace kiln::cpu
