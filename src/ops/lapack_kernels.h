// The LAPACK kernels kiln::linalg's decompositions call (src/ops/linalg_decomp.cpp): float32/float64,
// CPU, batched. ops owns this table and the CPU backend fills it in (src/backend/cpu/lapack.cpp),
// so ops never includes a backend (docs/layers.md). No table (kiln built without LAPACK): each op
// throws "linalg.<op>: not supported: kiln was built without LAPACK".
//
// Matrices are passed column-major, as LAPACK wants them: a contiguous tensor of shape
// [B, cols, rows] holds B matrices of rows x cols (ops transpose with mT() on the way in
// and out). Every kernel overwrites its inputs and returns LAPACK's info per matrix.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::linalg {

struct LapackKernels {
  using Info = std::vector<int64_t>;
  // LU with partial pivoting (getrf): a [B, n, n] becomes L\U; the per-matrix sign of the
  // permutation and the diagonal of U go to sign [B] and diag [B, n] (both a's dtype).
  Info (*lu_diag)(const char* op, const Tensor& a, const Tensor& sign, const Tensor& diag);
  // Solves A X = B (gesv): a [B, n, n] is overwritten with its LU, b [B, k, n] with X.
  Info (*gesv)(const char* op, const Tensor& a, const Tensor& b);
  // Cholesky (potrf) of the lower (or upper) triangle of each a [B, n, n] (the other triangle is kept).
  Info (*potrf)(const char* op, const Tensor& a, bool upper);
  // QR: a [B, n, m] becomes R above its diagonal and the reflectors below (geqrf), tau [B, min(m, n)].
  void (*geqrf)(const char* op, const Tensor& a, const Tensor& tau);
  // Forms the first cols columns of Q (orgqr) in q [B, cols, m] from the first k reflectors.
  void (*orgqr)(const char* op, const Tensor& q, const Tensor& tau, int64_t k);
  // SVD (gesdd): s [B, min(m, n)]; with vectors, u [B, ucols, m] and vt [B, n, vtrows] where
  // ucols = vtrows = full ? m|n : min(m, n). a [B, n, m] is destroyed.
  Info (*gesdd)(const char* op, const Tensor& a, const Tensor& s, const Tensor& u, const Tensor& vt, bool vectors,
                bool full);
  // Symmetric eigendecomposition (syevd) from the lower (or upper) triangle: w [B, n] ascending;
  // with vectors, a [B, n, n] becomes the eigenvectors (columns).
  Info (*syevd)(const char* op, const Tensor& a, const Tensor& w, bool vectors, bool upper);
  // Least squares min ||A X - B|| with driver "gels", "gelsy", "gelsd" or "gelss": a [B, n, m],
  // b [B, k, max(m, n)] (X in its first n rows), rank int64 [B] (not for gels), s [B, min(m, n)]
  // (gelsd, gelss).
  Info (*gels)(const char* op, const std::string& driver, const Tensor& a, const Tensor& b, double rcond,
               const Tensor& rank, const Tensor& s);
};

// gesdd's info for an input with NaN or inf: LAPACK >= 3.10 rejects its argument 4 (A), which is
// LAPACKE's argument 5 (after the layout).
inline constexpr int64_t kLapackNonFinite = -5;

// Called once by the backend that has LAPACK (at load time); `k` must outlive every call.
void register_lapack_kernels(const LapackKernels* k);
// The registered table; throws the "not supported" error for `op` when there is none.
const LapackKernels& lapack_kernels(const char* op);

}  // namespace kiln::linalg
