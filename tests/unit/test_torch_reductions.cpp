// The reductions and scans of issue 9 against PyTorch 1.13 on their edge cases: ties, NaN
// positions, empty inputs and q, gradients at ties. The fixture
// (tests/fixtures/torch_reductions.safetensors) was written by
// tests/fixtures/make_torch_reduction_fixture.py: each case holds its inputs ("<case>.in<i>")
// and PyTorch's outputs ("<case>.out", "<case>.out1", ...).
//
// Deliberate differences (PyTorch documents these indices as unspecified): among equal values,
// and among NaNs, kiln returns the index of the k-th element in stable sorted order (kthvalue,
// median, nanmedian), and mode counts NaNs as one value and returns its last index; PyTorch's CPU
// kernels pick by quickselect or an unstable sort. Those index outputs are checked to point at the
// returned value instead of to equal PyTorch's.
#include <gtest/gtest.h>

#include <algorithm>
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

const kiln::testing::TorchCases fixture("torch_reductions.safetensors");

using kiln::testing::expect_same_as_torch;

// An index where PyTorch's choice is unspecified: it must select the value kiln returned along dim.
struct Loose {
  size_t k;     // the index output
  int64_t dim;  // of input 0
};

// fixture.check, where the index outputs in `loose` need only select kiln's value (which is torch's).
void check(const std::string& name, const std::function<Outs()>& f, std::vector<Loose> loose = {}) {
  fixture.check(name, f, [&](const Outs& got, size_t k, const Tensor& want) {
    std::string what = kiln::testing::output_name(k);
    auto l = std::find_if(loose.begin(), loose.end(), [k](const Loose& x) { return x.k == k; });
    if (l == loose.end()) return expect_same_as_torch(got[k], want, what);
    Tensor x = fixture.in(name);
    Tensor idx = got[k], val = got[k - 1];
    bool keep = idx.dim() == x.dim();
    Tensor picked = x.gather(l->dim, keep ? idx : idx.unsqueeze(l->dim));
    expect_same_as_torch(keep ? picked : picked.squeeze(l->dim), val, what + " (selects the value)");
    expect_same_as_torch(val, fixture.out(name, k - 1), what + " values");
  });
}

template <class T>
Outs both(T t) {
  return {std::get<0>(t), std::get<1>(t)};
}
Tensor grad_of(const std::function<Tensor(const Tensor&)>& f, const Tensor& x0) {
  Tensor x = x0.detach().clone().requires_grad_(true);
  f(x).sum().backward();
  return x.grad();
}

TEST(TorchReductions, MedianAndNanmedian) {
  check("median_nan_rows",
        [] {
          Tensor x = fixture.in("median_nan_rows");
          return both(median(x, 1)) + both(nanmedian(x, 1)) + Outs{median(x), nanmedian(x)};
        },
        {{3, 1}});  // nanmedian of an all-NaN row
  check("median_int_ties", [] { return both(median(fixture.in("median_int_ties"), 1)); });
  check("median_even_count", [] {
    return both(median(fixture.in("median_even_count"), 0)) + Outs{median(fixture.in("median_even_count"))};
  });
  check("median_empty", [] { return Outs{median(fixture.in("median_empty")), nanmedian(fixture.in("median_empty"))}; });
  check("median_grad_ties", [] {
    Tensor x = fixture.in("median_grad_ties");
    return Outs{grad_of([](const Tensor& t) { return median(t); }, x),
                grad_of([](const Tensor& t) { return nanmedian(t); }, x),
                grad_of(
                    [](const Tensor& t) {
                      return std::get<0>(median(t.view({1, 4}), 1));
                    },
                    x)};
  });
}

