// Issue 27, case 7: gradients into non-contiguous inputs, and what div saves for backward.
#include <gtest/gtest.h>

#include <vector>

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

}  // namespace
}  // namespace kiln
