// kiln::linalg (det, slogdet, inv, solve, cholesky, qr, svd, svdvals, eigh, eigvalsh, lstsq, norms) and
// mv/addmv/addr/vdot against PyTorch 1.13: values and gradients from tests/fixtures/torch_linalg.safetensors
// (written by tests/fixtures/make_torch_linalg_fixture.py), torch's errors, and finite-difference
// gradchecks in float64 (first and second order). The decompositions need LAPACK: built without it,
// those tests are skipped and the functions must throw "not supported".
//
// Singular vectors, eigenvectors and Q are compared after giving each column the sign of torch's
// (LAPACK may flip any of them); gradients are of gauge-invariant losses, as in the fixture.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "tests/unit/expect_error.h"
#include "tests/unit/torch_fixture.h"

namespace kiln {
namespace {

namespace LA = kiln::linalg;
using kiln::testing::expect_error;
constexpr double kInf = std::numeric_limits<double>::infinity();

#define SKIP_WITHOUT_LAPACK() \
  if (!LA::has_lapack()) GTEST_SKIP() << "kiln was built without LAPACK"

using kiln::testing::Outs;
using kiln::testing::operator+;

const kiln::testing::TorchCases fixture("torch_linalg.safetensors");

// Same shape and dtype; values within rtol of the largest |torch value| (LAPACK's rounding differs
// from build to build, and small entries of a matrix carry the error of its large ones).
void expect_close(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.sizes().vec(), want.sizes().vec()) << what << " shape";
  ASSERT_EQ(got.dtype(), want.dtype()) << what << " dtype";
  const double rtol = want.dtype() == kFloat32 ? 2e-5 : 1e-9;
  auto g = got.to_vector<double>(), w = want.to_vector<double>();
  double scale = 1;
  for (double v : w)
    if (std::isfinite(v)) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < g.size(); ++i) {
    bool ok = (std::isnan(g[i]) && std::isnan(w[i])) || g[i] == w[i] || std::abs(g[i] - w[i]) <= rtol * scale;
    EXPECT_TRUE(ok) << what << " element " << i << ": kiln " << g[i] << ", torch " << w[i];
  }
}

void check(const std::string& name, const std::function<Outs()>& f) {
  fixture.check(name, f, [](const Outs& got, size_t k, const Tensor& want) {
    expect_close(got[k], want, kiln::testing::output_name(k));
  });
}

// got's columns (dim -2 holds the rows) with the signs of want's.
Tensor align_cols(const Tensor& got, const Tensor& want) {
  if (got.numel() == 0) return got;
  Tensor s = sign(mul(got, want.to(got.dtype())).sum({-2}, true));
  return mul(got, where(eq(s, 0), ones_like(s), s));
}
Tensor align_rows(const Tensor& got, const Tensor& want) { return align_cols(got.mT(), want.mT()).mT(); }

Outs tup(const std::tuple<Tensor, Tensor>& t) { return {std::get<0>(t), std::get<1>(t)}; }
Outs tup(const std::tuple<Tensor, Tensor, Tensor>& t) { return {std::get<0>(t), std::get<1>(t), std::get<2>(t)}; }
Outs tup(const std::tuple<Tensor, Tensor, Tensor, Tensor>& t) {
  return {std::get<0>(t), std::get<1>(t), std::get<2>(t), std::get<3>(t)};
}
// The gradients of loss(xs), as the fixture's grad().
Outs grads(const std::function<Tensor(const Outs&)>& loss, Outs xs) {
  for (auto& x : xs) x = x.detach().clone().requires_grad_(true);
  loss(xs).backward();
  Outs g;
  for (auto& x : xs) g.push_back(x.grad());
  return g;
}

// Finite differences in float64, first and second order (the backward formulas are kiln ops).
#define gradcheck2(...)        \
  do {                         \
    SCOPED_TRACE(__LINE__);    \
    gradcheck_fd(__VA_ARGS__); \
  } while (0)
