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

// ---- Crashes on 0-d tensors ----
TEST(TorchAnswers, FlipOf0dReturnsIt) {
  Tensor x = scalar_tensor(2.0);
  for (int64_t d : {0, -1}) {
    Tensor y = flip(x, {d});
    EXPECT_EQ(y.dim(), 0);
    EXPECT_EQ(y.item<float>(), 2.0f);
  }
  expect_error([&] { flip(x, {1}); }, {"flip", "dimension out of range"});
}

TEST(TorchAnswers, RollAndUnflattenOf0dRaise) {
  Tensor x = scalar_tensor(2.0);
  expect_error([&] { roll(x, {1}, {0}); }, {"roll", "tensor has no dimensions"});
  expect_error([&] { unflatten(x, 0, {1}); }, {"unflatten", "tensor has no dimensions"});
  // Without dims, roll flattens first: torch returns the value.
  EXPECT_EQ(roll(x, {1}).item<float>(), 2.0f);
}

// Every op that takes a dim, on a 0-d input: PyTorch 1.13's value (first element
// and shape), or a kiln::Error where PyTorch raises. Never a crash.
TEST(TorchAnswers, OpsTakingADimOn0dInput) {
  Tensor x = scalar_tensor(2.0), i0 = scalar_tensor(0, TensorOptions(kInt64));
  struct Case {
    const char* name;
    std::function<Tensor()> fn;
    std::vector<int64_t> shape;  // PyTorch's result
    double value;
  };
  std::vector<Case> values = {
      {"sum", [&] { return sum(x, {0}); }, {}, 2},
      {"mean", [&] { return mean(x, {0}); }, {}, 2},
      {"prod", [&] { return prod(x, 0); }, {}, 2},
      {"amax", [&] { return amax(x, {0}); }, {}, 2},
      {"amin", [&] { return amin(x, {-1}); }, {}, 2},
      {"max", [&] { return std::get<0>(max(x, 0)); }, {}, 2},
      {"min indices", [&] { return std::get<1>(min(x, 0)); }, {}, 0},
      {"argmax", [&] { return argmax(x, 0); }, {}, 0},
      {"argmin", [&] { return argmin(x, -1); }, {}, 0},
      {"std", [&] { return kiln::std(x, {0}); }, {}, kNaN},
      {"var", [&] { return var(x, {0}); }, {}, kNaN},
      {"var_mean", [&] { return std::get<1>(var_mean(x, {0})); }, {}, 2},
      {"logsumexp", [&] { return logsumexp(x, {0}); }, {}, 2},
      {"norm", [&] { return norm(x, 2, {0}); }, {}, 2},
      {"all", [&] { return all(x, 0); }, {}, 1},
      {"any", [&] { return any(x, -1); }, {}, 1},
      {"cumsum", [&] { return cumsum(x, 0); }, {}, 2},
      {"cumsum -1", [&] { return cumsum(x, -1); }, {}, 2},
      {"cumprod", [&] { return cumprod(x, 0); }, {}, 2},
      {"softmax", [&] { return softmax(x, 0); }, {}, 1},
      {"log_softmax", [&] { return log_softmax(x, -1); }, {}, 0},
      {"squeeze", [&] { return squeeze(x, {0}); }, {}, 2},
      {"unsqueeze", [&] { return unsqueeze(x, 0); }, {1}, 2},
      {"unsqueeze -1", [&] { return unsqueeze(x, -1); }, {1}, 2},
      {"transpose", [&] { return transpose(x, 0, -1); }, {}, 2},
      {"flatten", [&] { return flatten(x, 0, 0); }, {1}, 2},
      {"flip", [&] { return flip(x, {0}); }, {}, 2},
      {"roll without dims", [&] { return roll(x, {3}); }, {}, 2},
      {"sort", [&] { return std::get<0>(sort(x, 0)); }, {}, 2},
      {"argsort", [&] { return argsort(x, 0); }, {}, 0},
      {"topk", [&] { return std::get<0>(topk(x, 1, 0)); }, {}, 2},
      {"stack",
       [&] {
         return stack({x, x}, 0);
       },
       {2},
       2},
      {"index_select", [&] { return index_select(x, 0, tensor<int64_t>({0}, {1})); }, {}, 2},
      {"gather", [&] { return gather(x, 0, i0); }, {}, 2},
      {"scatter", [&] { return scatter(x, 0, i0, Scalar(5.0)); }, {}, 5},
      {"scatter_add", [&] { return scatter_add(x, 0, i0, scalar_tensor(3.0)); }, {}, 5},
      {"scatter_reduce", [&] { return scatter_reduce(x, 0, i0, scalar_tensor(3.0), "sum"); }, {}, 5},
      {"repeat", [&] { return repeat(x, {2}); }, {2}, 2},
      {"one_hot", [&] { return one_hot(i0, 3); }, {3}, 1},
      {"embedding",
       [&] {
         return embedding(ones({2, 3}), i0);
       },
       {3},
       1},
  };
  for (const Case& c : values) {
    SCOPED_TRACE(c.name);
    Tensor r;
    try {
      r = c.fn();
    } catch (const Error& e) {
      ADD_FAILURE() << "threw: " << e.what();
      continue;
    }
    EXPECT_EQ(r.sizes().vec(), c.shape);
    expect_near({r.to(kFloat64).flatten().to_vector<double>()[0]}, {c.value});
  }
  std::vector<std::pair<const char*, std::function<void()>>> raises = {
      {"roll", [&] { roll(x, {1}, {0}); }},
      {"unflatten", [&] { unflatten(x, 0, {1}); }},
      {"select", [&] { select(x, 0, 0); }},
      {"select -1", [&] { select(x, -1, 0); }},
      {"narrow", [&] { narrow(x, 0, 0, 1); }},
      {"slice", [&] { slice(x, 0, 0, 1); }},
      {"chunk", [&] { chunk(x, 1, 0); }},
      {"split", [&] { split(x, 1, 0); }},
      {"split sizes", [&] { split(x, std::vector<SymInt>{1}, 0); }},
      {"unbind", [&] { unbind(x, 0); }},
      {"cat",
       [&] {
         cat({x, x}, 0);
       }},
      {"flip 1", [&] { flip(x, {1}); }},
      {"diagonal", [&] { diagonal(x); }},
      {"tril", [&] { tril(x); }},
      {"triu", [&] { triu(x); }},
      {"unsqueeze 1", [&] { unsqueeze(x, 1); }},
      {"transpose 0 1", [&] { transpose(x, 0, 1); }},
      {"stack 1",
       [&] {
         stack({x, x}, 1);
       }},
      {"squeeze 1", [&] { squeeze(x, {1}); }},
      {"amax 1", [&] { amax(x, {1}); }},
      {"permute", [&] { permute(x, {0}); }},
      {"topk k=2", [&] { topk(x, 2, 0); }},
  };
  for (const auto& [name, fn] : raises) {
    SCOPED_TRACE(name);
    EXPECT_THROW(fn(), Error);
  }
}

