// Regression tests for issue 9's "PyTorch's answers" and "Sizes that overflow":
// each case is one where kiln differed from PyTorch 1.13 on the same input. The
// expected values, dtypes and shapes are what PyTorch 1.13 returns; where PyTorch
// raises, kiln must throw a kiln::Error naming the op and the problem.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "kiln/kiln.h"
#include "tests/unit/expect_error.h"

using namespace kiln;
using kiln::testing::expect_error;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

// (maybe_unused: each commit of issue 9 adds its own tests to this file.)
[[maybe_unused]] Tensor vec(std::vector<double> v) { return tensor<double>(v, kFloat64); }
[[maybe_unused]] std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }
[[maybe_unused]] std::vector<int64_t> ivals(const Tensor& t) { return t.to_vector<int64_t>(); }

// The gradient of sum(f(x)) at x.
template <class F>
std::vector<double> grad_of(F f, std::vector<double> x) {
  Tensor t = vec(std::move(x)).requires_grad_();
  Tensor y = f(t);
  (y.dim() == 0 ? y : y.sum()).backward();
  return vals(t.grad());
}

[[maybe_unused]] void expect_near(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i]))
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i;
    else if (std::isinf(want[i]))
      EXPECT_EQ(got[i], want[i]) << "at " << i;
    else
      EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << "at " << i;
  }
}

// ---- Missing errors: overlapping in-place writes (Note [Overlapping writes]) ----
TEST(TorchAnswers, InPlaceWritesThroughExpandedViewsRaise) {
  const std::string overlap = "more than one element of the written-to tensor refers to a single memory location";
  auto ex = [] { return zeros({1}).expand({3}); };
  Tensor o = ones({3});
  Tensor m = tensor<bool>({true, false, true}, {3});
  expect_error([&] { ex().add_(o); }, {"add_", overlap});
  expect_error([&] { ex().add_(1.0); }, {"add_", overlap});
  expect_error([&] { ex().sub_(o); }, {"sub_", overlap});
  expect_error([&] { ex().mul_(o); }, {"mul_", overlap});
  expect_error([&] { ex().div_(2.0); }, {"div_", overlap});
  expect_error([&] { ex().clamp_(0.0, 1.0); }, {"clamp_", overlap});
  expect_error([&] { ex().lerp_(o, 0.5); }, {"lerp_", overlap});
  expect_error([&] { ex().addcmul_(o, o); }, {"addcmul_", overlap});
  expect_error([&] { ex().addcdiv_(o, o); }, {"addcdiv_", overlap});
  expect_error([&] { ex().sqrt_(); }, {"sqrt_", overlap});
  expect_error([&] { ex().exp_(); }, {"exp_", overlap});
  expect_error([&] { ex().relu_(); }, {"relu_", overlap});
  expect_error([&] { ex().copy_(o); }, {"copy_", overlap});
  expect_error([&] { ex().fill_(1.0); }, {"fill_", overlap});
  expect_error([&] { ex().zero_(); }, {"fill_", overlap});
  expect_error([&] { ex().masked_fill_(m, 1.0); }, {"masked_fill_", overlap});
  expect_error(
      [&] {
        Tensor t = ex();
        t += o;
      },
      {"add_", overlap});
  expect_error(
      [&] {
        Tensor t = ex();
        t *= 2.0;
      },
      {"mul_", overlap});
  // With autograd on, too.
  Tensor w = ones({3}).requires_grad_();
  expect_error([&] { ex().mul_(w); }, {"mul_", overlap});
  // The written-to tensor untouched.
  Tensor base = zeros({1});
  Tensor e = base.expand({3});
  expect_error([&] { e.add_(o); }, overlap);
  EXPECT_EQ(vals(base), (std::vector<double>{0}));
  // Not an overlap: a size-1 expand, a transposed view, a stride-0 *source*.
  Tensor one = zeros({1}).expand({1});
  one.add_(1.0);
  EXPECT_EQ(vals(one), (std::vector<double>{1}));
  Tensor a = zeros({2, 3});
  a.t().add_(ones({3, 2}));
  a.add_(ex());
  a.copy_(ones({1}).expand({2, 3}));
  EXPECT_EQ(vals(a), (std::vector<double>(6, 1)));
}

}  // namespace
