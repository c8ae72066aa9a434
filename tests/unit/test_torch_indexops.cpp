// The indexing / data-dependent ops and special functions of issue 9 against PyTorch 1.13
// (tests/fixtures/torch_indexops.safetensors, written by
// tests/fixtures/make_torch_indexops_fixture.py; "<case>.in<i>" are its inputs, "<case>.out",
// "<case>.out1", ... torch's outputs) and the gamma family against mpmath in float64.
//
// Deliberate differences (see the fixture cases for what is compared):
//  - trigamma (polygamma(1, .)) is computed more accurately than torch's (which stops its
//    recurrence at 6 steps) and is +inf at the negative integers, where torch returns large
//    finite values from sin(pi x) != 0: compared with torch away from the poles only.
//  - torch 1.13's sorted unique mishandles NaN (zero counts); kiln treats each NaN as its own
//    value, last, as later torch versions do. sorted=false returns the sorted order too.
//  - histc leaves NaN out (as out-of-range values); torch 1.13 counts a NaN in bin 0.
//  - histc of bfloat16 counts exactly and rounds once; torch accumulates in bfloat16 (256 + 1
//    = 256), so the fixture keeps each bin's count small.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "tests/unit/torch_fixture.h"

namespace kiln {
namespace {

using kiln::testing::Outs;
using kiln::testing::operator+;
using kiln::testing::grads;

const kiln::testing::TorchCases fixture("torch_indexops.safetensors");

// |kiln - mpmath| <= tol (1 + |mpmath|) elementwise; returns the largest error in those units.
double max_error(const Tensor& got, const Tensor& want) {
  auto g = got.to_vector<double>(), w = want.to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isinf(w[i]) && g[i] == w[i]) continue;
    worst = std::max(worst, std::abs(g[i] - w[i]) / (std::abs(w[i]) > 1 ? std::abs(w[i]) : 1.0));
  }
  return worst;
}

TEST(TorchIndexops, GammaFamilyAgainstMpmath) {
  Tensor x = fixture.in("gamma_mpmath");
  struct Row {
    const char* what;
    Tensor got;
    double tol;
  };
  // Relative error (absolute below 1). lgamma is the C library's; digamma Cephes' series as
  // torch; polygamma(n >= 2) torch's Hurwitz zeta (Cephes), whose direct sum loses digits for
  // negative x near a pole (measured 4.4e-8 for n = 2, 8.3e-9 for n = 3 on these points).
  Row rows[] = {{"lgamma", lgamma(x), 1e-13},
                {"digamma", digamma(x), 1e-13},
                {"trigamma", polygamma(1, x), 1e-13},
                {"polygamma(2)", polygamma(2, x), 1e-7},
                {"polygamma(3)", polygamma(3, x), 2e-8}};
  for (size_t k = 0; k < std::size(rows); ++k) {
    double e = max_error(rows[k].got, fixture.out("gamma_mpmath", k));
    std::printf("[ measured ] %s float64: max relative error vs mpmath %.3g\n", rows[k].what, e);
    EXPECT_LE(e, rows[k].tol) << rows[k].what;
  }
}

TEST(TorchIndexops, GammaFamilyAgainstTorch) {
  fixture.check("gamma_torch64", [] {
    Tensor x = fixture.in("gamma_torch64");
    return Outs{lgamma(x), digamma(x), polygamma(0, x), polygamma(2, x), polygamma(3, x), polygamma(4, x)};
  });
  fixture.check("gamma_torch32", [] {
    Tensor x = fixture.in("gamma_torch32");
    return Outs{lgamma(x), digamma(x), polygamma(2, x), polygamma(3, x)};
  });
  fixture.check("trigamma_torch", [] {
    Tensor x = fixture.in("trigamma_torch");
    return Outs{polygamma(1, x), polygamma(1, x.to(kFloat32))};
  });
  fixture.check("gamma_int_input", [] {
    Tensor i = fixture.in("gamma_int_input");
    return Outs{lgamma(i), digamma(i), polygamma(2, i)};
  });
  fixture.check("gamma_grad", [] {
    Tensor x = fixture.in("gamma_grad");
    return grads([](const Outs& a) { return lgamma(a[0]); }, {x}) +
           grads([](const Outs& a) { return digamma(a[0]); }, {x}) +
           grads([](const Outs& a) { return polygamma(2, a[0]); }, {x}) +
           grads([](const Outs& a) { return polygamma(1, a[0]); }, {x});
  });
  fixture.check("gamma_grad32", [] {
    Tensor x = fixture.in("gamma_grad32");
    return grads([](const Outs& a) { return lgamma(a[0]); }, {x}) +
           grads([](const Outs& a) { return digamma(a[0]); }, {x});
  });
}

