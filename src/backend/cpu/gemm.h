// Raw-pointer GEMM kernels for the CPU backend. They know nothing about tensors:
// callers pass shapes, strides and pointers.
//
// float/double go to OpenBLAS when built with KILN_HAVE_OPENBLAS, else to kiln's
// own cache-blocked kernel (detail::gemm_fallback). Integer types always use a
// simple loop with wrap-around arithmetic, like PyTorch's integer matmul.
#pragma once
#include <cstdint>

namespace kiln::cpu {

// Row-major C[M,N] = alpha * op(A)[M,K] @ op(B)[K,N] + beta * C.
// lda/ldb/ldc are the row strides of the stored (untransposed) matrices, as in
// cblas with CblasRowMajor: A is stored [M,K] (or [K,M] when trans_a).
// beta == 0 means C is not read (it may hold NaN); K == 0 or alpha == 0 gives
// C = beta * C without reading A or B. Threaded with kiln::parallel_for
// (OpenBLAS runs single-threaded in each block); inside a kiln parallel region
// it runs single-threaded, so it never oversubscribes the cores.
template <class T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
          int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc);

// Same with arbitrary element strides, for non-contiguous operands:
// A(i,k) = A[i*sa0 + k*sa1], B(k,j) = B[k*sb0 + j*sb1], C(i,j) = C[i*sc0 + j*sc1].
// Operands with a unit stride in either dimension are passed to gemm() as they
// are; others (and zero/negative strides) are first copied to contiguous
// temporaries. C must not overlap itself (no zero strides with extent > 1).
template <class T>
void gemm_strided(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t sa0, int64_t sa1,
                  const T* B, int64_t sb0, int64_t sb1, T beta, T* C, int64_t sc0, int64_t sc1);

// "openblas" when float/double GEMM goes to OpenBLAS, "kiln" for the own kernel.
// Whether a rows x cols operand with element strides (s0, s1) can be read by
// BLAS in place: row-major with row stride ld (trans = false) or column-major
// with column stride ld (trans = true, a transposed view).
bool as_blas_operand(int64_t rows, int64_t cols, int64_t s0, int64_t s1, bool& trans, int64_t& ld);

const char* blas_name();

namespace detail {
// kiln's own GEMM, same contract as gemm(). Exposed so tests and benchmarks
// can exercise it even in builds that use OpenBLAS. Threaded with
// kiln::parallel_for unless already inside a parallel region.
template <class T>
void gemm_fallback(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                   int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc);

// The fallback's float/double micro-kernel variant: "avx512", "avx2" or
// "baseline" (what the compiler targets). The widest the CPU supports is
// picked at startup; see Note [GEMM vector width] in gemm.cpp.
const char* gemm_fallback_isa();
// Switches the variant (tests and benchmarks use it to cover every kernel).
// Returns false and changes nothing when this CPU cannot run it. Not meant to
// be called while GEMMs run on other threads.
bool set_gemm_fallback_isa(const char* name);
}  // namespace detail

}  // namespace kiln::cpu
