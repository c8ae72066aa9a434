// Issue 27, case 7: gradients into non-contiguous inputs, and what div saves for backward.
#include <gtest/gtest.h>

#include <vector>

#include "dispatch/dispatch.h"
#include "kiln/kiln.h"
#include "tests/unit/expect_error.h"

namespace kiln {
namespace {

// The gradient of f at a strided view of a leaf equals its gradient at a contiguous copy of
// that view: the layout of an input never changes the math.
template <class F>
void expect_layout_free_grad(F&& f, const Tensor& leaf0, const std::function<Tensor(const Tensor&)>& view) {
  Tensor a = leaf0.clone().requires_grad_(true);
  f(view(a)).backward();
  Tensor b = leaf0.clone().requires_grad_(true);
  f(view(b).contiguous()).backward();
  ASSERT_TRUE(a.grad().defined());
  EXPECT_EQ(a.grad().to_vector<float>(), b.grad().to_vector<float>());
}

TEST(StridedGrads, MaskedSelectIntoTransposedAndPermutedInputs) {
  manual_seed(5);
  auto weighted = [](const Tensor& x) {
    Tensor y = masked_select(x, x > 0);
    return (y * arange(static_cast<double>(y.numel())).to(kFloat32)).sum();
  };
  Tensor m0 = randn({4, 3});
  expect_layout_free_grad(weighted, m0, [](const Tensor& a) { return a.t(); });
  Tensor p0 = randn({2, 3, 2});
  expect_layout_free_grad(weighted, p0, [](const Tensor& a) { return a.permute({2, 0, 1}); });
  // A mask of another layout than the input's, and a broadcast mask.
  Tensor mask = (randn({3, 4}) > 0).t().contiguous().t();
  expect_layout_free_grad(
      [&](const Tensor& x) {
        Tensor y = masked_select(x, mask);
        return (y * arange(static_cast<double>(y.numel())).to(kFloat32)).sum();
      },
      randn({3, 4}), [](const Tensor& a) { return a.t().t(); });
  expect_layout_free_grad(
      [](const Tensor& x) {
        Tensor row = tensor(std::vector<float>{1, -1, 1}) > 0;
        Tensor y = masked_select(x, row);
        return (y * arange(static_cast<double>(y.numel())).to(kFloat32)).sum();
      },
      m0, [](const Tensor& a) { return a.t().t(); });
}

// Other backward rules that write into a strided input's positions.
TEST(StridedGrads, ScatteringBackwardsIntoStridedInputs) {
  manual_seed(6);
  Tensor m0 = randn({4, 3});
  auto t = [](const Tensor& a) { return a.t(); };
  auto w = [](const Tensor& y) {
    return (y * arange(static_cast<double>(y.numel())).to(kFloat32).view(y.sizes())).sum();
  };
  expect_layout_free_grad([&](const Tensor& x) { return w(x.index({tensor(std::vector<int64_t>{2, 0, 2})})); }, m0, t);
  expect_layout_free_grad([&](const Tensor& x) { return w(std::get<0>(sort(x, 1))); }, m0, t);
  expect_layout_free_grad([&](const Tensor& x) { return w(std::get<0>(x.max(1))); }, m0, t);
  expect_layout_free_grad(
      [&](const Tensor& x) {
        return w(x.gather(1, tensor(std::vector<int64_t>{0, 3, 1}).view({3, 1})));
      },
      m0, t);
  expect_layout_free_grad([&](const Tensor& x) { return w(x.masked_fill(x > 0, 0.0)); }, m0, t);
}

// div saves its operands, not its result: writing into the quotient is no error (PyTorch's
// derivatives for div read self and other only).
TEST(StridedGrads, DivDoesNotSaveItsOutput) {
  Tensor y = tensor(std::vector<float>{2, 2, 2, 2});
  for (int k = 0; k < 2; ++k) {
    Tensor x = tensor(std::vector<float>{1, 2, 3, 4}).requires_grad_(true);
    Tensor q = k == 0 ? x / 0.2 : x / y.detach();
    q.masked_fill_(tensor(std::vector<float>{0, 1, 0, 0}) > 0, -1e9);
    q.sum().backward();
    const float s = k == 0 ? 5.0f : 0.5f;
    EXPECT_EQ(x.grad().to_vector<float>(), std::vector<float>({s, 0, s, s})) << k;
  }
}

// Note [Gradient in the operand's layout]: a linear layer's weight gradient comes out in the
// weight's own (contiguous) layout, so AccumulateGrad keeps the buffer without a copy, also for
// the first layer, whose input needs no gradient and whose mm saves only that input.
TEST(StridedGrads, LinearWeightGradientsNeedNoCopy) {
  manual_seed(2);
  for (const bool input_grad : {false, true}) {
    SCOPED_TRACE(input_grad);
    Tensor w = randn({5, 3}).requires_grad_(true), b = randn({5}).requires_grad_(true);
    Tensor x = randn({4, 3}).requires_grad_(input_grad);
    Tensor y = linear(x, w, b);
    std::vector<uint32_t> counts(kNumOps, 0);
    set_op_call_counts(&counts);
    (y * y).sum().backward();
    set_op_call_counts(nullptr);
    EXPECT_EQ(counts[static_cast<size_t>(OpId::clone)], 0u);
    EXPECT_EQ(counts[static_cast<size_t>(OpId::copy_)], 0u);
    ASSERT_TRUE(w.grad().is_contiguous());
    // 2 y^T x, against a reference from the same ops without the layout question.
    Tensor want = matmul((y * 2).detach().t().contiguous(), x.detach());
    EXPECT_TRUE(allclose(w.grad(), want, 1e-5, 1e-6));
  }
}

// Note [Saving what the VJP reads]: an op saves only the operands the gradients of its inputs
// that require grad read (PyTorch's derivatives.yaml saves `other` of mul only when `self` needs
// a gradient): writing one it did not save is no error, writing one it did still is.
TEST(StridedGrads, OpsSaveOnlyWhatTheirGradientsRead) {
  auto v4 = [] { return tensor(std::vector<float>{1, 2, 3, 4}); };
  auto write = [](Tensor& t) {
    NoGradGuard g;
    t.add_(1.0);
  };
  {  // div: the divisor for either gradient, the dividend only for the divisor's.
    Tensor x = v4().requires_grad_(true), a = v4() * 1.0, b = v4() * 2.0;
    Tensor xx = x * 1.0;
    Tensor q = xx / b;  // saves b, not xx
    Tensor r = a / x;   // saves a and x
    write(xx);
    q.sum().backward();
    EXPECT_EQ(x.grad().to_vector<float>(), std::vector<float>({0.5f, 0.25f, 1.0f / 6, 0.125f}));
    Tensor q2 = (x * 1.0) / b;
    write(b);
    testing::expect_error([&] { q2.sum().backward(); }, {"modified by an in-place operation", "div"});
    write(a);
    testing::expect_error([&] { r.sum().backward(); }, {"modified by an in-place operation", "div"});
  }
  {  // mul: `y = x * c` with c constant saves c, not x.
    Tensor w = v4().requires_grad_(true);
    Tensor x = w * 1.0, c = v4() * 3.0;
    Tensor y = x * c;
    write(x);
    y.sum().backward();
    EXPECT_EQ(w.grad().to_vector<float>(), std::vector<float>({3, 6, 9, 12}));
    Tensor w2 = v4().requires_grad_(true);
    Tensor x2 = w2 * 1.0, c2 = v4() * 3.0;
    Tensor y2 = x2 * c2;
    write(c2);
    testing::expect_error([&] { y2.sum().backward(); }, {"modified by an in-place operation", "mul"});
  }
  {  // convolution never saves its bias; index_add saves its index only.
    Tensor x = ones({1, 1, 3, 3}).requires_grad_(true), w = ones({2, 1, 2, 2}).requires_grad_(true);
    Tensor b0 = zeros({2}).requires_grad_(true);
    Tensor b = b0 * 1.0;
    Tensor y = conv2d(x, w, b);
    write(b);
    y.sum().backward();
    EXPECT_EQ(b0.grad().to_vector<float>(), std::vector<float>({4, 4}));
    Tensor s0 = ones({2, 2}).requires_grad_(true), t0 = zeros({3, 2}).requires_grad_(true);
    Tensor s = s0 * 2.0, t = t0 * 1.0;
    Tensor z = t.index_add(0, tensor(std::vector<int64_t>{0, 2}), s);
    write(s);
    write(t);
    z.sum().backward();
    EXPECT_EQ(s0.grad().to_vector<float>(), std::vector<float>({2, 2, 2, 2}));
    EXPECT_EQ(t0.grad().to_vector<float>(), std::vector<float>(6, 1.0f));
  }
  {  // max pooling keeps its indices, not its result.
    Tensor x = arange(0, 16, 1, kFloat32).view({1, 1, 4, 4}).requires_grad_(true);
    auto [o2, i2] = max_pool2d_with_indices(x, {2, 2});
    write(o2);
    o2.sum().backward();
    Tensor x3 = arange(0, 8, 1, kFloat32).view({1, 1, 2, 2, 2}).requires_grad_(true);
    auto [o3, i3] = max_pool3d_with_indices(x3, {2, 2, 2});
    write(o3);
    o3.sum().backward();
    EXPECT_EQ(x3.grad().to_vector<float>(), std::vector<float>({0, 0, 0, 0, 0, 0, 0, 1}));
  }
  {  // mm: each factor only for the other's gradient.
    Tensor w = ones({2, 2}).requires_grad_(true);
    Tensor a = w * 1.0, c = ones({2, 2}) * 1.0;
    Tensor y = mm(a, c);
    write(a);
    y.sum().backward();
    EXPECT_EQ(w.grad().to_vector<float>(), std::vector<float>(4, 2.0f));
  }
}

}  // namespace
}  // namespace kiln
