// torch.linalg: decompositions, solvers and norms, batched over leading dims, float32/float64,
// differentiable. The decompositions run on LAPACK; a kiln built without it throws
// "linalg.<op>: not supported: kiln was built without LAPACK" (see has_lapack()).
#pragma once
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::linalg {

bool has_lapack();  // torch._C.has_lapack

Tensor det(const Tensor& A);
std::tuple<Tensor, Tensor> slogdet(const Tensor& A);  // (sign, logabsdet)
Tensor inv(const Tensor& A);
// X with A X = B (left) or X A = B; B is a (batch of) vector(s) when B.dim() == 1 or B.shape == A.shape[:-1].
Tensor solve(const Tensor& A, const Tensor& B, bool left = true);
Tensor cholesky(const Tensor& A, bool upper = false);
// mode "reduced", "complete" or "r" (Q is then an empty tensor).
std::tuple<Tensor, Tensor> qr(const Tensor& A, const std::string& mode = "reduced");  // (Q, R)
std::tuple<Tensor, Tensor, Tensor> svd(const Tensor& A, bool full_matrices = true);   // (U, S, Vh)
Tensor svdvals(const Tensor& A);
std::tuple<Tensor, Tensor> eigh(const Tensor& A, const std::string& UPLO = "L");  // (eigenvalues, eigenvectors)
Tensor eigvalsh(const Tensor& A, const std::string& UPLO = "L");
// (solution, residuals, rank, singular_values); driver "gelsy" (default), "gels", "gelsd" or "gelss";
// rcond defaults to eps(dtype) * max(m, n). As torch: residuals only when m > n, A is full rank and the
// driver is not gelsy; rank not for gels; singular_values only for gelsd and gelss (else empty).
std::tuple<Tensor, Tensor, Tensor, Tensor> lstsq(const Tensor& A, const Tensor& B,
                                                 std::optional<double> rcond = std::nullopt,
                                                 std::optional<std::string> driver = std::nullopt);

// Norms, compositions of kiln ops (svdvals for ord 2, -2 and "nuc"). dim {} is every dim.
Tensor vector_norm(const Tensor& x, const Scalar& ord = 2, IntArrayRef dim = {}, bool keepdim = false,
                   std::optional<DType> dtype = std::nullopt);
// ord "fro", "nuc", inf, -inf, 1, -1, 2, -2 over the two dims in dim.
Tensor matrix_norm(const Tensor& A, const std::string& ord = "fro", IntArrayRef dim = {-2, -1}, bool keepdim = false,
                   std::optional<DType> dtype = std::nullopt);
Tensor matrix_norm(const Tensor& A, const Scalar& ord, IntArrayRef dim = {-2, -1}, bool keepdim = false,
                   std::optional<DType> dtype = std::nullopt);
inline Tensor matrix_norm(const Tensor& A, const char* ord, IntArrayRef dim = {-2, -1}, bool keepdim = false,
                          std::optional<DType> dtype = std::nullopt) {
  return matrix_norm(A, std::string(ord), dim, keepdim, dtype);
}
// torch.linalg.norm: with ord, a vector norm over one dim and a matrix norm over two (dim absent: A must
// be 1-D or 2-D); without ord, the 2-norm of the flattened input or "fro" over two dims.
Tensor norm(const Tensor& A, std::optional<Scalar> ord = std::nullopt,
            std::optional<std::vector<int64_t>> dim = std::nullopt, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt);
Tensor norm(const Tensor& A, const std::string& ord, std::optional<std::vector<int64_t>> dim = std::nullopt,
            bool keepdim = false, std::optional<DType> dtype = std::nullopt);
inline Tensor norm(const Tensor& A, const char* ord, std::optional<std::vector<int64_t>> dim = std::nullopt,
                   bool keepdim = false, std::optional<DType> dtype = std::nullopt) {
  return norm(A, std::string(ord), std::move(dim), keepdim, dtype);
}

}  // namespace kiln::linalg