// ---- Wrong gradients ----
TEST(TorchAnswers, BceWithLogitsGradientAtZeroLogit) {
  Tensor t = vec({1, 0, 0.5});
  expect_near(grad_of([&](const Tensor& x) { return binary_cross_entropy_with_logits(x, t); }, {0, 0, 0}),
              {-1.0 / 6, 1.0 / 6, 0});
  Tensor pw = vec({3, 3, 3});
  expect_near(
      grad_of([&](const Tensor& x) { return binary_cross_entropy_with_logits(x, t, {}, "mean", pw); }, {0, 0, 0}),
      {-0.5, 1.0 / 6, -1.0 / 6});
}

// The selected elements come in x's logical (row-major) order, and so do their
// gradients. PyTorch 1.13 itself is wrong here for a non-contiguous input (its
// masked_scatter_ fills in memory order; torch.autograd.gradcheck fails on
// masked_select(b.t(), m)), so the expected values are torch's for the same
// input made contiguous first, which finite differences agree with.
TEST(TorchAnswers, MaskedSelectOfTransposedInputGradient) {
  Tensor base = arange(6, TensorOptions(kFloat64)).reshape({2, 3}).requires_grad_();
  Tensor x = base.t();  // [[0, 3], [1, 4], [2, 5]]
  Tensor m = tensor<bool>({true, false, false, true, true, true}, {3, 2});
  Tensor y = masked_select(x, m);
  EXPECT_EQ(vals(y), (std::vector<double>{0, 4, 2, 5}));
  (y * vec({1, 2, 3, 4})).sum().backward();
  EXPECT_EQ(vals(base.grad()), (std::vector<double>{1, 0, 3, 0, 2, 4}));
  auto fn = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{masked_select(in[0].t(), m)}; };
  EXPECT_TRUE(gradcheck(fn, {arange(6, TensorOptions(kFloat64)).reshape({2, 3}).requires_grad_()}));
}

