// torch.linalg's norms (vector_norm, matrix_norm, norm): compositions of kiln ops, so autograd and
// tracing see the ops they call. The spectral and nuclear norms go through linalg::svdvals.
#include <cmath>
#include <limits>
#include <sstream>

#include "kiln/linalg.h"
#include "kiln/ops/pointwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "ops/meta_util.h"

namespace kiln::linalg {
namespace {

void check_norm_dtype(const char* op, const Tensor& x, std::optional<DType> dtype) {
  KILN_CHECK(x.defined(), "linalg.", op, ": expected a defined tensor");
  KILN_CHECK(is_floating_point(x.dtype()), "linalg.", op,
             ": Expected a floating point or complex tensor as input. Got ", x.dtype());
  if (dtype)
    KILN_CHECK(is_floating_point(*dtype), "linalg.", op, ": dtype should be floating point or complex, but got ",
               *dtype);
}

std::string ord_str(double ord) {
  if (std::isinf(ord)) return ord > 0 ? "inf" : "-inf";
  std::ostringstream s;
  s << ord;
  return s.str();
}

// The two wrapped, distinct dims of a matrix norm.
std::pair<int64_t, int64_t> matrix_dims(const Tensor& A, IntArrayRef dim) {
  KILN_CHECK(A.dim() >= 2, "linalg.matrix_norm: The input tensor A must have at least 2 dimensions.");
  KILN_CHECK(dim.size() == 2, "linalg.matrix_norm: dim must be a 2-tuple. Got ", shape_str(dim));
  int64_t d0 = wrap_dim(dim[0], A.dim(), "linalg.matrix_norm"), d1 = wrap_dim(dim[1], A.dim(), "linalg.matrix_norm");
  KILN_CHECK(d0 != d1, "linalg.matrix_norm: dims must be different. Got (", dim[0], ", ", dim[1], ")");
  return {d0, d1};
}

// Drops (or keeps, as size 1) the reduced dims d0, d1 of a keepdim result.
Tensor finish(const Tensor& r, int64_t d0, int64_t d1, bool keepdim) {
  return keepdim ? r : r.squeeze({std::max(d0, d1), std::min(d0, d1)});
}

// Norms from the singular values: op over svdvals of A with the dims (d0, d1) moved last.
Tensor spectral(const Tensor& A, int64_t d0, int64_t d1, bool keepdim, const std::string& which) {
  Tensor s = svdvals(movedim(A, {d0, d1}, {-2, -1}));
  Tensor r = which == "nuc" ? s.sum({-1}) : which == "max" ? amax(s, {-1}) : amin(s, {-1});
  if (!keepdim) return r;
  int64_t lo = std::min(d0, d1), hi = std::max(d0, d1);
  return r.unsqueeze(lo).unsqueeze(hi);
}

}  // namespace

Tensor vector_norm(const Tensor& x, const Scalar& ord, IntArrayRef dim, bool keepdim, std::optional<DType> dtype) {
  check_norm_dtype("vector_norm", x, dtype);
  Tensor v = dtype ? x.to(*dtype) : x;
  const double p = ord.to_double();
  if (std::isinf(p) && v.numel() == 0) {
    // As torch: an empty slice has no max; reducing only non-empty dims is fine.
    std::vector<bool> mask = dim_mask(dim, v.dim(), "linalg.vector_norm");
    bool empty_slice = v.dim() == 0;
    for (int64_t d = 0; d < v.dim(); ++d) empty_slice = empty_slice || (mask[d] && v.sizes()[d] == 0);
    KILN_CHECK(!empty_slice, "linalg.vector_norm cannot compute the ", ord_str(p),
               " norm on an empty tensor because the operation does not have an identity");
  }
  if (p == -std::numeric_limits<double>::infinity()) return amin(abs(v), dim, keepdim);
  return kiln::norm(v, p, dim, keepdim);
}

Tensor matrix_norm(const Tensor& A, const std::string& ord, IntArrayRef dim, bool keepdim, std::optional<DType> dtype) {
  check_norm_dtype("matrix_norm", A, dtype);
  KILN_CHECK(ord == "fro" || ord == "nuc", "linalg.matrix_norm: Order ", ord, " not supported.");
  auto [d0, d1] = matrix_dims(A, dim);
  Tensor X = dtype ? A.to(*dtype) : A;
  if (ord == "fro") return vector_norm(X, 2, {d0, d1}, keepdim);
  return spectral(X, d0, d1, keepdim, "nuc");
}

Tensor matrix_norm(const Tensor& A, const Scalar& ord, IntArrayRef dim, bool keepdim, std::optional<DType> dtype) {
  check_norm_dtype("matrix_norm", A, dtype);
  const double p = ord.to_double(), a = std::abs(p);
  KILN_CHECK(a == 1 || a == 2 || std::isinf(a), "linalg.matrix_norm: Order ", ord_str(p), " not supported.");
  auto [d0, d1] = matrix_dims(A, dim);
  Tensor X = dtype ? A.to(*dtype) : A;
  if (a == 2) return spectral(X, d0, d1, keepdim, p > 0 ? "max" : "min");
  // 1: the largest absolute column sum (over d0, then the max over d1); inf: rows, the dims swapped.
  if (std::isinf(a)) std::swap(d0, d1);
  Tensor s = abs(X).sum({d0}, /*keepdim=*/true);
  Tensor r = p > 0 ? amax(s, {d1}, true) : amin(s, {d1}, true);
  return finish(r, d0, d1, keepdim);
}

Tensor norm(const Tensor& A, std::optional<Scalar> ord, std::optional<std::vector<int64_t>> dim, bool keepdim,
            std::optional<DType> dtype) {
  if (dim) {
    KILN_CHECK(dim->size() == 1 || dim->size() == 2,
               "linalg.norm: If dim is specified, it must be of length 1 or 2. Got ", shape_str(*dim));
    if (dim->size() == 1) return vector_norm(A, ord.value_or(2), *dim, keepdim, dtype);
    return ord ? matrix_norm(A, *ord, *dim, keepdim, dtype) : matrix_norm(A, "fro", *dim, keepdim, dtype);
  }
  if (!ord) {
    check_norm_dtype("norm", A, dtype);
    return vector_norm(A, 2, {}, keepdim, dtype);
  }
  KILN_CHECK(A.dim() == 1 || A.dim() == 2,
             "linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got ", A.dim(), "D.");
  if (A.dim() == 1) return vector_norm(A, *ord, {0}, keepdim, dtype);
  return matrix_norm(A, *ord, {-2, -1}, keepdim, dtype);
}

Tensor norm(const Tensor& A, const std::string& ord, std::optional<std::vector<int64_t>> dim, bool keepdim,
            std::optional<DType> dtype) {
  if (dim) {
    KILN_CHECK(dim->size() == 2, "linalg.norm: If dim is specified, it must be of length 1 or 2. Got ",
               shape_str(*dim));
    return matrix_norm(A, ord, *dim, keepdim, dtype);
  }
  KILN_CHECK(A.dim() == 1 || A.dim() == 2,
             "linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got ", A.dim(), "D.");
  return matrix_norm(A, ord, {-2, -1}, keepdim, dtype);
}

}  // namespace kiln::linalg
