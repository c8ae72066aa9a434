// kiln::linalg's decompositions and solvers (torch.linalg): LAPACK kernels (ops/lapack_kernels.h)
// wrapped as custom autograd functions. Each backward is torch's formula written with kiln ops and
// kiln::linalg functions, so it is itself differentiable (create_graph, double backward).
#include <cmath>
#include <limits>

#include "kiln/autograd.h"
#include "kiln/linalg.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/pointwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "ops/lapack_kernels.h"
#include "ops/meta_util.h"

namespace kiln::linalg {
using Outs = std::vector<Tensor>;
using Ints = std::vector<int64_t>;

namespace {

int64_t rows(const Tensor& A) { return A.sizes()[A.dim() - 2]; }
int64_t cols(const Tensor& A) { return A.sizes()[A.dim() - 1]; }
Ints batch_of(const Tensor& A, int64_t core = 2) { return Ints(A.sizes().begin(), A.sizes().end() - core); }
int64_t numel_of(const Ints& s) {
  int64_t p = 1;
  for (int64_t v : s) p *= v;
  return p;
}
Ints with(Ints b, std::initializer_list<int64_t> tail) {
  b.insert(b.end(), tail);
  return b;
}

void check_float(const char* op, const Tensor& A) {
  KILN_CHECK(A.defined(), "linalg.", op, ": expected a defined tensor");
  KILN_CHECK(A.device().is_cpu(), "linalg.", op, ": only CPU tensors are supported, got a tensor on ", A.device());
  KILN_CHECK(A.dtype() == kFloat32 || A.dtype() == kFloat64, "linalg.", op,
             ": Expected a floating point or complex tensor as input. Got ", A.dtype());
}
void check_matrix(const char* op, const Tensor& A, bool square) {
  KILN_CHECK(A.defined() && A.dim() >= 2, "linalg.", op, ": The input tensor A must have at least 2 dimensions.");
  check_float(op, A);
  if (square)
    KILN_CHECK(rows(A) == cols(A), "linalg.", op, ": A must be batches of square matrices, but they are ", rows(A),
               " by ", cols(A), " matrices");
}

// A fresh column-major copy of A's matrices for LAPACK to overwrite: [B, cols, rows], contiguous.
Tensor colmajor(const Tensor& A) {
  const int64_t m = rows(A), n = cols(A);
  Ints b = batch_of(A);
  Tensor c = empty(with(b, {n, m}), A.dtype());
  c.copy_(A.mT());
  return c.view({numel_of(b), n, m});
}
// Column-major results [B, cols, rows] back as [*batch, rows, cols] (a transposed view).
Tensor from_colmajor(const Tensor& c, const Ints& batch) {
  return c.view(with(batch, {c.sizes()[1], c.sizes()[2]})).mT();
}

// LAPACK's info > 0 as torch reports it, "(Batch element i): " first for batched inputs.
template <class Msg>
void check_info(const char* op, const std::vector<int64_t>& info, bool batched, Msg msg) {
  for (size_t i = 0; i < info.size(); ++i)
    if (info[i] > 0) {
      std::string where = batched ? "(Batch element " + std::to_string(i) + "): " : "";
      KILN_FAIL(op, ": ", where, msg(info[i]));
    }
}

// gesdd's info as torch reports it.
void check_svd_info(const std::vector<int64_t>& info, bool batched) {
  for (int64_t i : info)
    KILN_CHECK(i != kLapackNonFinite,
               "linalg.svd: The algorithm failed to converge because the input matrix contained non-finite values.");
  check_info("linalg.svd", info, batched, [](int64_t i) {
    return "The algorithm failed to converge because the input matrix is ill-conditioned or has too many repeated "
           "singular values (error code: " +
           std::to_string(i) + ").";
  });
}

Tensor eye_like(int64_t n, const Tensor& like) { return eye(n, std::nullopt, like.dtype()); }

// Gradients from torch's materialised zeros: an output that was not used needs no term.
bool all_zero(const Tensor& g) { return !g.defined() || g.numel() == 0 || !any(ne(g, 0)).item<bool>(); }

std::vector<Tensor> custom(const char* name, const Outs& in, autograd::CustomForward f, autograd::CustomBackward b) {
  return autograd::apply_custom_function(name, in, std::move(f), std::move(b));
}

// B is a (batch of) vector(s) for A X = B (torch's linalg_solve_is_vector_rhs).
bool is_vector_rhs(const Tensor& A, const Tensor& B) {
  if (B.dim() == 1) return true;
  if (B.dim() != A.dim() - 1) return false;
  return B.sizes() == IntArrayRef(A.sizes().data(), A.dim() - 1);
}

// A [*a, n, n] and B [*b, n, k] expanded to their broadcast batch.
std::pair<Tensor, Tensor> broadcast_batch(const Tensor& A, const Tensor& B, const char* op) {
  Shape b =
      broadcast_shapes(IntArrayRef(A.sizes().data(), A.dim() - 2), IntArrayRef(B.sizes().data(), B.dim() - 2), op);
  Ints batch(b.begin(), b.end());
  return {A.expand(with(batch, {rows(A), cols(A)})), B.expand(with(batch, {rows(B), cols(B)}))};
}

// X with A X = B for broadcast A [*, n, n], B [*, n, k] (gesv).
Tensor solve_matrix(const Tensor& A, const Tensor& B) {
  return custom(
      "LinalgSolveBackward", {A, B},
      [](autograd::AutogradContext* ctx, const Outs& in) {
        Tensor a = colmajor(in[0]), b = colmajor(in[1]);
        auto info = lapack_kernels("solve").gesv("solve", a, b);
        check_info("torch.linalg.solve", info, false,
                   [](int64_t) { return "The solver failed because the input matrix is singular."; });
        Tensor X = from_colmajor(b, batch_of(in[1]));
        ctx->save_for_backward({in[0], X});
        return Outs{X};
      },
      [](autograd::AutogradContext* ctx, const Outs& g) {
        auto s = ctx->get_saved_variables();
        const Tensor &A = s[0], &X = s[1];
        Tensor gB = solve(A.mT(), g[0]);
        Tensor gA = ctx->needs_input_grad(0) ? neg(matmul(gB, X.mT())) : Tensor();
        return Outs{gA, gB};
      })[0];
}

// pinv(A) from the SVD, singular values below eps * max(m, n) * s_max dropped (torch.linalg.pinv's default).
Tensor pinv_of(const Tensor& A) {
  auto [U, S, Vh] = svd(A, false);
  const double eps =
      A.dtype() == kFloat32 ? std::numeric_limits<float>::epsilon() : std::numeric_limits<double>::epsilon();
  Tensor cut = mul(amax(S, {-1}, true), eps * double(std::max(rows(A), cols(A))));
  Tensor sinv = where(gt(S, cut), reciprocal(S), zeros_like(S));
  return matmul(Vh.mT() * sinv.unsqueeze(-2), U.mT());
}

// torch's pinv_backward: the VJP of pinv at A for the gradient G of pinv(A).
Tensor pinv_backward(const Tensor& G, const Tensor& P, const Tensor& A) {
  const Tensor Ph = P.mT(), Gh = G.mT();
  if (rows(A) <= cols(A)) {
    Tensor K = matmul(Gh, P), KPh = matmul(K, Ph);
    return neg(matmul(P, K).mT()) + KPh - matmul(matmul(A, P), KPh) + matmul(matmul(Ph, P), Gh - matmul(K, A));
  }
  Tensor K = matmul(P, Gh), PhK = matmul(Ph, K);
  return neg(matmul(K, P).mT()) + matmul(matmul(Gh - matmul(A, K), P), Ph) + PhK - matmul(matmul(PhK, P), A);
}

// The sign and diagonal of U of A's LU, batch-shaped ([*], [*, n]).
std::pair<Tensor, Tensor> lu_sign_diag(const char* op, const Tensor& A) {
  Tensor a = colmajor(A);
  const int64_t B = a.sizes()[0], n = cols(A);
  Tensor sign = empty({B}, A.dtype()), diag = empty({B, n}, A.dtype());
  lapack_kernels(op).lu_diag(op, a, sign, diag);
  Ints b = batch_of(A);
  return {sign.view(b), diag.view(with(b, {n}))};
}

// The cofactor matrix det(A) A^-T, also for singular A: from the SVD A = U S Vh it is
// det(U) det(Vh) U diag(prod_{j != i} s_j) Vh.
Tensor cofactor(const Tensor& A) {
  auto [U, S, Vh] = svd(A, false);
  const int64_t n = cols(A);
  Tensor prods;
  if (n == 0) return zeros_like(A);
  // prod_{j != i} s_j as products of the prefix and suffix (no division by a zero s_i).
  Tensor ones = ones_like(S.narrow(-1, 0, 1));
  Tensor pre = cat({ones, cumprod(S, -1).narrow(-1, 0, n - 1)}, -1);
  Tensor suf = cat({flip(cumprod(flip(S, {-1}), -1), {-1}).narrow(-1, 1, n - 1), ones}, -1);
  prods = pre * suf;
  auto det_of = [](const Tensor& Q) {  // +-1 for the orthogonal U and Vh
    auto [sign, diag] = lu_sign_diag("det", Q.detach());
    return sign * kiln::prod(diag, -1);
  };
  Tensor su = det_of(U), sv = det_of(Vh);
  return (su * sv).unsqueeze(-1).unsqueeze(-1) * matmul(U * prods.unsqueeze(-2), Vh);
}

// torch's svd_backward (U, Vh narrowed to the first min(m, n) vectors).
Tensor svd_backward(const Tensor& gU, const Tensor& gS, const Tensor& gVh, const Tensor& U, const Tensor& S,
                    const Tensor& Vh) {
  const int64_t m = rows(U), n = cols(Vh);
  const bool use_u = !all_zero(gU), use_v = !all_zero(gVh);
  if (!use_u && !use_v) return m >= n ? matmul(U, gS.unsqueeze(-1) * Vh) : matmul(U * gS.unsqueeze(-2), Vh);
  const int64_t k = S.sizes().back();
  auto skew = [](const Tensor& X) { return X - X.mT(); };
  Tensor S2 = S * S;
  Tensor E = S2.unsqueeze(-2) - S2.unsqueeze(-1) + eye_like(k, S);  // 1 on the diagonal: 0 / 1 there
  Tensor gA;
  if (use_u && use_v)
    gA = (skew(matmul(U.mT(), gU)) * S.unsqueeze(-2) + S.unsqueeze(-1) * skew(matmul(Vh, gVh.mT()))) / E;
  else if (use_u)
    gA = skew(matmul(U.mT(), gU)) * (S.unsqueeze(-2) / E);
  else
    gA = S.unsqueeze(-1) * (skew(matmul(Vh, gVh.mT())) / E);
  gA = gA + diag_embed(gS);
  if (m > n && use_u) {
    gA = matmul(U, gA);
    Tensor gUSinv = gU / S.unsqueeze(-2);
    gA = gA + gUSinv - matmul(U, matmul(U.mT(), gUSinv));
    return matmul(gA, Vh);
  }
  if (m < n && use_v) {
    gA = matmul(gA, Vh);
    Tensor SinvgVh = gVh / S.unsqueeze(-1);
    gA = gA + SinvgVh - matmul(matmul(SinvgVh, Vh.mT()), Vh);
    return matmul(U, gA);
  }
  return m >= n ? matmul(U, matmul(gA, Vh)) : matmul(matmul(U, gA), Vh);
}

// tril(M) + tril(M, -1)^T (the symmetric matrix with M's lower triangle).
Tensor copyltu(const Tensor& M) { return M.tril() + M.tril(-1).mT(); }

// The QR VJP for A [m, n] with m >= n: (gQ + Q copyltu(M)) R^-T, M = R gR^T - gQ^T Q.
Tensor qr_backward_tall(const Tensor& gQ, const Tensor& gR, const Tensor& Q, const Tensor& R) {
  Tensor M = matmul(R, gR.mT()) - matmul(gQ.mT(), Q);
  return solve(R.mT(), gQ + matmul(Q, copyltu(M)), /*left=*/false);
}

}  // namespace

namespace {
const LapackKernels*& lapack_table() {
  static const LapackKernels* k = nullptr;
  return k;
}
}  // namespace

void register_lapack_kernels(const LapackKernels* k) { lapack_table() = k; }
const LapackKernels& lapack_kernels(const char* op) {
  KILN_CHECK(lapack_table() != nullptr, "linalg.", op, ": not supported: kiln was built without LAPACK");
  return *lapack_table();
}

bool has_lapack() { return lapack_table() != nullptr; }

std::tuple<Tensor, Tensor> slogdet(const Tensor& A) {
  check_matrix("slogdet", A, true);
  auto r = custom(
      "LinalgSlogdetBackward", {A},
      [](autograd::AutogradContext* ctx, const Outs& in) {
        auto [sign, diag] = lu_sign_diag("slogdet", in[0]);
        Tensor s = sign * kiln::prod(kiln::sign(diag), -1);
        Tensor logabs = log(abs(diag)).sum({-1});
        ctx->save_for_backward({in[0]});
        ctx->mark_non_differentiable({s});
        return Outs{s, logabs};
      },
      [](autograd::AutogradContext* ctx, const Outs& g) {
        Tensor A = ctx->get_saved_variables()[0];
        return Outs{g[1].unsqueeze(-1).unsqueeze(-1) * inv(A).mT()};
      });
  return {r[0], r[1]};
}

Tensor det(const Tensor& A) {
  check_matrix("det", A, true);
  return custom(
      "LinalgDetBackward", {A},
      [](autograd::AutogradContext* ctx, const Outs& in) {
        auto [sign, diag] = lu_sign_diag("det", in[0]);
        Tensor d = sign * kiln::prod(diag, -1);
        ctx->save_for_backward({in[0], d});
        return Outs{d};
      },
      [](autograd::AutogradContext* ctx, const Outs& g) {
        auto s = ctx->get_saved_variables();
        const Tensor &A = s[0], &d = s[1];
        // det * A^-T where A is invertible; the SVD's cofactors where some matrix is singular.
        if (any(eq(d, 0)).item<bool>()) return Outs{g[0].unsqueeze(-1).unsqueeze(-1) * cofactor(A)};
        return Outs{(g[0] * d).unsqueeze(-1).unsqueeze(-1) * inv(A).mT()};
      })[0];
}

Tensor inv(const Tensor& A) {
  check_matrix("inv", A, true);
  return custom(
      "LinalgInvBackward", {A},
      [](autograd::AutogradContext* ctx, const Outs& in) {
        Tensor a = colmajor(in[0]);
        const int64_t n = cols(in[0]);
        Tensor b = eye_like(n, in[0]).expand({a.sizes()[0], n, n}).contiguous();
        auto info = lapack_kernels("inv").gesv("inv", a, b);
        check_info("linalg.inv", info, in[0].dim() > 2, [](int64_t i) {
          return "The diagonal element " + std::to_string(i) +
                 " is zero, the inversion could not be completed because the input matrix is singular.";
        });
        Tensor X = from_colmajor(b, batch_of(in[0]));
        ctx->save_for_backward({X});
        return Outs{X};
      },
      [](autograd::AutogradContext* ctx, const Outs& g) {
        Tensor Xt = ctx->get_saved_variables()[0].mT();
        return Outs{neg(matmul(Xt, matmul(g[0], Xt)))};
      })[0];
}

Tensor solve(const Tensor& A, const Tensor& B, bool left) {
  check_matrix("solve", A, true);
  KILN_CHECK(B.defined() && B.dim() >= 1, "linalg.solve: The input tensor B must have at least 1 dimension.");
  KILN_CHECK(A.dtype() == B.dtype(), "linalg.solve: Expected A and B to have the same dtype, but found A of type ",
             A.dtype(), " and B of type ", B.dtype(), " instead");
  const bool vector = is_vector_rhs(A, B);
  Tensor Bm = vector ? B.unsqueeze(-1) : (left ? B : B.mT());
  const Tensor Am = left ? A : A.mT();
  KILN_CHECK(rows(Bm) == rows(A), "linalg.solve: Incompatible shapes of A and B for the equation ",
             left ? "AX = B" : "XA = B", " (", rows(A), "x", cols(A), " and ", rows(Bm), "x", cols(Bm), ")");
  auto [Ab, Bb] = broadcast_batch(Am, Bm, "linalg.solve");
  Tensor X = solve_matrix(Ab, Bb);
  return vector ? X.squeeze(-1) : (left ? X : X.mT());
}

Tensor cholesky(const Tensor& A, bool upper) {
  check_matrix("cholesky", A, true);
  return custom(
      "LinalgCholeskyBackward", {A},
      [upper](autograd::AutogradContext* ctx, const Outs& in) {
        Tensor a = colmajor(in[0]);
        auto info = lapack_kernels("cholesky").potrf("cholesky", a, upper);
        check_info("linalg.cholesky", info, in[0].dim() > 2, [](int64_t i) {
          return "The factorization could not be completed because the input is not positive-definite (the leading "
                 "minor of order " +
                 std::to_string(i) + " is not positive-definite).";
        });
        Tensor L = from_colmajor(a, batch_of(in[0]));
        L = upper ? L.triu() : L.tril();
        ctx->save_for_backward({L});
        return Outs{L};
      },
      [upper](autograd::AutogradContext* ctx, const Outs& g) {
        // torch's cholesky_backward: L^-T Phi(L^T gL) L^-1, Phi taking the lower triangle, diagonal halved.
        Tensor L = ctx->get_saved_variables()[0];
        Tensor gL = g[0];
        if (upper) L = L.mT(), gL = gL.mT();
        Tensor gA = matmul(L.mT(), gL).tril();
        gA = mul(gA + gA.tril(-1).mT(), 0.5);
        gA = solve(L.mT(), gA);
        return Outs{solve(L, gA, /*left=*/false)};
      })[0];
}

std::tuple<Tensor, Tensor> qr(const Tensor& A, const std::string& mode) {
  KILN_CHECK(mode == "reduced" || mode == "complete" || mode == "r", "qr received unrecognized mode '", mode,
             "' but expected one of 'reduced' (default), 'r', or 'complete'");
  check_matrix("qr", A, false);
  auto r = custom(
      "LinalgQrBackward", {A},
      [mode](autograd::AutogradContext* ctx, const Outs& in) {
        const Tensor& X = in[0];
        const int64_t m = rows(X), n = cols(X), k = std::min(m, n);
        Ints b = batch_of(X);
        Tensor a = colmajor(X);
        const int64_t B = a.sizes()[0];
        Tensor tau = empty({B, k}, X.dtype());
        lapack_kernels("qr").geqrf("qr", a, tau);
        const bool complete = mode == "complete";
        Tensor R = from_colmajor(a, b).narrow(-2, 0, complete ? m : k).triu();
        Tensor Q;
        if (mode == "r") {
          Q = empty({0}, X.dtype());
        } else {
          const int64_t qcols = complete ? m : k;
          Tensor q = zeros({B, qcols, m}, X.dtype());
          const int64_t copy = std::min(qcols, n);
          q.narrow(1, 0, copy).copy_(a.narrow(1, 0, copy));
          lapack_kernels("qr").orgqr("qr", q, tau, k);
          Q = from_colmajor(q, b);
        }
        R = R.contiguous();
        ctx->save_for_backward({Q, R});
        ctx->saved_data = {mode == "r" ? 1.0 : 0.0, complete ? 1.0 : 0.0};
        if (mode == "r") ctx->mark_non_differentiable({Q});
        return Outs{Q, R};
      },
      [](autograd::AutogradContext* ctx, const Outs& g) {
        KILN_CHECK(ctx->saved_data[0] == 0,
                   "The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please use "
                   "linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr.");
        auto s = ctx->get_saved_variables();
        const Tensor &Q = s[0], &R = s[1];
        const int64_t m = rows(Q), n = cols(R);
        KILN_CHECK(ctx->saved_data[1] == 0 || m <= n,
                   "The QR decomposition is not differentiable when mode='complete' and nrows > ncols.");
        if (m >= n) return Outs{qr_backward_tall(g[0], g[1], Q, R)};
        // Wide A = [X | Y]: X = Q U is a square QR and Y = Q V, so V's gradient flows to Q and Y.
        Tensor U = R.narrow(-1, 0, m), V = R.narrow(-1, m, n - m);
        Tensor gU = g[1].narrow(-1, 0, m), gV = g[1].narrow(-1, m, n - m);
        Tensor Y = matmul(Q, V);
        Tensor gX = qr_backward_tall(g[0] + matmul(Y, gV.mT()), gU, Q, U);
        return Outs{cat({gX, matmul(Q, gV)}, -1)};
      });
  return {r[0], r[1]};
}

std::tuple<Tensor, Tensor, Tensor> svd(const Tensor& A, bool full_matrices) {
  check_matrix("svd", A, false);
  auto r = custom(
      "LinalgSvdBackward", {A},
      [full_matrices](autograd::AutogradContext* ctx, const Outs& in) {
        const Tensor& X = in[0];
        const int64_t m = rows(X), n = cols(X), k = std::min(m, n);
        Ints b = batch_of(X);
        Tensor a = colmajor(X);
        const int64_t B = a.sizes()[0];
        const int64_t ucols = full_matrices ? m : k, vtrows = full_matrices ? n : k;
        Tensor s = empty({B, k}, X.dtype()), u = empty({B, ucols, m}, X.dtype()), vt = empty({B, n, vtrows}, X.dtype());
        if (k == 0) {  // LAPACK leaves the vectors of an empty matrix unset: the full ones are the identity
          if (ucols > 0) u.copy_(eye_like(m, X).expand({B, m, m}));
          if (vtrows > 0) vt.copy_(eye_like(n, X).expand({B, n, n}));
        }
        auto info = lapack_kernels("svd").gesdd("svd", a, s, u, vt, true, full_matrices);
        check_svd_info(info, X.dim() > 2);
        Tensor U = from_colmajor(u, b), S = s.view(with(b, {k})), Vh = from_colmajor(vt, b);
        ctx->save_for_backward({U, S, Vh});
        return Outs{U, S, Vh};
      },
      [full_matrices](autograd::AutogradContext* ctx, const Outs& g) {
        auto s = ctx->get_saved_variables();
        Tensor U = s[0], S = s[1], Vh = s[2], gU = g[0], gVh = g[2];
        if (full_matrices) {
          const int64_t k = S.sizes().back();
          U = U.narrow(-1, 0, k), gU = gU.narrow(-1, 0, k);
          Vh = Vh.narrow(-2, 0, k), gVh = gVh.narrow(-2, 0, k);
        }
        return Outs{svd_backward(gU, g[1], gVh, U, S, Vh)};
      });
  return {r[0], r[1], r[2]};
}

Tensor svdvals(const Tensor& A) {
  check_matrix("svdvals", A, false);
  // The gradient needs the singular vectors; without it LAPACK skips them.
  if (is_grad_enabled() && A.requires_grad()) return std::get<1>(svd(A, false));
  const int64_t m = rows(A), n = cols(A), k = std::min(m, n);
  Tensor a = colmajor(A);
  Tensor s = empty({a.sizes()[0], k}, A.dtype());
  auto info = lapack_kernels("svdvals").gesdd("svdvals", a, s, Tensor(), Tensor(), false, false);
  check_svd_info(info, A.dim() > 2);
  return s.view(with(batch_of(A), {k}));
}

namespace {
bool parse_uplo(const std::string& UPLO) {
  KILN_CHECK(UPLO == "L" || UPLO == "U" || UPLO == "l" || UPLO == "u",
             "Expected UPLO argument to be 'L' or 'U', but got ", UPLO);
  return UPLO == "U" || UPLO == "u";
}
std::pair<Tensor, Tensor> syevd(const char* op, const Tensor& A, bool vectors, bool upper) {
  Tensor a = colmajor(A);
  const int64_t n = cols(A);
  Tensor w = empty({a.sizes()[0], n}, A.dtype());
  auto info = lapack_kernels(op).syevd(op, a, w, vectors, upper);
  check_info("linalg.eigh", info, A.dim() > 2, [](int64_t i) {
    return "The algorithm failed to converge because the input matrix is ill-conditioned or has too many repeated "
           "eigenvalues (error code: " +
           std::to_string(i) + ").";
  });
  Ints b = batch_of(A);
  return {w.view(with(b, {n})), vectors ? from_colmajor(a, b) : Tensor()};
}
}  // namespace

std::tuple<Tensor, Tensor> eigh(const Tensor& A, const std::string& UPLO) {
  const bool upper = parse_uplo(UPLO);
  check_matrix("eigh", A, true);
  auto r = custom(
      "LinalgEighBackward", {A},
      [upper](autograd::AutogradContext* ctx, const Outs& in) {
        auto [L, V] = syevd("eigh", in[0], true, upper);
        ctx->save_for_backward({L, V});
        return Outs{L, V};
      },
      [](autograd::AutogradContext* ctx, const Outs& g) {
        // torch's linalg_eig_backward (Hermitian): V (diag(gL) + skew(V^T gV) / E) V^T, E_ij = L_j - L_i.
        auto s = ctx->get_saved_variables();
        const Tensor &L = s[0], &V = s[1];
        if (all_zero(g[1])) return Outs{matmul(V * g[0].unsqueeze(-2), V.mT())};
        Tensor VhgV = matmul(V.mT(), g[1]);
        VhgV = mul(VhgV - VhgV.mT(), 0.5);
        Tensor E = L.unsqueeze(-2) - L.unsqueeze(-1) + eye_like(cols(V), L);
        Tensor gA = VhgV / E + diag_embed(g[0]);
        return Outs{matmul(V, matmul(gA, V.mT()))};
      });
  return {r[0], r[1]};
}

Tensor eigvalsh(const Tensor& A, const std::string& UPLO) {
  const bool upper = parse_uplo(UPLO);
  check_matrix("eigvalsh", A, true);
  if (is_grad_enabled() && A.requires_grad()) return std::get<0>(eigh(A, UPLO));
  return syevd("eigvalsh", A, false, upper).first;
}

std::tuple<Tensor, Tensor, Tensor, Tensor> lstsq(const Tensor& A, const Tensor& B, std::optional<double> rcond,
                                                 std::optional<std::string> driver) {
  check_matrix("lstsq", A, false);
  KILN_CHECK(B.defined() && B.dim() >= 1, "torch.linalg.lstsq: input `other` Tensor should be at least 1D.");
  check_float("lstsq", B);
  KILN_CHECK(A.dtype() == B.dtype(),
             "torch.linalg.lstsq: Expected input and other to have the same dtype, but got input's dtype ", A.dtype(),
             " and other's dtype ", B.dtype());
  const std::string drv = driver.value_or("gelsy");
  KILN_CHECK(drv == "gels" || drv == "gelsy" || drv == "gelsd" || drv == "gelss",
             "torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)");
  KILN_CHECK(
      A.dim() >= B.dim() && A.dim() - B.dim() <= 1,
      "torch.linalg.lstsq: input.dim() must be greater or equal to other.dim() and (input.dim() - other.dim()) <= 1");
  const bool vector = A.dim() - 1 == B.dim();  // lstsq's own rule, unlike solve's
  Tensor Bm = vector ? B.unsqueeze(-1) : B;
  KILN_CHECK(rows(A) == rows(Bm), "torch.linalg.lstsq: input.size(-2) should match other.size(-", vector ? "1" : "2",
             ")");
  const int64_t m = rows(A), n = cols(A);
  const double eps =
      A.dtype() == kFloat32 ? std::numeric_limits<float>::epsilon() : std::numeric_limits<double>::epsilon();
  const double rc = rcond.value_or(eps * double(std::max(m, n)));
  auto [Ab, Bb] = broadcast_batch(A, Bm, "torch.linalg.lstsq");
  auto r = custom(
      "LinalgLstsqBackward", {Ab, Bb},
      [drv, rc, m, n](autograd::AutogradContext* ctx, const Outs& in) {
        Ints batch = batch_of(in[0]);
        const int64_t k = cols(in[1]), ldb = std::max(m, n), Bn = numel_of(batch);
        Tensor a = colmajor(in[0]);
        Tensor b = zeros({Bn, k, ldb}, in[0].dtype());
        b.narrow(2, 0, m).copy_(colmajor(in[1]));
        Tensor rank = zeros({Bn}, kInt64);
        const bool has_s = drv == "gelsd" || drv == "gelss";
        Tensor sv = has_s ? empty({Bn, std::min(m, n)}, in[0].dtype()) : empty({0}, in[0].dtype());
        auto info = lapack_kernels("lstsq").gels("lstsq", drv, a, b, rc, rank, sv);
        check_info("torch.linalg.lstsq", info, in[0].dim() > 2, [](int64_t i) {
          return "The least squares solution could not be computed because the input matrix does not have full rank "
                 "(error code: " +
                 std::to_string(i) + ").";
        });
        Tensor bv = b.view(with(batch, {k, ldb}));
        Tensor X = bv.narrow(-1, 0, n).mT();
        Tensor res = empty({0}, in[0].dtype());
        if (m > n && drv != "gelsy") {
          bool full = drv == "gels" || Bn == 0 || all(eq(rank, n)).item<bool>();
          if (full) res = bv.narrow(-1, n, m - n).square().sum({-1});
        }
        Tensor rk = drv == "gels" ? empty({0}, kInt64) : rank.view(batch);
        Tensor s = has_s ? sv.view(with(batch, {std::min(m, n)})) : sv;
        ctx->save_for_backward({in[0], in[1]});
        ctx->mark_non_differentiable({res, rk, s});
        return Outs{X, res, rk, s};
      },
      [](autograd::AutogradContext* ctx, const Outs& g) {
        // torch's linalg_lstsq_backward: X = pinv(A) B.
        auto s = ctx->get_saved_variables();
        const Tensor &A = s[0], &B = s[1];
        Tensor P = pinv_of(A);
        Tensor gA = ctx->needs_input_grad(0) ? pinv_backward(matmul(g[0], B.mT()), P, A) : Tensor();
        Tensor gB = ctx->needs_input_grad(1) ? matmul(P.mT(), g[0]) : Tensor();
        return Outs{gA, gB};
      });
  Tensor X = vector ? r[0].squeeze(-1) : r[0];
  return {X, r[1], r[2], r[3]};
}

}  // namespace kiln::linalg