TEST(TorchAnswers, MaskedSelectOfPermutedInputGradient) {
  Tensor b = arange(24, TensorOptions(kFloat64)).reshape({2, 3, 4}).requires_grad_();
  Tensor x = b.permute({2, 0, 1});  // [4, 2, 3]
  Tensor m = eq(remainder(arange(24).reshape({4, 2, 3}), 3), 0);
  Tensor y = masked_select(x, m);
  EXPECT_EQ(vals(y), (std::vector<double>{0, 12, 1, 13, 2, 14, 3, 15}));
  (y * arange(1, 9, 1, TensorOptions(kFloat64))).sum().backward();
  EXPECT_EQ(vals(b.grad()),
            (std::vector<double>{1, 3, 5, 7, 0, 0, 0, 0, 0, 0, 0, 0, 2, 4, 6, 8, 0, 0, 0, 0, 0, 0, 0, 0}));
  // A mask broadcast over the leading dims.
  b = arange(24, TensorOptions(kFloat64)).reshape({2, 3, 4}).requires_grad_();
  x = b.permute({2, 0, 1});
  Tensor y2 = masked_select(x, tensor<bool>({true, false, true}, {3}));
  EXPECT_EQ(vals(y2), (std::vector<double>{0, 8, 12, 20, 1, 9, 13, 21, 2, 10, 14, 22, 3, 11, 15, 23}));
  (y2 * arange(1, 17, 1, TensorOptions(kFloat64))).sum().backward();
  EXPECT_EQ(vals(b.grad()),
            (std::vector<double>{1, 5, 9, 13, 0, 0, 0, 0, 2, 6, 10, 14, 3, 7, 11, 15, 0, 0, 0, 0, 4, 8, 12, 16}));
}

TEST(TorchAnswers, ReluAndRelu6Gradients) {
  EXPECT_EQ(grad_of([](const Tensor& x) { return relu(x); }, {kNaN, 0, -1, 2}), (std::vector<double>{1, 0, 0, 1}));
  auto r6 = [](const Tensor& x) { return nn::functional::relu6(x); };
  EXPECT_EQ(grad_of(r6, {kNaN, 0, 6, 3, 7, -1}), (std::vector<double>{1, 0, 0, 1, 0, 0}));
  // The in-place form on a non-leaf gives the same gradient and values.
  Tensor x = vec({kNaN, 0, 6, 3, 7, -1}).requires_grad_();
  Tensor y = x * 1.0;
  nn::functional::relu6(y, /*inplace=*/true);
  expect_near(vals(y), {kNaN, 0, 6, 3, 6, 0});
  y.sum().backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{1, 0, 0, 1, 0, 0}));
}

TEST(TorchAnswers, MaxMinOverNaNRouteGradientToTheNaNs) {
  EXPECT_EQ(grad_of([](const Tensor& x) { return max(x); }, {1, kNaN, 3, kNaN}), (std::vector<double>{0, 0.5, 0, 0.5}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return min(x); }, {1, kNaN, 3, kNaN}), (std::vector<double>{0, 0.5, 0, 0.5}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return std::get<0>(max(x, 0)); }, {1, kNaN, 3, kNaN}),
            (std::vector<double>{0, 1, 0, 0}));
}

TEST(TorchAnswers, StdOfEqualValuesHasZeroGradient) {
  EXPECT_EQ(grad_of([](const Tensor& x) { return kiln::std(x); }, {2, 2, 2}), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return std::get<0>(std_mean(x)); }, {2, 2, 2}),
            (std::vector<double>{0, 0, 0}));
  // One slice constant, the other not.
  Tensor x = tensor<double>({2, 1, 2, 3}, {2, 2}, kFloat64).requires_grad_();
  kiln::std(x, {0}).sum().backward();
  expect_near(vals(x.grad()), {0, -std::sqrt(0.5), 0, std::sqrt(0.5)});
}

