// LAPACK kernels for kiln::linalg (ops/lapack_kernels.h): LAPACKE's column-major interface, one
// call per matrix of the batch, registered with ops at load time. Without LAPACK nothing is
// registered and ops throws its "not supported" error.
#include "ops/lapack_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/error.h"

#if KILN_HAVE_LAPACK
#include <lapacke.h>
#endif

namespace kiln::cpu::lapack {

#if KILN_HAVE_LAPACK
namespace {

constexpr int kCol = LAPACK_COL_MAJOR;
using Int = lapack_int;

// float/double overloads of the LAPACKE calls used here.
Int getrf(Int m, Int n, float* a, Int lda, Int* ipiv) { return LAPACKE_sgetrf(kCol, m, n, a, lda, ipiv); }
Int getrf(Int m, Int n, double* a, Int lda, Int* ipiv) { return LAPACKE_dgetrf(kCol, m, n, a, lda, ipiv); }
Int gesv(Int n, Int k, float* a, Int lda, Int* ipiv, float* b, Int ldb) {
  return LAPACKE_sgesv(kCol, n, k, a, lda, ipiv, b, ldb);
}
Int gesv(Int n, Int k, double* a, Int lda, Int* ipiv, double* b, Int ldb) {
  return LAPACKE_dgesv(kCol, n, k, a, lda, ipiv, b, ldb);
}
Int potrf(char uplo, Int n, float* a, Int lda) { return LAPACKE_spotrf(kCol, uplo, n, a, lda); }
Int potrf(char uplo, Int n, double* a, Int lda) { return LAPACKE_dpotrf(kCol, uplo, n, a, lda); }
Int geqrf(Int m, Int n, float* a, Int lda, float* tau) { return LAPACKE_sgeqrf(kCol, m, n, a, lda, tau); }
Int geqrf(Int m, Int n, double* a, Int lda, double* tau) { return LAPACKE_dgeqrf(kCol, m, n, a, lda, tau); }
Int orgqr(Int m, Int n, Int k, float* a, Int lda, const float* tau) {
  return LAPACKE_sorgqr(kCol, m, n, k, a, lda, tau);
}
Int orgqr(Int m, Int n, Int k, double* a, Int lda, const double* tau) {
  return LAPACKE_dorgqr(kCol, m, n, k, a, lda, tau);
}
Int gesdd(char jobz, Int m, Int n, float* a, Int lda, float* s, float* u, Int ldu, float* vt, Int ldvt) {
  return LAPACKE_sgesdd(kCol, jobz, m, n, a, lda, s, u, ldu, vt, ldvt);
}
Int gesdd(char jobz, Int m, Int n, double* a, Int lda, double* s, double* u, Int ldu, double* vt, Int ldvt) {
  return LAPACKE_dgesdd(kCol, jobz, m, n, a, lda, s, u, ldu, vt, ldvt);
}
Int syevd(char jobz, char uplo, Int n, float* a, Int lda, float* w) {
  return LAPACKE_ssyevd(kCol, jobz, uplo, n, a, lda, w);
}
Int syevd(char jobz, char uplo, Int n, double* a, Int lda, double* w) {
  return LAPACKE_dsyevd(kCol, jobz, uplo, n, a, lda, w);
}
Int gels(Int m, Int n, Int k, float* a, Int lda, float* b, Int ldb) {
  return LAPACKE_sgels(kCol, 'N', m, n, k, a, lda, b, ldb);
}
Int gels(Int m, Int n, Int k, double* a, Int lda, double* b, Int ldb) {
  return LAPACKE_dgels(kCol, 'N', m, n, k, a, lda, b, ldb);
}
Int gelsy(Int m, Int n, Int k, float* a, Int lda, float* b, Int ldb, Int* jpvt, double rcond, Int* rank) {
  return LAPACKE_sgelsy(kCol, m, n, k, a, lda, b, ldb, jpvt, float(rcond), rank);
}
Int gelsy(Int m, Int n, Int k, double* a, Int lda, double* b, Int ldb, Int* jpvt, double rcond, Int* rank) {
  return LAPACKE_dgelsy(kCol, m, n, k, a, lda, b, ldb, jpvt, rcond, rank);
}
Int gelsd(Int m, Int n, Int k, float* a, Int lda, float* b, Int ldb, float* s, double rcond, Int* rank) {
  return LAPACKE_sgelsd(kCol, m, n, k, a, lda, b, ldb, s, float(rcond), rank);
}
Int gelsd(Int m, Int n, Int k, double* a, Int lda, double* b, Int ldb, double* s, double rcond, Int* rank) {
  return LAPACKE_dgelsd(kCol, m, n, k, a, lda, b, ldb, s, rcond, rank);
}
Int gelss(Int m, Int n, Int k, float* a, Int lda, float* b, Int ldb, float* s, double rcond, Int* rank) {
  return LAPACKE_sgelss(kCol, m, n, k, a, lda, b, ldb, s, float(rcond), rank);
}
Int gelss(Int m, Int n, Int k, double* a, Int lda, double* b, Int ldb, double* s, double rcond, Int* rank) {
  return LAPACKE_dgelss(kCol, m, n, k, a, lda, b, ldb, s, rcond, rank);
}

// NaN inputs give NaN results as in torch, not LAPACKE's argument error.
struct NoNanCheck {
  NoNanCheck() { LAPACKE_set_nancheck(0); }
};

// Calls f.template operator()<T>() for a's dtype (float32 or float64).
template <class F>
void dispatch(const char* op, const Tensor& a, F&& f) {
  static NoNanCheck once;
  KILN_CHECK(a.is_contiguous(), "linalg.", op, ": internal error: the LAPACK operand must be contiguous");
  if (a.dtype() == kFloat32)
    f.template operator()<float>();
  else if (a.dtype() == kFloat64)
    f.template operator()<double>();
  else
    KILN_FAIL("linalg.", op, ": LAPACK supports float32 and float64, got ", a.dtype());
}

int64_t batch(const Tensor& a) { return a.sizes()[0]; }
Int ld(int64_t rows) { return Int(std::max<int64_t>(1, rows)); }

void check_arg(const char* op, const char* routine, Int info) {
  KILN_CHECK(info >= 0, "linalg.", op, ": internal error: LAPACK's ", routine, " rejected argument ", -info);
}

}  // namespace

std::vector<int64_t> lu_diag(const char* op, const Tensor& a, const Tensor& sign, const Tensor& diag) {
  const int64_t B = batch(a), n = a.sizes()[2];
  std::vector<int64_t> info(B);
  std::vector<Int> ipiv(std::max<int64_t>(n, 1));
  dispatch(op, a, [&]<class T>() {
    for (int64_t i = 0; i < B; ++i) {
      T* p = a.data_ptr<T>() + i * n * n;
      info[i] = getrf(Int(n), Int(n), p, ld(n), ipiv.data());
      check_arg(op, "getrf", Int(info[i]));
      T s = 1;
      for (int64_t j = 0; j < n; ++j) {
        if (ipiv[j] != j + 1) s = -s;
        diag.data_ptr<T>()[i * n + j] = p[j * n + j];
      }
      sign.data_ptr<T>()[i] = s;
    }
  });
  return info;
}

std::vector<int64_t> gesv(const char* op, const Tensor& a, const Tensor& b) {
  const int64_t B = batch(a), n = a.sizes()[2], k = b.sizes()[1];
  std::vector<int64_t> info(B);
  std::vector<Int> ipiv(std::max<int64_t>(n, 1));
  dispatch(op, a, [&]<class T>() {
    for (int64_t i = 0; i < B; ++i) {
      T* ai = a.data_ptr<T>() + i * n * n;
      T* bi = b.data_ptr<T>() + i * n * k;
      // A NaN in A makes X NaN. LAPACKs disagree on whether it is also a zero pivot (the
      // reference one and torch say no, OpenBLAS's getrf says "singular"): answer NaN on all.
      if (std::any_of(ai, ai + n * n, [](T v) { return std::isnan(v); })) {
        std::fill(ai, ai + n * n, std::numeric_limits<T>::quiet_NaN());
        std::fill(bi, bi + n * k, std::numeric_limits<T>::quiet_NaN());
        info[i] = 0;
        continue;
      }
      info[i] = gesv(Int(n), Int(k), ai, ld(n), ipiv.data(), bi, ld(n));
      check_arg(op, "gesv", Int(info[i]));
    }
  });
  return info;
}

std::vector<int64_t> potrf(const char* op, const Tensor& a, bool upper) {
  const int64_t B = batch(a), n = a.sizes()[2];
  std::vector<int64_t> info(B);
  dispatch(op, a, [&]<class T>() {
    for (int64_t i = 0; i < B; ++i) {
      info[i] = potrf(upper ? 'U' : 'L', Int(n), a.data_ptr<T>() + i * n * n, ld(n));
      check_arg(op, "potrf", Int(info[i]));
    }
  });
  return info;
}

void geqrf(const char* op, const Tensor& a, const Tensor& tau) {
  const int64_t B = batch(a), n = a.sizes()[1], m = a.sizes()[2], k = std::min(m, n);
  if (k == 0) return;
  dispatch(op, a, [&]<class T>() {
    for (int64_t i = 0; i < B; ++i)
      check_arg(op, "geqrf", geqrf(Int(m), Int(n), a.data_ptr<T>() + i * m * n, ld(m), tau.data_ptr<T>() + i * k));
  });
}

void orgqr(const char* op, const Tensor& q, const Tensor& tau, int64_t k) {
  const int64_t B = batch(q), cols = q.sizes()[1], m = q.sizes()[2], kt = tau.sizes()[1];
  if (m == 0 || cols == 0) return;
  dispatch(op, q, [&]<class T>() {
    for (int64_t i = 0; i < B; ++i)
      check_arg(op, "orgqr",
                orgqr(Int(m), Int(cols), Int(k), q.data_ptr<T>() + i * m * cols, ld(m), tau.data_ptr<T>() + i * kt));
  });
}

std::vector<int64_t> gesdd(const char* op, const Tensor& a, const Tensor& s, const Tensor& u, const Tensor& vt,
                           bool vectors, bool full) {
  const int64_t B = batch(a), n = a.sizes()[1], m = a.sizes()[2], k = std::min(m, n);
  std::vector<int64_t> info(B);
  if (k == 0) return info;
  const char jobz = !vectors ? 'N' : full ? 'A' : 'S';
  const int64_t ucols = full ? m : k, vtrows = full ? n : k;
  dispatch(op, a, [&]<class T>() {
    for (int64_t i = 0; i < B; ++i) {
      T* pu = vectors ? u.data_ptr<T>() + i * m * ucols : nullptr;
      T* pvt = vectors ? vt.data_ptr<T>() + i * vtrows * n : nullptr;
      info[i] = gesdd(jobz, Int(m), Int(n), a.data_ptr<T>() + i * m * n, ld(m), s.data_ptr<T>() + i * k, pu, ld(m), pvt,
                      ld(vtrows));
      if (info[i] != linalg::kLapackNonFinite) check_arg(op, "gesdd", Int(info[i]));
    }
  });
  return info;
}

std::vector<int64_t> syevd(const char* op, const Tensor& a, const Tensor& w, bool vectors, bool upper) {
  const int64_t B = batch(a), n = a.sizes()[2];
  std::vector<int64_t> info(B);
  if (n == 0) return info;
  dispatch(op, a, [&]<class T>() {
    for (int64_t i = 0; i < B; ++i) {
      info[i] = syevd(vectors ? 'V' : 'N', upper ? 'U' : 'L', Int(n), a.data_ptr<T>() + i * n * n, ld(n),
                      w.data_ptr<T>() + i * n);
      check_arg(op, "syevd", Int(info[i]));
    }
  });
  return info;
}

std::vector<int64_t> gels(const char* op, const std::string& driver, const Tensor& a, const Tensor& b, double rcond,
                          const Tensor& rank, const Tensor& s) {
  const int64_t B = batch(a), n = a.sizes()[1], m = a.sizes()[2], k = b.sizes()[1], ldb = b.sizes()[2];
  const int64_t mn = std::min(m, n);
  std::vector<int64_t> info(B);
  std::vector<Int> jpvt(std::max<int64_t>(n, 1));
  dispatch(op, a, [&]<class T>() {
    for (int64_t i = 0; i < B; ++i) {
      T* pa = a.data_ptr<T>() + i * m * n;
      T* pb = b.data_ptr<T>() + i * k * ldb;
      Int r = 0;
      if (m == 0 || n == 0) {
        std::fill(pb, pb + k * ldb, T(0));  // the empty least-squares problem has the zero solution
      } else if (driver == "gels") {
        info[i] = gels(Int(m), Int(n), Int(k), pa, ld(m), pb, ld(ldb));
      } else if (driver == "gelsy") {
        std::fill(jpvt.begin(), jpvt.end(), 0);
        info[i] = gelsy(Int(m), Int(n), Int(k), pa, ld(m), pb, ld(ldb), jpvt.data(), rcond, &r);
      } else if (driver == "gelsd") {
        info[i] = gelsd(Int(m), Int(n), Int(k), pa, ld(m), pb, ld(ldb), s.data_ptr<T>() + i * mn, rcond, &r);
      } else {
        info[i] = gelss(Int(m), Int(n), Int(k), pa, ld(m), pb, ld(ldb), s.data_ptr<T>() + i * mn, rcond, &r);
      }
      check_arg(op, driver.c_str(), Int(info[i]));
      if (driver != "gels") rank.data_ptr<int64_t>()[i] = r;
    }
  });
  return info;
}

// Internal linkage (const); the overloads above are LAPACKE's, these the table's.
const linalg::LapackKernels kKernels{&lu_diag, &gesv, &potrf, &geqrf, &orgqr, &gesdd, &syevd, &gels};
[[maybe_unused]] const bool registered = (linalg::register_lapack_kernels(&kKernels), true);

#endif

}  // namespace kiln::cpu::lapack
