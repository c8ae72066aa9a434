// the torch names with no op of their own (aliases and value reads):
// equal, true_divide, swapaxes / swapdims, inverse and matrix_power, against loops written here
// and torch's documented answers. The names in the op table are covered by tests/ops.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kiln/kiln.h"
#include "tests/unit/expect_error.h"

namespace kiln {
namespace {

using kiln::testing::expect_error;
using V = std::vector<double>;

Tensor t64(V v, std::vector<int64_t> s) { return kiln::tensor<double>(v, s, kFloat64); }

// Naive row-major product of n x n matrices.
V naive_mm(const V& a, const V& b, int64_t n) {
  V c(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t k = 0; k < n; ++k) c[i * n + j] += a[i * n + k] * b[k * n + j];
  return c;
}
void expect_near(const V& got, const V& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

TEST(ParityNamesA, Equal) {
  Tensor a = t64({1, 2, 3, 4}, {2, 2});
  EXPECT_TRUE(equal(a, a.clone()));
  EXPECT_TRUE(a.equal(a.t().t()));
  EXPECT_FALSE(equal(a, t64({1, 2, 3, 5}, {2, 2})));
  EXPECT_FALSE(equal(a, t64({1, 2, 3, 4}, {4})));  // same values, other shape
  EXPECT_FALSE(equal(t64({NAN}, {1}), t64({NAN}, {1})));
  EXPECT_TRUE(equal(zeros({0, 3}), zeros({0, 3})));
  EXPECT_FALSE(equal(zeros({0, 3}), zeros({3, 0})));
  // Compared in the promoted dtype, as torch.
  EXPECT_TRUE(equal(a, a.to(kInt64)));
  EXPECT_TRUE(equal(a.t(), a.t().contiguous()));  // non-contiguous
  expect_error([] { equal(Tensor(), zeros({1})); }, {"equal: expected defined tensors"});
}

TEST(ParityNamesA, TrueDivide) {
  Tensor a = kiln::tensor<int64_t>({1, 2, 3}, {3}), b = kiln::tensor<int64_t>({2, 4, 4}, {3});
  Tensor q = true_divide(a, b);
  EXPECT_EQ(q.dtype(), kFloat32);  // integers promote to the default float, as div
  expect_near(q.to_vector<double>(), {0.5, 0.5, 0.75}, 0);
  expect_near(a.true_divide(Scalar(2)).to_vector<double>(), {0.5, 1, 1.5}, 0);
  expect_near(true_divide(a, Scalar(4)).to_vector<double>(), {0.25, 0.5, 0.75}, 0);
  Tensor x = t64({1, 2}, {2});
  x.true_divide_(t64({4, 8}, {2}));
  expect_near(x.to_vector<double>(), {0.25, 0.25}, 0);
  expect_error([a, b] { Tensor y = a.clone(); y.true_divide_(b); }, {"div"});  // float result into int64
}

TEST(ParityNamesA, SwapaxesSwapdims) {
  Tensor x = arange(24, TensorOptions(kFloat64)).view({2, 3, 4});
  Tensor s = swapaxes(x, 0, 2);
  EXPECT_EQ(s.sizes().vec(), (std::vector<int64_t>{4, 3, 2}));
  EXPECT_TRUE(equal(s, x.transpose(0, 2)));
  EXPECT_TRUE(s.is_view());  // an alias of x, as transpose
  EXPECT_TRUE(equal(x.swapdims(-1, 1), x.transpose(1, 2)));
  EXPECT_TRUE(equal(swapdims(x, 1, 1), x));
  expect_error([x] { swapaxes(x, 0, 3); }, {"transpose", "3"});
}

TEST(ParityNamesA, MatrixPower) {
  V a{1, 2, 0, -1, 1, 1, 0.5, 0, 2};
  Tensor A = t64(a, {3, 3});
  expect_near(matrix_power(A, 0).to_vector<double>(), {1, 0, 0, 0, 1, 0, 0, 0, 1}, 0);
  Tensor one = matrix_power(A, 1);
  EXPECT_TRUE(equal(one, A));
  EXPECT_FALSE(one.is_same(A));  // a copy, as torch
  V p = a;
  for (int k = 2; k <= 7; ++k) {
    p = naive_mm(p, a, 3);
    expect_near(A.matrix_power(k).to_vector<double>(), p, 1e-9 * std::abs(p[0]) + 1e-9);
  }
  // Batched, integers, and n = 0 keeps the dtype and batch shape.
  Tensor I = kiln::tensor<int64_t>({2, 1, 0, 3, 1, 1, 1, 0}, {2, 2, 2});
  Tensor I3 = matrix_power(I, 3);
  EXPECT_EQ(I3.dtype(), kInt64);
  expect_near(I3.to_vector<double>(), {8, 19, 0, 27, 3, 2, 2, 1}, 0);  // [[2,1],[0,3]]^3, Fibonacci
  Tensor I0 = matrix_power(I, 0);
  EXPECT_EQ(I0.sizes().vec(), (std::vector<int64_t>{2, 2, 2}));
  expect_near(I0.to_vector<double>(), {1, 0, 0, 1, 1, 0, 0, 1}, 0);
  EXPECT_EQ(matrix_power(zeros({0, 2, 2}), 5).sizes().vec(), (std::vector<int64_t>{0, 2, 2}));
  // The gradient of sum(A^3) against central differences.
  Tensor L = A.clone().requires_grad_(true);
  matrix_power(L, 3).sum().backward();
  V g = L.grad().to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    V hi = a, lo = a;
    hi[i] += 1e-6;
    lo[i] -= 1e-6;
    auto f = [](const V& m) {
      V c = naive_mm(naive_mm(m, m, 3), m, 3);
      double s = 0;
      for (double v : c) s += v;
      return s;
    };
    EXPECT_NEAR(g[i], (f(hi) - f(lo)) / 2e-6, 1e-5) << "element " << i;
  }
  expect_error([] { matrix_power(zeros({3}), 2); },
               {"linalg.matrix_power: The input tensor A must have at least 2 dimensions", "[3]"});
  expect_error([] { matrix_power(zeros({2, 3}), 2); },
               {"linalg.matrix_power: A must be batches of square matrices, but they are 2 by 3 matrices"});
}

TEST(ParityNamesA, InverseAndNegativePowers) {
  if (!linalg::has_lapack()) GTEST_SKIP() << "kiln was built without LAPACK";
  V a{4, 1, 0, 1, 3, 1, 0, 1, 2};
  Tensor A = t64(a, {3, 3});
  Tensor Ai = inverse(A);
  expect_near(naive_mm(Ai.to_vector<double>(), a, 3), {1, 0, 0, 0, 1, 0, 0, 0, 1}, 1e-12);
  EXPECT_TRUE(equal(A.inverse(), linalg::inv(A)));
  V ai = Ai.to_vector<double>();
  expect_near(matrix_power(A, -1).to_vector<double>(), ai, 1e-12);
  expect_near(matrix_power(A, -3).to_vector<double>(), naive_mm(naive_mm(ai, ai, 3), ai, 3), 1e-12);
  Tensor B = stack({A, A * 2.0});
  expect_near(inverse(B).select(0, 1).to_vector<double>(), (Ai / 2.0).to_vector<double>(), 1e-12);
  expect_error([] { inverse(zeros({2, 3})); }, {"linalg.inv", "square"});
  expect_error([] { inverse(zeros({2, 2})); }, {"linalg.inv", "singular"});
  expect_error([] { matrix_power(kiln::tensor<int64_t>({1, 0, 0, 1}, {2, 2}), -1); },
               {"linalg.inv: Expected a floating point or complex tensor as input. Got int64"});
}

}  // namespace
}  // namespace kiln