TEST(TorchAnswers, FractionalNormAtZeros) {
  EXPECT_EQ(grad_of([](const Tensor& x) { return norm(x, 0.5); }, {0, 1, 0}), (std::vector<double>{0, 1, 0}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return norm(x, 0.5); }, {0, 0}), (std::vector<double>{0, 0}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return norm(x, 1.5); }, {0, 1, 0}), (std::vector<double>{0, 1, 0}));
}

TEST(TorchAnswers, BceGradientAtZeroAndOne) {
  Tensor t = vec({1, 0, 1, 0, 0.3});
  // torch: (x - t) / max(x (1 - x), 1e-12), over 5 for the mean.
  expect_near(grad_of([&](const Tensor& x) { return binary_cross_entropy(x, t); }, {0, 1, 1, 0, 0}),
              {-2e11, 2e11, 0, 0, -6e10});
  expect_near(grad_of([&](const Tensor& x) { return binary_cross_entropy(x, t, {}, "none"); }, {0, 1, 1, 0, 0}),
              {-1e12, 1e12, 0, 0, -3e11});
  // The loss itself: logs clamped at -100.
  expect_near(vals(binary_cross_entropy(vec({0, 1, 1, 0}), vec({1, 0, 1, 0}), {}, "none")), {100, 100, 0, 0});
  // The target's gradient is -logit(x) (torch: inf at 0, -inf at 1).
  Tensor tt = vec({1, 0, 1, 0}).requires_grad_();
  binary_cross_entropy(vec({0, 1, 0.5, 0.3}), tt).backward();
  expect_near(vals(tt.grad()), {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(), 0,
                                -std::log(0.3 / 0.7) / 4});
}

TEST(TorchAnswers, PowByBoolBackward) {
  EXPECT_EQ(grad_of([](const Tensor& x) { return pow(x, Scalar(true)); }, {2, 3}), (std::vector<double>{1, 1}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return pow(x, Scalar(false)); }, {2, 3}), (std::vector<double>{0, 0}));
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
  // fill_ and zero_ give every element the same value: PyTorch allows them, and so does kiln.
  Tensor filled = zeros({2, 1}), fe = filled.expand({2, 4});
  fe.fill_(2.5);
  EXPECT_EQ(filled.to_vector<double>(), (std::vector<double>{2.5, 2.5}));
  EXPECT_EQ(fe.to_vector<double>(), std::vector<double>(8, 2.5));
  fe.zero_();
  EXPECT_EQ(filled.to_vector<double>(), (std::vector<double>{0, 0}));
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