TEST(TorchReductions, KthvalueAndMode) {
  check("kthvalue",
        [] {
          Tensor x = fixture.in("kthvalue");
          return both(kthvalue(x, 1, 1)) + both(kthvalue(x, 3, 1, true)) + both(kthvalue(x, 4, 1));
        },
        {{3, 1}, {5, 1}});  // among NaNs
  check("mode_int", [] { return both(mode(fixture.in("mode_int"), 0)); });
  check("mode_float", [] { return both(mode(fixture.in("mode_float"), 0)); });
  check("mode_bool", [] { return both(mode(fixture.in("mode_bool"), 0)); });
  check("mode_rows", [] { return both(mode(fixture.in("mode_rows"), -1, true)); }, {{1, 1}});  // the NaN row
}

TEST(TorchReductions, Scans) {
  check("cummax_nan", [] {
    Tensor x = fixture.in("cummax_nan");
    return both(cummax(x, 1)) + both(cummin(x, 1)) + both(cummax(x, 0));
  });
  check("cummax_int_ties",
        [] { return both(cummax(fixture.in("cummax_int_ties"), 0)) + both(cummin(fixture.in("cummax_int_ties"), 0)); });
  check("cummax_bool",
        [] { return both(cummax(fixture.in("cummax_bool"), 0)) + both(cummin(fixture.in("cummax_bool"), 0)); });
  check("cummax_grad_ties", [] {
    Tensor x = fixture.in("cummax_grad_ties");
    return Outs{grad_of([](const Tensor& t) { return std::get<0>(cummax(t, 0)); }, x),
                grad_of([](const Tensor& t) { return std::get<0>(cummin(t, 0)); }, x)};
  });
  check("logcumsumexp", [] {
    Tensor x = fixture.in("logcumsumexp");
    return Outs{logcumsumexp(x, 1), grad_of([](const Tensor& t) { return logcumsumexp(t, 1); }, x)};
  });
  check("logcumsumexp_inf", [] { return Outs{logcumsumexp(fixture.in("logcumsumexp_inf"), 0)}; });
}

TEST(TorchReductions, Quantile) {
  check("quantile", [] {
    Tensor x = fixture.in("quantile"), q = fixture.in("quantile", 1);
    Outs o;
    for (const char* m : {"linear", "lower", "higher", "midpoint", "nearest"}) o.push_back(quantile(x, q, 1, false, m));
    return o + Outs{quantile(x, 0.3, std::nullopt, true), quantile(x, q, 0, true)};
  });
  check("quantile_nan", [] {
    Tensor x = fixture.in("quantile_nan"), q = fixture.in("quantile_nan", 1);
    return Outs{quantile(x, q, 1), nanquantile(x, q, 1), nanquantile(x, q, std::nullopt, false, "nearest"),
                quantile(x, 0.5, 1, false, "nearest")};
  });
  check("quantile_empty_q",
        [] { return Outs{quantile(fixture.in("quantile_empty_q"), tensor<float>(std::vector<float>{}), 1)}; });
  check("quantile_grad", [] {
    Tensor x = fixture.in("quantile_grad");
    return Outs{grad_of([](const Tensor& t) { return quantile(t, 0.4, 1); }, x),
                grad_of([](const Tensor& t) { return quantile(t, 0.5); }, x)};
  });
}

TEST(TorchReductions, NanAndCounting) {
  check("nansum_nanmean", [] {
    Tensor x = fixture.in("nansum_nanmean");
    return Outs{nansum(x, {1}), nanmean(x, {1}), nansum(x), nanmean(x, {0, 1}, true),
                grad_of([](const Tensor& t) { return nanmean(t, {0}); }, x)};
  });
  check("count_nonzero", [] {
    Tensor x = fixture.in("count_nonzero");
    return Outs{count_nonzero(x), count_nonzero(x, 1), count_nonzero(x, {0, -1})};
  });
  check("aminmax", [] {
    Tensor x = fixture.in("aminmax");
    return both(aminmax(x)) + both(aminmax(x, 1)) + both(aminmax(x, -1, true)) + both(aminmax(x, std::nullopt, true));
  });
}

}  // namespace
}  // namespace kiln