// Where torch's trigamma is a float artefact kiln returns the pole's +inf.
TEST(TorchIndexops, TrigammaPoles) {
  Tensor x = tensor<double>({0.0, -0.0, -1.0, -2.0, -50.0, -INFINITY});
  auto g = polygamma(1, x).to_vector<double>();
  for (size_t i = 0; i + 1 < g.size(); ++i) EXPECT_EQ(g[i], INFINITY) << i;
  EXPECT_TRUE(std::isnan(g.back()));
  auto h = polygamma(1, x.to(kFloat32)).to_vector<double>();
  for (size_t i = 0; i + 1 < h.size(); ++i) EXPECT_EQ(h[i], INFINITY) << i;
}

Outs uall(const Tensor& x, std::optional<int64_t> dim = std::nullopt) {
  auto [a, b, c] = unique(x, true, true, true, dim);
  return {a, b, c};
}
Outs call(const Tensor& x, std::optional<int64_t> dim = std::nullopt) {
  auto [a, b, c] = unique_consecutive(x, true, true, dim);
  return {a, b, c};
}

TEST(TorchIndexops, Unique) {
  fixture.check("unique", [] {
    Tensor x = fixture.in("unique"), f = fixture.in("unique", 1), b = fixture.in("unique", 2),
           z = fixture.in("unique", 3);
    auto [xc, unused, xcnt] = unique(x.t(), true, false, true);
    EXPECT_EQ(unused.numel(), 0) << "inverse not asked for: empty";
    return uall(x) + uall(x, 0) + uall(x, 1) + uall(x, -1) + uall(f) + uall(b) + uall(z) +
           Outs{std::get<0>(unique(f))} + Outs{xc, xcnt} + uall(x.narrow(0, 0, 0), 0) + uall(x.narrow(1, 0, 0), 1) +
           uall(f.narrow(0, 0, 0));
  });
  fixture.check("unique_3d", [] {
    Tensor x = fixture.in("unique_3d");
    return uall(x, 1) + uall(x.transpose(0, 2), 2);
  });
  fixture.check("unique_consecutive", [] {
    Tensor x = fixture.in("unique_consecutive"), f = fixture.in("unique_consecutive", 1),
           z = fixture.in("unique_consecutive", 2);
    return call(x) + call(x, 0) + call(x, 1) + call(f) + call(z) + Outs{std::get<0>(unique_consecutive(f))} +
           call(x.t(), 0) + call(f.narrow(0, 0, 0));
  });
}

TEST(TorchIndexops, UniqueNanAndUnsorted) {
  // Each NaN its own value, after the numbers (torch >= 2.0's answer).
  auto [v, inv, cnt] = unique(tensor<double>({NAN, 1.0, NAN, 1.0, 0.0}), true, true, true);
  auto vv = v.to_vector<double>();
  ASSERT_EQ(vv.size(), 4u);
  EXPECT_EQ(vv[0], 0.0);
  EXPECT_EQ(vv[1], 1.0);
  EXPECT_TRUE(std::isnan(vv[2]) && std::isnan(vv[3]));
  EXPECT_EQ(inv.to_vector<int64_t>(), (std::vector<int64_t>{2, 1, 3, 1, 0}));
  EXPECT_EQ(cnt.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 1, 1}));
  EXPECT_EQ(std::get<0>(unique(tensor<int64_t>({3, 1, 2, 1}), false)).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 2, 3}));
}

