// Every op ops.def flags METHOD is a Tensor method that gives the free function's answer
// (Note [Tensor methods]). Each CHECK_METHOD line compiles x.name(args...) and compares it with
// name(x, args...); the last test fails when the table gains a method that no line here calls.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/kiln.h"
#include "tests/unit/expect_error.h"

namespace kiln {
namespace {

std::set<std::string>& called() {
  static std::set<std::string> s;
  return s;
}

void expect_same(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.defined(), b.defined()) << what;
  if (!a.defined()) return;
  ASSERT_EQ(a.sizes().vec(), b.sizes().vec()) << what;
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  // Equal values, NaN where NaN.
  EXPECT_FALSE(a.ne(b).logical_and(a.isnan().logical_and(b.isnan()).logical_not()).any().item<bool>()) << what;
}
void expect_same(const std::vector<Tensor>& a, const std::vector<Tensor>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) expect_same(a[i], b[i], what + "[" + std::to_string(i) + "]");
}
template <class... T>
void expect_same(const std::tuple<T...>& a, const std::tuple<T...>& b, const std::string& what) {
  [&]<size_t... I>(std::index_sequence<I...>) {
    (expect_same(std::get<I>(a), std::get<I>(b), what + "." + std::to_string(I)), ...);
  }
  (std::index_sequence_for<T...>{});
}

