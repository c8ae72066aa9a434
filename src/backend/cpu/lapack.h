// LAPACK kernels for kiln::linalg (src/ops/linalg*.cpp): float32/float64, CPU, batched.
// Matrices are passed column-major, as LAPACK wants them: a contiguous tensor of shape
// [B, cols, rows] holds B matrices of rows x cols (ops transpose with mT() on the way in
// and out). Every kernel overwrites its inputs and returns LAPACK's info per matrix.
// Built without LAPACK (KILN_HAVE_LAPACK unset), each one throws
// "linalg.<op>: not supported: kiln was built without LAPACK".
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::cpu::lapack {

bool available();

// LU with partial pivoting (getrf): a [B, n, n] becomes L\U; the per-matrix sign of the
// permutation and the diagonal of U go to sign [B] and diag [B, n] (both a's dtype).
std::vector<int64_t> lu_diag(const char* op, const Tensor& a, const Tensor& sign, const Tensor& diag);
// Solves A X = B (gesv): a [B, n, n] is overwritten with its LU, b [B, k, n] with X.
std::vector<int64_t> gesv(const char* op, const Tensor& a, const Tensor& b);
// Cholesky (potrf) of the lower (or upper) triangle of each a [B, n, n] (the other triangle is kept).
std::vector<int64_t> potrf(const char* op, const Tensor& a, bool upper);
// QR: a [B, n, m] becomes R above its diagonal and the reflectors below (geqrf), tau [B, min(m, n)].
void geqrf(const char* op, const Tensor& a, const Tensor& tau);
// Forms the first cols columns of Q (orgqr) in q [B, cols, m] from the first k reflectors.
void orgqr(const char* op, const Tensor& q, const Tensor& tau, int64_t k);
// SVD (gesdd): s [B, min(m, n)]; with vectors, u [B, ucols, m] and vt [B, n, vtrows] where
// ucols = vtrows = full ? m|n : min(m, n). a [B, n, m] is destroyed.
// gesdd's info for an input with NaN or inf: LAPACK >= 3.10 rejects its argument 4 (A), which is
// LAPACKE's argument 5 (after the layout).
inline constexpr int64_t kNonFinite = -5;
std::vector<int64_t> gesdd(const char* op, const Tensor& a, const Tensor& s, const Tensor& u, const Tensor& vt,
                           bool vectors, bool full);
// Symmetric eigendecomposition (syevd) from the lower (or upper) triangle: w [B, n] ascending;
// with vectors, a [B, n, n] becomes the eigenvectors (columns).
std::vector<int64_t> syevd(const char* op, const Tensor& a, const Tensor& w, bool vectors, bool upper);
// Least squares min ||A X - B|| with driver "gels", "gelsy", "gelsd" or "gelss": a [B, n, m],
// b [B, k, max(m, n)] (X in its first n rows), rank int64 [B] (not for gels), s [B, min(m, n)]
// (gelsd, gelss).
std::vector<int64_t> gels(const char* op, const std::string& driver, const Tensor& a, const Tensor& b, double rcond,
                          const Tensor& rank, const Tensor& s);

}  // namespace kiln::cpu::lapack