TEST(TorchIndexops, BincountHistc) {
  fixture.check("bincount", [] {
    Tensor x = fixture.in("bincount"), w = fixture.in("bincount", 1), wd = fixture.in("bincount", 2);
    return Outs{bincount(x),
                bincount(x, {}, 10),
                bincount(x, {}, 2),
                bincount(x, w),
                bincount(x, wd),
                bincount(x, arange(7)),
                bincount(x.narrow(0, 0, 0)),
                bincount(x.narrow(0, 0, 0), {}, 4),
                bincount(x.to(kInt32), w, 9)};
  });
  fixture.check("histc", [] {
    Tensor x = fixture.in("histc"), d = fixture.in("histc", 1), e = fixture.in("histc", 2);
    return Outs{histc(x),
                histc(x, 7),
                histc(x, 5, -1, 1),
                histc(x, 3, 2, 2),
                histc(d, 6, -3, 3),
                histc(x.narrow(0, 0, 0), 4),
                histc(e, 4),
                histc(tensor(Scalar(3.0)), 3),
                histc(x.view({5, 10}).t(), 4, -2, 2),
                histc(tensor<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}), 3, 0, 10),
                histc(tensor<float>({0.1f, 0.2f, 0.3f, 0.7f, 1.0f, -0.1f}), 10, 0, 1)};
  });
  fixture.check("histc_bf16",
                [] { return Outs{histc(fixture.in("histc_bf16").to(kBFloat16), 7, -1, 2).to(kFloat32)}; });
}

TEST(TorchIndexops, SearchsortedBucketize) {
  fixture.check("searchsorted", [] {
    Tensor s = fixture.in("searchsorted"), v = fixture.in("searchsorted", 1), s2 = fixture.in("searchsorted", 2),
           un = fixture.in("searchsorted", 3);
    Tensor q = tensor<float>({0, 3, 8, 2, 3, 4}).view({2, 3});
    return Outs{searchsorted(s, v),
                searchsorted(s, v, false, true),
                searchsorted(s, v, false, false, "right"),
                searchsorted(s, v, true),
                searchsorted(s, Scalar(3.0)),
                searchsorted(s, Scalar(int64_t(2)), false, true),
                searchsorted(s2, q),
                searchsorted(s2, tensor<float>({4, 4}).view({2, 1}), false, false, "right"),
                searchsorted(un, v, false, false, std::nullopt, argsort(un)),
                searchsorted(un, v, false, true, std::nullopt, argsort(un, -1, false, true)),
                searchsorted(s2.flip({1}), tensor<float>({4, 6, 3, 1}).view({2, 2}), false, false, std::nullopt,
                             tensor<int64_t>({3, 2, 1, 0, 2, 3, 0, 1}).view({2, 4})),
                searchsorted(tensor<int64_t>({1, 2, 3}), tensor<float>({1.5f, 2})),
                searchsorted(s, tensor<int64_t>({1, 5})),
                searchsorted(s.narrow(0, 0, 0), v),
                searchsorted(s, v.narrow(1, 0, 0)),
                searchsorted(tensor<float>({1, NAN}), tensor<float>({NAN, 5})),
                searchsorted(s, tensor(Scalar(2.0)).to(kFloat32)),
                searchsorted(s, v.t())};
  });
  fixture.check("bucketize", [] {
    Tensor v = fixture.in("bucketize"), b = fixture.in("bucketize", 1);
    return Outs{bucketize(v, b),
                bucketize(v, b, false, true),
                bucketize(v, b, true),
                bucketize(Scalar(3.0), b),
                bucketize(tensor<int64_t>({1, 2, 9}), b),
                bucketize(v.narrow(0, 0, 0), b)};
  });
}

TEST(TorchIndexops, TriIndices) {
  fixture.check("tri_indices", [] {
    return Outs{tril_indices(3, 4),     tril_indices(3, 4, 1),
                tril_indices(3, 4, -5), triu_indices(3, 4, -1),
                triu_indices(3, 4, 10), tril_indices(0, 4),
                triu_indices(4, 3),     tril_indices(5, 2, -2),
                triu_indices(2, 5, 3),  tril_indices(3, 3, 0, kInt32),
                triu_indices(1, 1)};
  });
}

Tensor strides_of(const Tensor& t) {
  std::vector<int64_t> s(t.strides().begin(), t.strides().end());
  s.push_back(t.storage_offset());
  return tensor<int64_t>(s);
}