// x.name(args...) against kiln::name(x, args...); random ops draw from the same seed.
#define CHECK_METHOD(self, name, ...)                          \
  do {                                                         \
    called().insert(#name);                                    \
    manual_seed(7);                                            \
    auto method_ = (self).name(__VA_ARGS__);                   \
    manual_seed(7);                                            \
    auto free_ = kiln::name((self)__VA_OPT__(, ) __VA_ARGS__); \
    expect_same(method_, free_, #name);                        \
  } while (0)

Tensor x() { return tensor<float>({0.5f, -1.25f, 2.0f, 0.75f, -0.5f, 1.5f}, {2, 3}); }
Tensor u() { return tensor<float>({0.25f, 0.5f, 0.75f, 0.1f, 0.9f, 0.3f}, {2, 3}); }   // in (0, 1)
Tensor big() { return tensor<float>({1.5f, 2.0f, 3.0f, 1.25f, 4.0f, 2.5f}, {2, 3}); }  // > 1
Tensor ints() { return tensor<int64_t>({3, 1, 2, 3, 0, 1}, {2, 3}); }

void check_pointwise() {
  Tensor a = x(), p = u(), g = big(), i = ints();
  CHECK_METHOD(a, neg);
  CHECK_METHOD(a, abs);
  CHECK_METHOD(a, sign);
  CHECK_METHOD(a, exp);
  CHECK_METHOD(a, exp2);
  CHECK_METHOD(p, log);
  CHECK_METHOD(p, log2);
  CHECK_METHOD(p, log10);
  CHECK_METHOD(p, log1p);
  CHECK_METHOD(a, expm1);
  CHECK_METHOD(p, sqrt);
  CHECK_METHOD(p, rsqrt);
  CHECK_METHOD(a, reciprocal);
  CHECK_METHOD(a, square);
  CHECK_METHOD(a, sin);
  CHECK_METHOD(a, cos);
  CHECK_METHOD(a, tan);
  CHECK_METHOD(a, tanh);
  CHECK_METHOD(a, sigmoid);
  CHECK_METHOD(a, relu);
  CHECK_METHOD(a, gelu);
  CHECK_METHOD(a, gelu, "tanh");
  CHECK_METHOD(a, silu);
  CHECK_METHOD(a, erf);
  CHECK_METHOD(p, erfinv);
  CHECK_METHOD(a, erfc);
  CHECK_METHOD(g, lgamma);
  CHECK_METHOD(g, digamma);
  CHECK_METHOD(p, asin);
  CHECK_METHOD(p, acos);
  CHECK_METHOD(a, atan);
  CHECK_METHOD(a, sinh);
  CHECK_METHOD(a, cosh);
  CHECK_METHOD(a, asinh);
  CHECK_METHOD(g, acosh);
  CHECK_METHOD(p, atanh);
  CHECK_METHOD(a, frac);
  CHECK_METHOD(p, logit);
  CHECK_METHOD(p, logit, 0.2);
  CHECK_METHOD(a, floor);
  CHECK_METHOD(a, ceil);
  CHECK_METHOD(a, round);
  CHECK_METHOD(a, trunc);
  CHECK_METHOD(a, isnan);
  CHECK_METHOD(a, isinf);
  CHECK_METHOD(a, isneginf);
  CHECK_METHOD(a, isposinf);
  CHECK_METHOD(a, signbit);
  CHECK_METHOD(a, sinc);
  CHECK_METHOD(a, isfinite);
  CHECK_METHOD(a, nan_to_num);
  CHECK_METHOD(a, logical_not);
  CHECK_METHOD(i, bitwise_not);
  CHECK_METHOD(a, clamp, -1.0, 1.0);
  CHECK_METHOD(a, clamp, p, g);
  CHECK_METHOD(a, to, kFloat64);
  CHECK_METHOD(a, clone);
  CHECK_METHOD(p, bernoulli);
  CHECK_METHOD(a, prelu, tensor<float>({0.25f}));
}

void check_binary() {
  Tensor a = x(), b = u(), i = ints();
  CHECK_METHOD(a, add, b);
  CHECK_METHOD(a, add, b, 2);
  CHECK_METHOD(a, add, 1.5);
  CHECK_METHOD(a, sub, b);
  CHECK_METHOD(a, mul, b);
  CHECK_METHOD(a, div, b);
  CHECK_METHOD(a, div, b, "floor");
  CHECK_METHOD(a, fmod, b);
  CHECK_METHOD(a, remainder, 0.5);
  CHECK_METHOD(b, pow, 2);
  CHECK_METHOD(b, pow, a);
  CHECK_METHOD(a, maximum, b);
  CHECK_METHOD(a, minimum, b);
  CHECK_METHOD(a, atan2, b);
  CHECK_METHOD(a, hypot, b);
  CHECK_METHOD(b, xlogy, b);
  CHECK_METHOD(a, fmax, b);
  CHECK_METHOD(a, fmin, b);
  CHECK_METHOD(a, copysign, b);
  CHECK_METHOD(a, logaddexp, b);
  CHECK_METHOD(a, logaddexp2, b);
  CHECK_METHOD(a, nextafter, b);
  CHECK_METHOD(a, heaviside, b);
  CHECK_METHOD(a, float_power, b);
  CHECK_METHOD(a, float_power, 2.5);
  CHECK_METHOD(a, isclose, b);
  CHECK_METHOD(a, eq, b);
  CHECK_METHOD(a, ne, 0.5);
  CHECK_METHOD(a, lt, b);
  CHECK_METHOD(a, le, b);
  CHECK_METHOD(a, gt, b);
  CHECK_METHOD(a, ge, 0.5);
  CHECK_METHOD(a, logical_and, b);
  CHECK_METHOD(a, logical_or, b);
  CHECK_METHOD(a, logical_xor, b);
  CHECK_METHOD(i, bitwise_and, i);
  CHECK_METHOD(i, bitwise_or, i);
  CHECK_METHOD(i, bitwise_xor, i);
  CHECK_METHOD(i, bitwise_left_shift, i);
  CHECK_METHOD(i, bitwise_right_shift, i);
  CHECK_METHOD(a, lerp, b, 0.25);
  CHECK_METHOD(a, addcmul, b, b, 0.5);
  CHECK_METHOD(a, addcdiv, b, b);
}

void check_reductions() {
  Tensor a = x(), b = u(), i = ints();
  CHECK_METHOD(a, sum);
  CHECK_METHOD(a, sum, IntArrayRef{1}, true);
  CHECK_METHOD(a, mean);
  CHECK_METHOD(a, prod);
  CHECK_METHOD(a, amax);
  CHECK_METHOD(a, amin);
  CHECK_METHOD(a, max);
  CHECK_METHOD(a, max, 1);
  CHECK_METHOD(a, min);
  CHECK_METHOD(a, min, 0, true);
  CHECK_METHOD(a, argmax);
  CHECK_METHOD(a, argmin, 1);
  CHECK_METHOD(a, var);
  CHECK_METHOD(a, logsumexp, IntArrayRef{1});
  CHECK_METHOD(a, norm);
  CHECK_METHOD(a, all);
  CHECK_METHOD(a, any);
  CHECK_METHOD(a, cumsum, 1);
  CHECK_METHOD(a, cumprod, 0);
  CHECK_METHOD(a, nansum);
  CHECK_METHOD(a, nanmean);
  CHECK_METHOD(a, count_nonzero);
  CHECK_METHOD(a, aminmax);
  CHECK_METHOD(a, median);
  CHECK_METHOD(a, median, 1);
  CHECK_METHOD(a, nanmedian);
  CHECK_METHOD(a, kthvalue, 2, 1);
  CHECK_METHOD(i, mode, 1);
  CHECK_METHOD(a, quantile, 0.25);
  CHECK_METHOD(a, nanquantile, 0.75);
  CHECK_METHOD(a, cummax, 1);
  CHECK_METHOD(a, cummin, 1);
  CHECK_METHOD(a, logcumsumexp, 1);
  CHECK_METHOD(a, softmax, 1);
  CHECK_METHOD(a, log_softmax, 0);
}

void check_shape_and_indexing() {
  Tensor a = x(), i = ints(), idx = tensor<int64_t>({2, 0}), m = a.gt(0);
  CHECK_METHOD(a, view, IntArrayRef{3, 2});
  CHECK_METHOD(a, permute, IntArrayRef{1, 0});
  CHECK_METHOD(a.narrow(0, 0, 1), expand, IntArrayRef{4, 3});
  CHECK_METHOD(a.narrow(0, 0, 1), squeeze);
  CHECK_METHOD(a, unsqueeze, 1);
  CHECK_METHOD(a, select, 1, 2);
  CHECK_METHOD(a, slice, 1, 0, 2);
  CHECK_METHOD(a, diagonal);
  CHECK_METHOD(a, as_strided, IntArrayRef{2, 2}, IntArrayRef{1, 2});
  CHECK_METHOD(a, transpose, 0, 1);
  CHECK_METHOD(a, t);
  CHECK_METHOD(a, narrow, 1, 1, 2);
  CHECK_METHOD(a.narrow(0, 0, 1), expand_as, a);
  CHECK_METHOD(a, flatten);
  CHECK_METHOD(a, unflatten, 1, IntArrayRef{3, 1});
  CHECK_METHOD(a, reshape, IntArrayRef{6});
  CHECK_METHOD(a, split, 2, 1);
  CHECK_METHOD(a, chunk, 3, 1);
  CHECK_METHOD(a, unbind, 1);
  CHECK_METHOD(a.t(), contiguous);
  CHECK_METHOD(a, repeat, IntArrayRef{2, 1});
  CHECK_METHOD(a, flip, IntArrayRef{1});
  CHECK_METHOD(a, fliplr);
  CHECK_METHOD(a, flipud);
  CHECK_METHOD(a, take, idx);
  CHECK_METHOD(a, roll, IntArrayRef{1}, IntArrayRef{1});
  CHECK_METHOD(a, tril);
  CHECK_METHOD(a, triu, 1);
  CHECK_METHOD(a, index_select, 1, idx);
  CHECK_METHOD(a, gather, 1, i.remainder(3));
  CHECK_METHOD(a, scatter, 1, i.remainder(3), 9.0);
  CHECK_METHOD(a, scatter_add, 1, i.remainder(3), a);
  CHECK_METHOD(a, scatter_reduce, 1, i.remainder(3), a, "amax");
  CHECK_METHOD(a, index_add, 1, idx, a.narrow(1, 0, 2));
  CHECK_METHOD(a, index_put, std::vector<Tensor>{idx.remainder(2)}, tensor<float>({5.0f}));
  CHECK_METHOD(a, masked_fill, m, 0.0);
  CHECK_METHOD(a, masked_scatter, m, a.flatten());
  CHECK_METHOD(a, masked_select, m);
  CHECK_METHOD(a, nonzero);
  CHECK_METHOD(a, topk, 2);
  CHECK_METHOD(a, sort, 1, true);
  CHECK_METHOD(a, argsort);
  CHECK_METHOD(i, unique);
  CHECK_METHOD(i, unique_consecutive);
  CHECK_METHOD(i.flatten(), bincount);
  CHECK_METHOD(a, histc, 4);
}

void check_linear_algebra() {
  Tensor a = x(), b = u().t(), s = randn({2, 2});
  Tensor a3 = a.unsqueeze(0), b3 = b.unsqueeze(0);
  CHECK_METHOD(a, mm, b);
  CHECK_METHOD(a3, bmm, b3);
  CHECK_METHOD(a, matmul, b);
  CHECK_METHOD(s, addmm, a, b, 0.5, 2.0);
  CHECK_METHOD(s.unsqueeze(0), baddbmm, a3, b3);
  CHECK_METHOD(s, addbmm, a3, b3);
}

// A call the free function does not take is not a method call either (no error deep inside).
template <class T, class... A>
concept takes_topk = requires(const T& t, const A&... a) {
  t.topk(a...);
};
template <class T, class... A>
concept takes_erfc = requires(const T& t, const A&... a) {
  t.erfc(a...);
};
static_assert(takes_topk<Tensor, int> && takes_topk<Tensor, int, int, bool>);
static_assert(!takes_topk<Tensor, std::string> && !takes_erfc<Tensor, Tensor, Tensor>);

TEST(TensorMethods, Pointwise) { check_pointwise(); }
TEST(TensorMethods, Binary) { check_binary(); }
TEST(TensorMethods, Reductions) { check_reductions(); }
TEST(TensorMethods, ShapeAndIndexing) { check_shape_and_indexing(); }
TEST(TensorMethods, LinearAlgebra) { check_linear_algebra(); }

// The in-place indexing methods a port reaches for (message passing, sparse MoE): self gets the
// out-of-place op's answer, gradients flow through a non-leaf, and a leaf that requires grad is
// refused as for any in-place op.
TEST(TensorMethods, InPlaceIndexing) {
  manual_seed(4);
  Tensor a = randn({3, 5}), src = randn({3, 5}), idx = tensor<int64_t>({0, 2, 4, 1, 3, 0, 1, 2, 3, 4, 4, 3, 2, 1, 0}, {3, 5});
  Tensor rows = tensor<int64_t>({2, 0}, {2}), two = randn({3, 2});
  auto same = [](const Tensor& got, const Tensor& want, const char* what) { expect_same(got, want, what); };
  Tensor t = a.clone();
  same(t.scatter_(1, idx, src), a.scatter(1, idx, src), "scatter_");
  t = a.clone();
  same(t.scatter_(1, idx, Scalar(2.5)), a.scatter(1, idx, Scalar(2.5)), "scatter_ value");
  t = a.clone();
  same(t.scatter_add_(1, idx, src), a.scatter_add(1, idx, src), "scatter_add_");
  t = a.clone();
  same(t.scatter_reduce_(1, idx, src, "amax", false), scatter_reduce(a, 1, idx, src, "amax", false), "scatter_reduce_");
  t = a.clone();
  same(t.index_add_(1, rows, two, 0.5), a.index_add(1, rows, two, 0.5), "index_add_");
  t = a.clone();
  same(t.index_fill_(1, rows, Scalar(-1.0)), a.index_fill(1, rows, Scalar(-1.0)), "index_fill_");
  t = a.clone();
  same(t.index_copy_(1, rows, two), a.index_copy(1, rows, two), "index_copy_");
  // Through autograd: d/d(w) of sum(index_add_(w * 1, ...) * c) is c.
  Tensor w = randn({3, 5}).requires_grad_(), c = randn({3, 5});
  Tensor h = w * 1;
  h.index_add_(1, rows, two);
  (h * c).sum().backward();
  same(w.grad(), c, "index_add_ gradient");
  testing::expect_error([&] { w.index_add_(1, rows, two); }, {"index_add", "leaf"});
  testing::expect_error([&] { w.index_copy_(1, rows, two); }, {"leaf"});
}

// Every method the table generates is called by one of the checks (ctest runs each test in its
// own process, so this one runs them all itself).
TEST(TensorMethods, EveryGeneratedMethodIsTested) {
  check_pointwise();
  check_binary();
  check_reductions();
  check_shape_and_indexing();
  check_linear_algebra();
  std::vector<std::string> generated = {
#define KILN_TENSOR_METHOD(name) #name,
#include "kiln/tensor_methods.inc"
#undef KILN_TENSOR_METHOD
  };
  EXPECT_GT(generated.size(), 100u);
  for (const std::string& name : generated)
    EXPECT_TRUE(called().contains(name)) << "x." << name << "(...) is generated but no test here calls it";
}

}  // namespace
}  // namespace kiln