// ---- Missing errors: scalars that do not fit the dtype ----
TEST(TorchAnswers, ScalarsThatOverflowTheDtypeRaise) {
  const std::string ov = "without overflow";
  expect_error([] { full({2}, 1e10, TensorOptions(kFloat16)); }, {"full", "1e+10", "float16", ov});
  expect_error([] { full({2}, 300, TensorOptions(kInt8)); }, {"full", "300", ov});
  expect_error([] { full({2}, kNaN, TensorOptions(kInt64)); }, {"full", ov});
  expect_error([] { full({2}, 65520.0, TensorOptions(kFloat16)); }, {"full", ov});
  Tensor u8 = tensor<uint8_t>({1, 2}, {2});
  expect_error([&] { clamp(u8, Scalar(-1), Scalar(300)); }, {"clamp", "300", ov});
  expect_error([&] { u8.clone().clamp_(Scalar(-1), Scalar(300)); }, {"clamp", ov});
  expect_error([&] { u8.clone().fill_(300); }, {"fill_", "300", ov});
  expect_error([&] { full_like(u8, 300); }, {"full_like", ov});
  Tensor h = tensor<float>({1, 2}, {2}).to(kFloat16);
  Tensor mask = tensor<bool>({true, false}, {2});
  expect_error([&] { masked_fill(h, mask, 1e6); }, {"masked_fill", ov});
  expect_error([&] { h.clone().masked_fill_(mask, 1e6); }, {"masked_fill_", ov});
  Tensor i32 = tensor<int32_t>({1, 2}, {2});
  const int64_t big = int64_t(1) << 40;
  expect_error([&] { pow(i32, big); }, {"pow", ov});
  // Note [Scalars out of range] (issue #30): a binary op's scalar operand wraps, as torch 1.13 and 2:
  // fmod(uint8, 300) is fmod by 44; 2^40 in int32 is 0, a division by zero.
  Tensor u8b = tensor<uint8_t>({1, 2, 250}, {3});
  EXPECT_EQ(ivals(fmod(u8b, 300)), (std::vector<int64_t>{1, 2, 30}));
  EXPECT_EQ(ivals(remainder(u8b, 300)), (std::vector<int64_t>{1, 2, 30}));
  EXPECT_EQ(ivals(u8b + 300), (std::vector<int64_t>{45, 46, 38}));
  EXPECT_EQ(ivals(u8b * 300), (std::vector<int64_t>{44, 88, 248}));
  expect_error([&] { fmod(i32, big); }, {"fmod", "ZeroDivisionError"});
  expect_error([&] { remainder(i32, big); }, {"remainder", "ZeroDivisionError"});
  // clamp and hardtanh compare in the opmath type: float16 takes 1e10 (torch 2; 1.13 has no
  // float16 clamp on the CPU), uint8 still refuses 300 (above).
  EXPECT_EQ(clamp(h, Scalar(-1e10), Scalar(1e10)).to_vector<double>(), (std::vector<double>{1, 2}));
  EXPECT_EQ(hardtanh(h, -1e10, 1e10).to_vector<double>(), (std::vector<double>{1, 2}));
  expect_error([&] { clamp(tensor<float>({1, 2}, {2}), Scalar(1e40)); }, {"clamp", ov});
  // torch.tensor(1e10, dtype=float16) converts to inf; full and scalar_tensor raise (above).
  EXPECT_TRUE(std::isinf(tensor(Scalar(1e10), TensorOptions(kFloat16)).item<float>()));
  EXPECT_EQ(tensor(Scalar(1e10), TensorOptions(kFloat16)).dtype(), kFloat16);
  EXPECT_EQ(tensor(Scalar(65519.0), TensorOptions(kFloat16)).item<float>(), 65504.0f);
  EXPECT_TRUE(std::isinf(tensor(Scalar(-1e40), TensorOptions(kFloat32)).item<float>()));
  expect_error([] { scalar_tensor(Scalar(1e10), TensorOptions(kFloat16)); }, ov);
  expect_error([] { tensor(Scalar(300), TensorOptions(kUInt8)); }, ov);
  EXPECT_EQ(tensor(Scalar(-1), TensorOptions(kUInt8)).item<int64_t>(), 255);
  // What fits (or wraps, as torch) still works.
  EXPECT_EQ(ivals(full({2}, -1, TensorOptions(kUInt8))), (std::vector<int64_t>{255, 255}));
  EXPECT_EQ(ivals(full({2}, 2.7, TensorOptions(kInt8))), (std::vector<int64_t>{2, 2}));
  EXPECT_TRUE(std::isinf(full({1}, std::numeric_limits<double>::infinity(), TensorOptions(kFloat16)).item<float>()));
  EXPECT_EQ(ivals(clamp(u8, Scalar(-1))), (std::vector<int64_t>{255, 255}));
  EXPECT_EQ(clamp(u8, Scalar(0.5), Scalar(1.5)).dtype(), kFloat32);
  EXPECT_EQ(ivals(pow(i32, 2)), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(pow(i32, 2.5).dtype(), kFloat32);
  EXPECT_EQ(ivals(tensor<int64_t>({1, 2}, {2}).masked_fill(mask, 2.5)), (std::vector<int64_t>{2, 2}));
}

// ---- Wrong values ----
TEST(TorchAnswers, ArangeWithFloatArgumentsAndAnIntegerDtype) {
  TensorOptions i64(kInt64);
  EXPECT_EQ(ivals(arange(2.5, i64)), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(ivals(arange(0.5, 4.5, 1.5, i64)), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(ivals(arange(1.5, -2.5, -1, i64)), (std::vector<int64_t>{1, 0, -1}));
  Tensor e = arange(-0.5, i64);
  EXPECT_EQ(e.numel(), 0);
  EXPECT_EQ(e.dtype(), kInt64);
  expect_error([&] { arange(0, 4, 0.5, i64); }, {"arange", "step must be nonzero"});
  expect_error([&] { arange(-2.5, i64); }, {"arange", "inconsistent with step sign"});
  // Other integer dtypes: torch takes the length from the untruncated values.
  EXPECT_EQ(ivals(arange(2.5, TensorOptions(kInt32))), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(arange(2.5, TensorOptions(kInt32)).dtype(), kInt32);
  EXPECT_EQ(vals(arange(0, 2.5, 1, TensorOptions(kFloat32))), (std::vector<double>{0, 1, 2}));
}

TEST(TorchAnswers, ScalarTensorIsOfTheDefaultDtype) {
  Tensor a = scalar_tensor(3), b = scalar_tensor(true);
  EXPECT_EQ(a.dtype(), kFloat32);
  EXPECT_EQ(a.dim(), 0);
  EXPECT_EQ(a.item<float>(), 3.0f);
  EXPECT_EQ(b.dtype(), kFloat32);
  EXPECT_EQ(b.item<float>(), 1.0f);
  EXPECT_EQ(scalar_tensor(3, TensorOptions(kInt64)).dtype(), kInt64);
}

TEST(TorchAnswers, ChunkOfAZeroSizeDim) {
  auto pieces = chunk(empty({0, 3}), 3, 0);
  ASSERT_EQ(pieces.size(), 3u);
  for (const Tensor& p : pieces) EXPECT_EQ(p.sizes().vec(), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(chunk(empty({2, 0}), 4, 1).size(), 4u);
  EXPECT_EQ(chunk(empty({5}), 3).size(), 3u);  // unchanged: [2, 2, 1]
}

TEST(TorchAnswers, TopkOf0dWithKZero) {
  auto [v, i] = topk(scalar_tensor(2.0), 0);
  EXPECT_EQ(v.dim(), 0);
  EXPECT_EQ(v.item<float>(), 2.0f);
  EXPECT_EQ(i.item<int64_t>(), 0);
  expect_error([] { topk(scalar_tensor(2.0), 2); }, "topk");
}

TEST(TorchAnswers, PrintingLargeWholeNumbers) {
  EXPECT_EQ(tensor<float>({-1e20f}, {1}).to_string(), "tensor([-1.0000e+20])");
  EXPECT_EQ(scalar_tensor(-1e20).to_string(), "tensor(-1.0000e+20)");
  EXPECT_EQ(tensor<float>({1e20f, 1.0f}, {2}).to_string(), "tensor([1.0000e+20, 1.0000e+00])");
  EXPECT_EQ(tensor<double>({-1e20}, {1}, kFloat64).to_string(), "tensor([-1.0000e+20], dtype=float64)");
  // torch's other switches to scientific notation, and what stays as it was.
  EXPECT_EQ(tensor<float>({1.0f, 2000.0f}, {2}).to_string(), "tensor([1.0000e+00, 2.0000e+03])");
  EXPECT_EQ(tensor<float>({0.5f, 1e-5f}, {2}).to_string(), "tensor([5.0000e-01, 1.0000e-05])");
  EXPECT_EQ(tensor<float>({1.5f, 2.25f}, {2}).to_string(), "tensor([1.5000, 2.2500])");
  EXPECT_EQ(tensor<float>({1.0f, 2.0f}, {2}).to_string(), "tensor([1., 2.])");
}

// ---- Sizes that overflow (Note [Size overflow]) ----
TEST(TorchAnswers, ClassTargetsOutOfRangeNameTheTargetAndTheClassCount) {
  Tensor logits = randn({2, 3});
  expect_error([&] { (void)cross_entropy(logits, tensor<int64_t>({0, 3}, {2})); },
               {"nll_loss", "target 3 is out of bounds", "[0, 3)"});
  expect_error([&] { (void)cross_entropy(logits, tensor<int64_t>({-2, 0}, {2})); }, {"target -2", "[0, 3)"});
  expect_error([&] { (void)cross_entropy(logits, tensor<int64_t>({0, 5}, {2}), ones({3})); }, {"target 5", "[0, 3)"});
  expect_error([&] { (void)nll_loss(logits.log_softmax(1), tensor<int64_t>({7, 0}, {2})); }, {"nll_loss", "target 7"});
  expect_error([&] { (void)cross_entropy(randn({2, 4, 2}), full({2, 2}, int64_t{4}, kInt64)); }, {"target 4", "[0, 4)"});
  // ignore_index itself is not a class and not an error.
  Tensor loss = cross_entropy(logits, tensor<int64_t>({1, -100}, {2}));
  EXPECT_TRUE(std::isfinite(loss.item<double>()));
}

TEST(TorchAnswers, SizesThatOverflowRaise) {
  const std::string ov = "storage size calculation overflowed";
  expect_error([] { empty({int64_t(1) << 62, 4}); }, {ov, "4611686018427387904"});
  expect_error([] { empty({int64_t(1) << 61}, TensorOptions(kFloat64)); }, ov);
  expect_error([] { empty({(int64_t(1) << 61) + 1}); }, ov);
  expect_error([] { zeros({int64_t(1) << 62, 4}); }, ov);
  expect_error([] { empty({int64_t(1) << 62, 4}, TensorOptions().device(Device("meta"))); }, ov);
  expect_error([] { empty({int64_t(1) << 40, int64_t(1) << 40}); }, ov);
  // A zero anywhere: no elements, whatever the other sizes.
  EXPECT_EQ(empty({int64_t(1) << 62, 4, 0}).numel(), 0);
}

TEST(TorchAnswers, AllocationThatFailsNamesTheBytes) {
  // 1 PiB: no machine has it; a kiln::Error, never std::bad_alloc.
  expect_error([] { empty({int64_t(1) << 48}); }, {"tried to allocate", "1125899906842624 bytes"});
  expect_error([] { empty({int64_t(1) << 61}, TensorOptions(kUInt8)); }, "tried to allocate");
}

}  // namespace

// torch.pow's meta function: an integer tensor to a negative integer Scalar power raises (NumPy's
// rule), in every integer dtype and through the method; a float exponent promotes instead, and a
// tensor exponent follows the integer kernel (1, ±1, else 0), as PyTorch's CPU kernel does.
TEST(TorchAnswers, IntegerToNegativeIntegerPower) {
  for (DType dt : {kInt64, kInt32, kInt16, kInt8, kUInt8}) {
    Tensor x = tensor<int64_t>({2, 3}, dt);
    expect_error([&] { (void)kiln::pow(x, -2); }, {"pow", "integers to negative integer powers are not allowed"});
    expect_error([&] { (void)x.pow(Scalar(int64_t(-1))); }, {"negative integer powers"});
    expect_error([&] { (void)kiln::pow(x.narrow(0, 0, 0), -1); }, {"negative integer powers"});
  }
  Tensor x = tensor<int64_t>({2, 1, -1}, kInt64);
  Tensor f = kiln::pow(x, -1.0);
  EXPECT_EQ(f.dtype(), kFloat32);
  EXPECT_EQ(vals(f), (std::vector<double>{0.5, 1.0, -1.0}));
  EXPECT_EQ(ivals(kiln::pow(x, tensor<int64_t>({-1, -2, -3}, kInt64))), (std::vector<int64_t>{0, 1, -1}));
}

// ---- Issue #30's differing answers (values from PyTorch 1.13) ----
// Negative reflect/replicate padding crops that side; a reflection may reach into the cropped part.
TEST(TorchAnswers, NegativeReflectAndReplicatePadding) {
  Tensor x = arange(12.0, TensorOptions(kFloat64)).reshape({1, 2, 6});
  EXPECT_EQ(vals(pad(x, {-1, 2}, "reflect")), (std::vector<double>{1, 2, 3, 4, 5, 4, 3, 7, 8, 9, 10, 11, 10, 9}));
  EXPECT_EQ(vals(pad(x, {2, -3}, "replicate")), (std::vector<double>{0, 0, 0, 1, 2, 6, 6, 6, 7, 8}));
  Tensor y = arange(20.0, TensorOptions(kFloat64)).reshape({1, 1, 4, 5});
  Tensor r = pad(y, {-1, 1, 2, -1}, "reflect");
  EXPECT_EQ(r.sizes().vec(), (std::vector<int64_t>{1, 1, 5, 5}));
  EXPECT_EQ(vals(r), (std::vector<double>{11, 12, 13, 14, 13, 6, 7, 8, 9, 8, 1, 2, 3, 4, 3, 6, 7, 8, 9, 8, 11, 12, 13,
                                          14, 13}));
  EXPECT_EQ(vals(pad(y, {-2, -1, -1, 2}, "replicate")),
            (std::vector<double>{7, 8, 12, 13, 17, 18, 17, 18, 17, 18}));
  EXPECT_EQ(vals(pad(arange(4.0, TensorOptions(kFloat64)).reshape({1, 4}), {-2, 3}, "reflect")),
            (std::vector<double>{2, 3, 2, 1, 0}));
  // The gradient sums the repeats into the kept entries.
  Tensor z = arange(6.0, TensorOptions(kFloat64)).reshape({1, 6}).requires_grad_();
  Tensor o = pad(z, {-2, 3}, "replicate");
  EXPECT_EQ(vals(o), (std::vector<double>{2, 3, 4, 5, 5, 5, 5}));
  o.backward(arange(7.0, TensorOptions(kFloat64)).reshape({1, 7}));
  EXPECT_EQ(vals(z.grad()), (std::vector<double>{0, 0, 0, 1, 2, 18}));
  expect_error([&] { (void)pad(x, {-7, 0}, "replicate"); }, {"pad", "leaves no entries"});
  expect_error([&] { (void)pad(x, {-1, 6}, "reflect"); }, {"pad", "padding size should be less than"});
  // Huge paddings are errors naming them, not std::length_error or a wrapped size.
  expect_error([&] { (void)pad(x, {-1, int64_t(1) << 62}, "replicate"); }, {"pad", "cannot allocate"});
  expect_error([&] { (void)pad(x, {-1, std::numeric_limits<int64_t>::max()}, "replicate"); }, {"pad", "overflows int64"});
}

// index_add into a 0-d tensor with a one-element index (torch: tensor(3.)).
TEST(TorchAnswers, IndexAddIntoA0dTensor) {
  Tensor self = scalar_tensor(1.0, TensorOptions(kFloat64));
  EXPECT_EQ(self.index_add(0, tensor<int64_t>({0}, {1}, kInt64), scalar_tensor(2.0, TensorOptions(kFloat64))).item<double>(),
            3.0);
  EXPECT_EQ(self.index_add(0, scalar_tensor(0, TensorOptions(kInt64)), scalar_tensor(2.0, TensorOptions(kFloat64)))
                .item<double>(),
            3.0);
  Tensor acc = scalar_tensor(1.0, TensorOptions(kFloat64));
  acc.index_add_(0, tensor<int64_t>({0}, {1}, kInt64), scalar_tensor(2.5, TensorOptions(kFloat64)));
  EXPECT_EQ(acc.item<double>(), 3.5);
}

// torch.max(a, b) / torch.min(a, b): the elementwise maximum / minimum, broadcasting and promoting.
TEST(TorchAnswers, MaxAndMinOfTwoTensors) {
  Tensor a = tensor<double>({1, 5, -2}, {3}), b = tensor<double>({3, 4, kNaN}, {3});
  EXPECT_EQ(vals(kiln::max(a, b)).size(), 3u);
  expect_near(vals(kiln::max(a, b)), {3, 5, kNaN});
  expect_near(vals(kiln::min(a, b)), {1, 4, kNaN});
  expect_near(vals(a.max(b)), {3, 5, kNaN});
  expect_near(vals(a.min(b)), {1, 4, kNaN});
  Tensor i = tensor<int32_t>({1, 7}, {2});
  Tensor m = kiln::max(i, tensor<float>({2.5f}, {1}));
  EXPECT_EQ(m.dtype(), kFloat32);
  EXPECT_EQ(vals(m), (std::vector<double>{2.5, 7}));
  expect_error([&] { (void)kiln::max(a, ones({2})); }, "maximum");
}

// Note [Host memory failures]: an output too large for the host's memory raises kiln::Error
// naming the op (torch: "not enough memory"), also where the op builds host-side index vectors
// before it allocates the result (these threw a bare std::bad_alloc).
TEST(TorchAnswers, OutputsTooLargeForMemoryRaiseKilnError) {
  Tensor x = randn({1, 1, 4});
  const int64_t huge = int64_t(1) << 40;
  for (const char* mode : {"nearest", "nearest-exact", "linear"})
    expect_error([&] { (void)interpolate(x, std::vector<int64_t>{huge}, std::nullopt, mode); },
                 {"interpolate", "not enough memory", "[1, 1, 4]"});
  // "area" is adaptive average pooling, which names itself.
  expect_error([&] { (void)interpolate(x, std::vector<int64_t>{huge}, std::nullopt, "area"); }, "not enough memory");
  expect_error([&] { (void)adaptive_avg_pool1d(x, {huge}); }, {"adaptive_avg_pool", "not enough memory"});
  expect_error([&] { (void)interpolate(randn({1, 1, 2, 2}), std::vector<int64_t>{huge, 2}, std::nullopt, "bicubic"); },
               "not enough memory");
}