void gradcheck_fd(const std::function<Tensor(const Outs&)>& f, Outs xs, bool twice = true) {
  for (auto& x : xs) x = x.detach().clone().requires_grad_(true);
  GradcheckOptions o;
  o.check_backward_twice = twice;
  o.raise_exception = false;
  EXPECT_TRUE(gradcheck([&](const Outs& in) { return Outs{f(in)}; }, xs, o));
}

TEST(TorchLinalg, DetSlogdet) {
  SKIP_WITHOUT_LAPACK();
  check("det", [] {
    Tensor a = fixture.in("det"), s = fixture.in("det", 1), a32 = fixture.in("det", 2);
    return Outs{LA::det(a),      LA::det(a.select(0, 0)),    LA::det(s),
                LA::det(a.mT()), LA::det(a.narrow(0, 0, 0)), LA::det(zeros({0, 0}, kFloat64)),
                LA::det(a32)} +
           tup(LA::slogdet(a)) + tup(LA::slogdet(s)) + tup(LA::slogdet(a32));
  });
  check("det_grad", [] {
    Tensor a = fixture.in("det_grad");
    return grads([](const Outs& x) { return LA::det(x[0]).square().sum(); }, {a}) +
           grads([](const Outs& x) { return std::get<1>(LA::slogdet(x[0])).sum(); }, {a});
  });
  // A singular matrix of rank n - 1: det's gradient is its cofactor matrix (torch 1.13 gives 0).
  Tensor s = tensor<double>({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  Tensor g = grads([](const Outs& x) { return LA::det(x[0]); }, {s})[0];
  expect_close(g, tensor<double>({-3, 6, -3, 6, -12, 6, -3, 6, -3}, {3, 3}), "det's gradient at a singular matrix");
  // Rank n - 2: all cofactors vanish.
  Tensor z =
      grads([](const Outs& x) { return LA::det(x[0]); }, {tensor<double>({1, 2, 3, 2, 4, 6, 3, 6, 9}, {3, 3})})[0];
  EXPECT_LT(z.abs().max().item<double>(), 1e-12);
  gradcheck2([](const Outs& x) { return LA::det(x[0]); }, {s}, false);
}

TEST(TorchLinalg, Inv) {
  SKIP_WITHOUT_LAPACK();
  check("inv", [] {
    Tensor a = fixture.in("inv"), a32 = fixture.in("inv", 1);
    return Outs{LA::inv(a), LA::inv(a.mT()), LA::inv(a.narrow(0, 0, 0)), LA::inv(a32)};
  });
  check("inv_grad", [] {
    Tensor w = fixture.in("inv_grad", 1);
    return grads([&](const Outs& x) { return (LA::inv(x[0]) * w).sum(); }, {fixture.in("inv_grad")});
  });
}

TEST(TorchLinalg, Solve) {
  SKIP_WITHOUT_LAPACK();
  check("solve", [] {
    Tensor a = fixture.in("solve"), b = fixture.in("solve", 1), v = fixture.in("solve", 2),
           a32 = fixture.in("solve", 3);
    return Outs{LA::solve(a, b),
                LA::solve(a, v),
                LA::solve(a, v.select(0, 0)),
                LA::solve(a.select(0, 0), b),
                LA::solve(a, b.mT(), /*left=*/false),
                LA::solve(a.narrow(0, 0, 0), b.narrow(0, 0, 0)),
                LA::solve(a32, b.to(kFloat32))};
  });
  check("solve_broadcast",
        [] { return Outs{LA::solve(fixture.in("solve_broadcast"), fixture.in("solve_broadcast", 1))}; });
  check("solve_grad", [] {
    Tensor a = fixture.in("solve_grad"), b = fixture.in("solve_grad", 1), v = fixture.in("solve_grad", 2);
    return grads([](const Outs& x) { return LA::solve(x[0], x[1]).square().sum(); }, {a, b}) +
           grads([](const Outs& x) { return LA::solve(x[0], x[1], false).square().sum(); }, {a, b.mT()}) +
           grads([](const Outs& x) { return LA::solve(x[0], x[1]).sum(); }, {a, v});
  });
}

TEST(TorchLinalg, Cholesky) {
  SKIP_WITHOUT_LAPACK();
  check("cholesky", [] {
    Tensor s = fixture.in("cholesky"), s32 = fixture.in("cholesky", 1);
    return Outs{LA::cholesky(s), LA::cholesky(s, true), LA::cholesky(s.narrow(0, 0, 0)), LA::cholesky(s32)};
  });
  check("cholesky_grad", [] {
    Tensor s = fixture.in("cholesky_grad"), w = fixture.in("cholesky_grad", 1);
    return grads([&](const Outs& x) { return (LA::cholesky(x[0]) * w).sum(); }, {s}) +
           grads([&](const Outs& x) { return (LA::cholesky(x[0], true) * w).sum(); }, {s});
  });
}

// (Q, R) with Q's columns (and R's rows) signed as torch's.
Outs qr_aligned(const Tensor& A, const std::string& mode, const std::string& name, size_t k) {
  auto [Q, R] = LA::qr(A, mode);
  if (mode == "r") return {R};
  Tensor Qa = align_cols(Q, fixture.out(name, k));
  Tensor s = sign(mul(Q, fixture.out(name, k).to(Q.dtype())).sum({-2}, false));  // the flips, to apply to R's rows
  const int64_t kk = std::min(R.sizes()[R.dim() - 2], s.sizes().back());
  Tensor Ra = R;
  if (R.numel() > 0)
    Ra = cat({R.narrow(-2, 0, kk) * s.narrow(-1, 0, kk).unsqueeze(-1), R.narrow(-2, kk, R.sizes()[R.dim() - 2] - kk)},
             -2);
  return {Qa, Ra};
}

// QR with R's diagonal positive (the fixture's canon()).
std::pair<Tensor, Tensor> canon(const Tensor& Q, const Tensor& R) {
  const int64_t k = std::min(R.sizes()[R.dim() - 2], R.sizes()[R.dim() - 1]);
  Tensor sg = sign(diagonal(R, 0, -2, -1).narrow(-1, 0, k)).detach();
  return {Q.narrow(-1, 0, k) * sg.unsqueeze(-2), R.narrow(-2, 0, k) * sg.unsqueeze(-1)};
}

TEST(TorchLinalg, Qr) {
  SKIP_WITHOUT_LAPACK();
  check("qr", [] {
    Tensor t = fixture.in("qr"), w = fixture.in("qr", 1), s = fixture.in("qr", 2);
    return qr_aligned(t, "reduced", "qr", 0) + qr_aligned(t, "complete", "qr", 2) + qr_aligned(t, "r", "qr", 4) +
           qr_aligned(w, "reduced", "qr", 5) + qr_aligned(w, "complete", "qr", 7) + qr_aligned(s, "reduced", "qr", 9) +
           qr_aligned(t.to(kFloat32), "reduced", "qr", 11) + qr_aligned(t.narrow(0, 0, 0), "reduced", "qr", 13);
  });
  EXPECT_EQ(std::get<0>(LA::qr(fixture.in("qr"), "r")).sizes().vec(), std::vector<int64_t>{0});
  check("qr_grad", [] {
    Tensor t = fixture.in("qr_grad"), w = fixture.in("qr_grad", 1), s = fixture.in("qr_grad", 2),
           wq = fixture.in("qr_grad", 3), wr = fixture.in("qr_grad", 4);
    auto loss = [&](const std::string& mode) {
      return [&, mode](const Outs& x) {
        auto [Q0, R0] = LA::qr(x[0], mode);
        auto [q, r] = canon(Q0, R0);
        auto crop = [](const Tensor& W, const Tensor& like) {
          return W.narrow(0, 0, like.sizes()[like.dim() - 2]).narrow(1, 0, like.sizes()[like.dim() - 1]);
        };
        return (q * crop(wq, q)).sum() + (r * crop(wr, r)).sum();
      };
    };
    return grads(loss("reduced"), {t}) + grads(loss("reduced"), {w}) + grads(loss("complete"), {s});
  });
}

Outs svd_aligned(const Tensor& A, bool full, const std::string& name, size_t k) {
  auto [U, S, Vh] = LA::svd(A, full);
  return {align_cols(U, fixture.out(name, k)), S, align_rows(Vh, fixture.out(name, k + 2))};
}

TEST(TorchLinalg, Svd) {
  SKIP_WITHOUT_LAPACK();
  check("svd", [] {
    Tensor t = fixture.in("svd"), w = fixture.in("svd", 1);
    return svd_aligned(t, true, "svd", 0) + svd_aligned(t, false, "svd", 3) + svd_aligned(w, true, "svd", 6) +
           svd_aligned(w, false, "svd", 9) + svd_aligned(t.to(kFloat32), false, "svd", 12) +
           Outs{LA::svdvals(t), LA::svdvals(w), LA::svdvals(t.to(kFloat32))} +
           svd_aligned(t.narrow(0, 0, 0), true, "svd", 18) + svd_aligned(zeros({0, 3}, kFloat64), true, "svd", 21) +
           Outs{LA::svdvals(t.narrow(0, 0, 0))};
  });
  // The factors rebuild A.
  Tensor t = fixture.in("svd");
  auto [U, S, Vh] = LA::svd(t, false);
  expect_close(matmul(U * S.unsqueeze(-2), Vh), t, "U diag(S) Vh");
  check("svd_grad", [] {
    Tensor t = fixture.in("svd_grad"), w = fixture.in("svd_grad", 1), w1 = fixture.in("svd_grad", 2),
           w2 = fixture.in("svd_grad", 3), w3 = fixture.in("svd_grad", 4);
    auto loss = [&](bool full) {
      return [&, full](const Outs& x) {
        auto [u0, s, vh0] = LA::svd(x[0], full);
        const int64_t k = s.sizes().back(), m = x[0].sizes()[x[0].dim() - 2], n = x[0].sizes().back();
        Tensor u = u0.narrow(-1, 0, k), vh = vh0.narrow(-2, 0, k);
        return (matmul(u * s.pow(3).unsqueeze(-2), vh) * w1.narrow(0, 0, m).narrow(1, 0, n)).sum() +
               (matmul(u, u.mT()) * w2.narrow(0, 0, m).narrow(1, 0, m)).sum() +
               (matmul(vh.mT(), vh) * w3.narrow(0, 0, n).narrow(1, 0, n)).sum() + s.sum();
      };
    };
    return grads(loss(false), {t}) + grads(loss(true), {w}) +
           grads([](const Outs& x) { return LA::svdvals(x[0]).square().sum(); }, {t}) + grads(loss(false), {w.mT()});
  });
}

TEST(TorchLinalg, Eigh) {
  SKIP_WITHOUT_LAPACK();
  check("eigh", [] {
    Tensor h = fixture.in("eigh"), hs = fixture.in("eigh", 1);
    auto eig = [](const Tensor& A, const std::string& uplo, size_t k) {
      auto [L, V] = LA::eigh(A, uplo);
      return Outs{L, align_cols(V, fixture.out("eigh", k + 1))};
    };
    return eig(hs, "L", 0) + eig(h, "L", 2) + eig(h, "U", 4) + Outs{LA::eigvalsh(h), LA::eigvalsh(h, "U")} +
           eig(hs.to(kFloat32), "L", 8) + eig(hs.narrow(0, 0, 0), "L", 10);
  });
  check("eigh_grad", [] {
    Tensor hs = fixture.in("eigh_grad"), w = fixture.in("eigh_grad", 1);
    auto loss = [&](const std::string& uplo) {
      return [&, uplo](const Outs& x) {
        auto [l, v] = LA::eigh(x[0], uplo);
        return (matmul(v * l.pow(3).unsqueeze(-2), v.mT()) * w).sum() + (l * arange(4, kFloat64)).sum();
      };
    };
    return grads(loss("L"), {hs}) + grads(loss("U"), {hs}) +
           grads([](const Outs& x) { return LA::eigvalsh(x[0]).pow(3).sum(); }, {hs});
  });
}

TEST(TorchLinalg, Lstsq) {
  SKIP_WITHOUT_LAPACK();
  check("lstsq", [] {
    Tensor a = fixture.in("lstsq"), b = fixture.in("lstsq", 1);
    return tup(LA::lstsq(a, b)) + tup(LA::lstsq(a, b, std::nullopt, "gels")) +
           tup(LA::lstsq(a, b, std::nullopt, "gelsd")) + tup(LA::lstsq(a, b, std::nullopt, "gelss")) +
           tup(LA::lstsq(a, b.select(-1, 0))) + tup(LA::lstsq(a.select(0, 0), b.select(0, 0))) +
           tup(LA::lstsq(a.to(kFloat32), b.to(kFloat32), std::nullopt, "gelsd"));
  });
  check("lstsq_wide", [] {
    Tensor a = fixture.in("lstsq_wide"), b = fixture.in("lstsq_wide", 1);
    return tup(LA::lstsq(a, b, std::nullopt, "gelsd")) + tup(LA::lstsq(a, b, std::nullopt, "gelsy"));
  });
  check("lstsq_grad", [] {
    Tensor a = fixture.in("lstsq_grad"), b = fixture.in("lstsq_grad", 1), w = fixture.in("lstsq_grad", 2),
           bw = fixture.in("lstsq_grad", 3);
    return grads([](const Outs& x) { return std::get<0>(LA::lstsq(x[0], x[1])).square().sum(); }, {a, b}) +
           grads([&](const Outs& x) { return (std::get<0>(LA::lstsq(x[0], x[1])) * bw).sum(); },
                 {w, b.select(0, 0).narrow(0, 0, 3)});
  });
}

TEST(TorchLinalg, EmptyAndNaN) {
  SKIP_WITHOUT_LAPACK();
  check("empty", [] {
    Tensor z = fixture.in("empty"), n = fixture.in("empty", 1), e = z.narrow(0, 0, 0);
    return Outs{LA::inv(e), LA::det(e), LA::cholesky(e)} + tup(LA::qr(z)) + tup(LA::qr(z.mT(), "complete")) +
           tup(LA::svd(z, false)) + tup(LA::svd(z)) + tup(LA::eigh(e)) + tup(LA::lstsq(z, ones({3, 2}, kFloat64))) +
           tup(LA::lstsq(z.mT(), zeros({0, 2}, kFloat64), std::nullopt, "gelsd")) +
           Outs{LA::solve(e, zeros({0, 2}, kFloat64)), LA::inv(n), LA::det(n), LA::solve(n, ones({2}, kFloat64))};
  });
}

TEST(TorchLinalg, Norms) {
  SKIP_WITHOUT_LAPACK();  // nuc and 2 need svdvals
  check("vector_norm", [] {
    Tensor x = fixture.in("vector_norm");
    return Outs{LA::vector_norm(x),
                LA::vector_norm(x, 1),
                LA::vector_norm(x, kInf),
                LA::vector_norm(x, -kInf),
                LA::vector_norm(x, 0),
                LA::vector_norm(x, 3, {0, 2}),
                LA::vector_norm(x, 2, {-1}, true),
                LA::vector_norm(x, 0.5, {1}),
                LA::vector_norm(x, 2, {}, false, kFloat64),
                LA::vector_norm(x.narrow(0, 0, 0)),
                LA::vector_norm(x, kInf, {1, 2}),
                LA::vector_norm(tensor(Scalar(-2.5)))};
  });
  check("matrix_norm", [] {
    Tensor x = fixture.in("matrix_norm");
    Outs r;
    r.push_back(LA::matrix_norm(x, "fro"));
    r.push_back(LA::matrix_norm(x, "nuc"));
    for (double o : {kInf, -kInf, 1.0, -1.0, 2.0, -2.0}) r.push_back(LA::matrix_norm(x, o));
    r.push_back(LA::matrix_norm(x, "fro", {2, 0}, true));
    r.push_back(LA::matrix_norm(x, "nuc", {2, 0}, true));
    for (double o : {kInf, -1.0, 2.0}) r.push_back(LA::matrix_norm(x, o, {2, 0}, true));
    r.push_back(LA::matrix_norm(x, "fro", {-2, -1}, false, kFloat64));
    return r;
  });
  check("norm", [] {
    Tensor x = fixture.in("norm"), v = fixture.in("norm", 1);
    return Outs{LA::norm(x),
                LA::norm(x, std::nullopt, std::vector<int64_t>{0, 1}),
                LA::norm(x, std::nullopt, std::vector<int64_t>{2}),
                LA::norm(x.select(0, 0), 2),
                LA::norm(x.select(0, 0), "nuc"),
                LA::norm(v, kInf),
                LA::norm(v),
                LA::norm(x, 1, std::vector<int64_t>{1, 2}, true),
                LA::norm(x, std::nullopt, std::nullopt, true),
                LA::norm(x, "fro", std::vector<int64_t>{0, 2})};
  });
  check("norm_grad", [] {
    Tensor x = fixture.in("norm_grad");
    return grads([](const Outs& y) { return LA::vector_norm(y[0], 3, {1}).sum() + LA::vector_norm(y[0], kInf).sum(); },
                 {x}) +
           grads(
               [](const Outs& y) {
                 return LA::matrix_norm(y[0], "nuc").sum() + LA::matrix_norm(y[0], 2).sum() +
                        LA::matrix_norm(y[0], -1).sum();
               },
               {x}) +
           grads([](const Outs& y) { return LA::vector_norm(y[0]); }, {x});
  });
}

TEST(TorchLinalg, MvAddmvAddrVdot) {
  check("mv", [] {
    Tensor m = fixture.in("mv"), a = fixture.in("mv", 1), b = fixture.in("mv", 2), i = fixture.in("mv", 3);
    Tensor nan2 = tensor<float>({NAN, 1.0f});
    Tensor mnan = m.clone();
    mnan.diagonal().fill_(NAN);
    return Outs{mv(m, a),
                addmv(b, m, a),
                addmv(b, m, a, 0.5, 2),
                addmv(tensor(Scalar(1.5f)), m, a),
                addmv(nan2, m, a, 0),
                addr(m, b, a),
                addr(a, b, a, 2, -1),
                addr(mnan, b, a, 0),
                vdot(a, a),
                mv(i, tensor<int64_t>({1, -2, 3})),
                mv(m.t(), b)};
  });
  check("mv_grad", [] {
    Tensor m = fixture.in("mv_grad"), a = fixture.in("mv_grad", 1), b = fixture.in("mv_grad", 2);
    return grads([](const Outs& x) { return addmv(x[2], x[0], x[1], 0.5, 2).square().sum(); }, {m, a, b}) +
           grads([](const Outs& x) { return addr(x[0], x[2], x[1], 1, 3).square().sum(); }, {m, a, b}) +
           grads([](const Outs& x) { return vdot(x[0], x[0] * 2); }, {a});
  });
  expect_error([] { mv(ones({2, 3}), ones({2})); }, {"mv", "size mismatch"});
  expect_error([] { mv(ones({2, 3}), ones({3, 1})); }, {"mv", "vector + matrix @ vector expected"});
  expect_error([] { addmv(ones({3}), ones({2, 3}), ones({3})); }, {"addmv", "size mismatch"});
  expect_error([] { vdot(ones({2, 1}), ones({2})); }, "vdot: 1D tensors expected, but got 2D and 1D tensors");
  expect_error([] { vdot(ones({2}), ones({3})); }, {"vdot", "inconsistent tensor size"});
}

TEST(TorchLinalg, Errors) {
  SKIP_WITHOUT_LAPACK();
  Tensor sing = tensor<float>({1, 2, 2, 4}, {2, 2});
  expect_error([&] { LA::inv(sing); },
               "linalg.inv: The diagonal element 2 is zero, the inversion could not be completed because the input "
               "matrix is singular.");
  expect_error(
      [&] {
        LA::inv(stack({eye(2), sing}));
      },
      "linalg.inv: (Batch element 1): The diagonal element 2 is zero");
  expect_error([&] { LA::solve(sing, ones({2})); },
               "torch.linalg.solve: The solver failed because the input matrix is singular.");
  expect_error([&] { LA::cholesky(sing); },
               "linalg.cholesky: The factorization could not be completed because the input is not positive-definite "
               "(the leading minor of order 2 is not positive-definite).");
  expect_error([&] { LA::cholesky(stack({eye(2), sing})); }, "linalg.cholesky: (Batch element 1): The factorization");
  expect_error(
      [] {
        LA::inv(ones({2, 3}));
      },
      "linalg.inv: A must be batches of square matrices, but they are 2 by 3 matrices");
  expect_error([] { LA::det(ones({3})); }, "linalg.det: The input tensor A must have at least 2 dimensions.");
  expect_error(
      [] {
        LA::inv(ones({2, 2}, kInt64));
      },
      "linalg.inv: Expected a floating point or complex tensor as input. Got");
  expect_error([] { LA::solve(eye(2), ones({3})); },
               "linalg.solve: Incompatible shapes of A and B for the equation AX = B (2x2 and 3x1)");
  expect_error(
      [] {
        LA::solve(eye(2), ones({2, 2}, kFloat64));
      },
      "linalg.solve: Expected A and B to have the same dtype");
  expect_error([] { LA::qr(eye(2), "x"); }, "qr received unrecognized mode 'x'");
  expect_error([] { LA::eigh(eye(2), "X"); }, "Expected UPLO argument to be 'L' or 'U', but got X");
  expect_error(
      [] {
        LA::lstsq(eye(2), ones({3, 1}));
      },
      "torch.linalg.lstsq: input.size(-2) should match other.size(-2)");
  expect_error([] { LA::lstsq(eye(2), ones({2, 1}), std::nullopt, "foo"); }, "parameter `driver` should be one of");
  expect_error(
      [] {
        LA::svdvals(tensor<double>({NAN, 1, 1, 1}, {2, 2}));
      },
      "linalg.svd: The algorithm failed to converge because the input matrix contained non-finite values.");
  expect_error([] { LA::svd(ones({2})); }, "linalg.svd: The input tensor A must have at least 2 dimensions.");
  expect_error([] { LA::vector_norm(ones({2}, kInt64)); }, "linalg.vector_norm: Expected a floating point");
  expect_error([] { LA::matrix_norm(ones({2}), "fro"); },
               "linalg.matrix_norm: The input tensor A must have at least 2 dimensions.");
  expect_error([] { LA::matrix_norm(ones({2, 2}), 3); }, "linalg.matrix_norm: Order 3 not supported.");
  expect_error(
      [] {
        LA::matrix_norm(ones({2, 2}), "fro", {0, 0});
      },
      "linalg.matrix_norm: dims must be different. Got (0, 0)");
  expect_error(
      [] {
        LA::norm(ones({2, 2, 2}), 2);
      },
      "linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got 3D.");
  expect_error([] { LA::vector_norm(ones({0, 3}), kInf); }, "cannot compute the inf norm on an empty tensor");
  // Backward errors, as torch's.
  expect_error(
      [] {
        std::get<1>(LA::qr(randn({3, 2}).requires_grad_(true), "r")).sum().backward();
      },
      "The derivative of linalg.qr depends on Q, which is not computed when mode='r'.");
  expect_error(
      [] {
        std::get<1>(LA::qr(randn({3, 2}).requires_grad_(true), "complete")).sum().backward();
      },
      "The QR decomposition is not differentiable when mode='complete' and nrows > ncols.");
}

TEST(TorchLinalg, WithoutLapackThrows) {
  if (LA::has_lapack()) GTEST_SKIP() << "kiln was built with LAPACK";
  expect_error([] { LA::inv(eye(2)); }, "linalg.inv: not supported: kiln was built without LAPACK");
  expect_error([] { LA::svdvals(eye(2)); }, "linalg.svdvals: not supported: kiln was built without LAPACK");
}

TEST(TorchLinalg, Gradcheck) {
  SKIP_WITHOUT_LAPACK();
  manual_seed(1);
  Tensor A = randn({2, 3, 3}, kFloat64) + eye(3, std::nullopt, kFloat64) * 3;
  Tensor B = randn({2, 3, 2}, kFloat64);
  Tensor M = randn({4, 3}, kFloat64);
  Tensor Wd = randn({3, 5}, kFloat64);
  Tensor S = matmul(A, A.mT()) + eye(3, std::nullopt, kFloat64);
  gradcheck2([](const Outs& x) { return LA::det(x[0]); }, {A});
  gradcheck2([](const Outs& x) { return std::get<1>(LA::slogdet(x[0])); }, {A});
  gradcheck2([](const Outs& x) { return LA::inv(x[0]); }, {A});
  gradcheck2([](const Outs& x) { return LA::solve(x[0], x[1]); }, {A, B});
  gradcheck2([](const Outs& x) { return LA::solve(x[0], x[1], false); }, {A, B.mT()});
  // Symmetric inputs: the function of the whole matrix is then what torch differentiates.
  gradcheck2([](const Outs& x) { return LA::cholesky(mul(x[0] + x[0].mT(), 0.5)); }, {S});
  gradcheck2([](const Outs& x) { return LA::cholesky(mul(x[0] + x[0].mT(), 0.5), true); }, {S}, false);
  for (const Tensor& X : {M, Wd}) {
    gradcheck2(
        [](const Outs& x) {
          auto [Q, R] = LA::qr(x[0]);
          auto [q, r] = canon(Q, R);
          return cat({q.flatten(), r.flatten()});
        },
        {X}, false);
    gradcheck2(
        [](const Outs& x) {
          auto [U, s, Vh] = LA::svd(x[0], false);
          return cat({(matmul(U * s.pow(2).unsqueeze(-2), Vh)).flatten(), matmul(U, U.mT()).flatten(), s});
        },
        {X}, false);
    gradcheck2([](const Outs& x) { return LA::svdvals(x[0]); }, {X});
    gradcheck2(
        [](const Outs& x) {
          return std::get<0>(
              LA::lstsq(x[0].mT().matmul(x[0]) + eye(x[0].sizes()[1], std::nullopt, kFloat64), x[0].mT()));
        },
        {X}, false);
  }
  gradcheck2([](const Outs& x) { return std::get<0>(LA::lstsq(x[0], x[1])); }, {M, randn({4, 2}, kFloat64)});
  gradcheck2(
      [](const Outs& x) {
        auto [L, V] = LA::eigh(mul(x[0] + x[0].mT(), 0.5));
        return cat({L.flatten(), matmul(V * L.unsqueeze(-2).pow(3), V.mT()).flatten()});
      },
      {S}, false);
  gradcheck2([](const Outs& x) { return LA::matrix_norm(x[0], "nuc"); }, {M});
  gradcheck2([](const Outs& x) { return LA::vector_norm(x[0], 3, {1}); }, {M});
}

}  // namespace
}  // namespace kiln