TEST(TorchIndexops, BlockDiagCartesianProdUnfold) {
  fixture.check("block_diag", [] {
    Tensor a = fixture.in("block_diag"), z = fixture.in("block_diag", 1), v = fixture.in("block_diag", 2),
           e0 = fixture.in("block_diag", 3), e1 = fixture.in("block_diag", 4), i = fixture.in("block_diag", 5);
    return Outs{block_diag({a, z, v, e0, e1}), block_diag({i, a}),   block_diag({i}), block_diag({}),
                block_diag({a.t(), z}),        block_diag({z, i[0]})};
  });
  fixture.check("block_diag_grad", [] {
    return grads([](const Outs& x) { return block_diag(x); },
                 {fixture.in("block_diag_grad"), fixture.in("block_diag_grad", 1), fixture.in("block_diag_grad", 2)});
  });
  fixture.check("cartesian_prod", [] {
    Tensor a = fixture.in("cartesian_prod"), b = fixture.in("cartesian_prod", 1), c = fixture.in("cartesian_prod", 2),
           i = fixture.in("cartesian_prod", 3);
    return Outs{cartesian_prod({a, b, c}), cartesian_prod({a}), cartesian_prod({i, i}),
                cartesian_prod({a, b.narrow(0, 0, 0)})};
  });
  fixture.check("cartesian_prod_grad", [] {
    return grads([](const Outs& x) { return cartesian_prod(x); },
                 {fixture.in("cartesian_prod_grad"), fixture.in("cartesian_prod_grad", 1)});
  });
  fixture.check("unfold", [] {
    Tensor x = fixture.in("unfold"), z = fixture.in("unfold", 1);
    Tensor u = x.unfold(1, 2, 2);
    EXPECT_TRUE(u.is_alias_of(x)) << "unfold is a view";
    return Outs{u,
                strides_of(u),
                x.unfold(1, 3, 1),
                x.unfold(0, 2, 1),
                strides_of(x.unfold(0, 2, 1)),
                x.unfold(-1, 6, 1),
                x.unfold(1, 0, 4),
                x.t().unfold(1, 3, 1),
                strides_of(x.t().unfold(1, 3, 1)),
                x.slice(0, 1).slice(1, 2).unfold(0, 2, 2),
                strides_of(x.slice(0, 1).slice(1, 2).unfold(0, 2, 2)),
                z.unfold(0, 1, 1),
                z.unfold(0, 0, 2),
                x.unfold(1, 2, 2).unfold(0, 3, 1)};
  });
  fixture.check("unfold_grad", [] {
    Tensor x = fixture.in("unfold_grad");
    return grads([](const Outs& a) { return a[0].unfold(1, 3, 1); }, {x}) +
           grads([](const Outs& a) { return a[0].unfold(0, 2, 3); }, {x});
  });
}

TEST(TorchIndexops, Errors) {
  Tensor x = tensor<float>({1, 2, 3, 4, 5, 6}).view({2, 3});
  auto expect_error = [](const std::function<void()>& f, const std::string& msg) {
    try {
      f();
      ADD_FAILURE() << "expected an error containing '" << msg << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(msg), std::string::npos) << e.what();
    }
  };
  expect_error([&] { x.unfold(1, 4, 1); }, "maximum size for tensor at dimension 1 is 3 but size is 4");
  expect_error([&] { x.unfold(1, 2, 0); }, "step is 0 but must be > 0");
  expect_error([&] { x.unfold(1, -1, 1); }, "size is -1 but must be >= 0");
  expect_error([&] { x.unfold(2, 1, 1); }, "out of range");
  expect_error([&] { tensor(Scalar(1.0)).unfold(0, 2, 1); }, "maximum size for tensor at dimension 0 is 1");
  expect_error([&] { block_diag({zeros({2, 2, 2})}); }, "Input tensors must have 2 or fewer dimensions");
  expect_error([&] { cartesian_prod({tensor(Scalar(1.0))}); }, "expect a 1D vector");
  expect_error([&] { polygamma(-2, x); }, "does not support negative n");
  expect_error([&] { unique(tensor(Scalar(1.0)), true, false, false, 0); }, "tensor has no dimensions");
}

}  // namespace
}  // namespace kiln
