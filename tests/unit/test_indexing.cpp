// The C++ API a PyTorch user writes: Python-style indexing (kiln/indexing.h), new_* factories,
// Scalar comparisons with numbers, einsum with tensors as arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kiln/kiln.h"
#include "tests/unit/expect_error.h"

namespace kiln {
namespace {

using kiln::testing::expect_error;
using namespace kiln::indexing;

// x = arange(24).view({2, 3, 4}) as doubles: x[i][j][k] = 12 i + 4 j + k.
Tensor grid() { return arange(24, TensorOptions(kFloat64)).view({2, 3, 4}); }
double at(int64_t i, int64_t j, int64_t k) { return static_cast<double>(12 * i + 4 * j + k); }

TEST(Indexing, BasicIndicesAreViews) {
  Tensor x = grid();
  Tensor a = x.index({Slice(), 0});  // x[:, 0]
  EXPECT_EQ(a.sizes().vec(), (std::vector<int64_t>{2, 4}));
  EXPECT_TRUE(a.is_alias_of(x));
  EXPECT_EQ(a.to_vector<double>(), (std::vector<double>{0, 1, 2, 3, 12, 13, 14, 15}));
  Tensor b = x.index({1, Slice(1, None), Slice(None, None, 2)});  // x[1, 1:, ::2]
  EXPECT_EQ(b.sizes().vec(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(b.to_vector<double>(), (std::vector<double>{at(1, 1, 0), at(1, 1, 2), at(1, 2, 0), at(1, 2, 2)}));
  Tensor c = x.index({"...", -1});  // x[..., -1]
  EXPECT_EQ(c.sizes().vec(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(c.to_vector<double>()[4], at(1, 1, 3));
  Tensor d = x.index({None, Slice(), Ellipsis, None});  // x[None, :, ..., None]
  EXPECT_EQ(d.sizes().vec(), (std::vector<int64_t>{1, 2, 3, 4, 1}));
  EXPECT_EQ(x.index({true}).sizes().vec(), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(x.index({Slice(), false}).sizes().vec(), (std::vector<int64_t>{2, 0, 3, 4}));
  Tensor e = x.index({});
  EXPECT_TRUE(e.is_alias_of(x));
  EXPECT_FALSE(e.is_same(x));
  EXPECT_EQ(x.index({Slice(-2, 100)}).sizes()[0], 2);  // bounds clamp as Python's
}

TEST(Indexing, TensorIndicesGatherAtTheirDims) {
  Tensor x = grid();
  Tensor idx = tensor<int64_t>({2, 0}, {2});
  Tensor a = x.index({Slice(), idx});  // x[:, [2, 0]]
  EXPECT_EQ(a.sizes().vec(), (std::vector<int64_t>{2, 2, 4}));
  EXPECT_EQ(a.to_vector<double>()[4], at(0, 0, 0));
  Tensor b = x.index({"...", idx});  // x[..., [2, 0]]
  EXPECT_EQ(b.sizes().vec(), (std::vector<int64_t>{2, 3, 2}));
  EXPECT_EQ(b.to_vector<double>()[0], at(0, 0, 2));
  Tensor c = x.index({1, Slice(), idx});  // basic then advanced: x[1, :, [2, 0]]
  EXPECT_EQ(c.sizes().vec(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(c.to_vector<double>()[1], at(1, 0, 0));
  Tensor mask = x.index({0, 0}) > 1.5;  // [F, F, T, T]
  Tensor m = x.index({Slice(), Slice(), mask});
  EXPECT_EQ(m.sizes().vec(), (std::vector<int64_t>{2, 3, 2}));
  EXPECT_EQ(m.to_vector<double>()[0], at(0, 0, 2));
  Tensor mask2 = x.index({0}) >= 10.0;  // a mask over two dims: [3, 4], the last 2 elements
  Tensor m2 = x.index({Slice(), mask2});
  EXPECT_EQ(m2.sizes().vec(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(m2.to_vector<double>(), (std::vector<double>{10, 11, 22, 23}));
  Tensor w = randn({5, 3});
  Tensor rows = w[tensor<int64_t>({4, 4, 0}, {3})];  // w[idx]
  EXPECT_EQ(rows.sizes().vec(), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(rows.to_vector<double>()[0], w.to_vector<double>()[12]);
}

TEST(Indexing, IndexPutWritesThroughViews) {
  Tensor x = grid();
  x.index_put_({Slice(), 0}, -1.0);  // x[:, 0] = -1
  EXPECT_EQ(x.index({1, 0, 2}).item<double>(), -1.0);
  EXPECT_EQ(x.index({1, 1, 2}).item<double>(), at(1, 1, 2));
  x.index_put_({"...", Slice(0, 2)}, tensor<double>({7, 8}, {2}));  // broadcast over the rest
  EXPECT_EQ(x.index({1, 2, 1}).item<double>(), 8.0);
  Tensor y = grid();
  y.index_put_({y > 20.0}, 0.0);  // y[y > 20] = 0
  EXPECT_EQ(y.sum().item<double>(), 276.0 - 21 - 22 - 23);
  Tensor z = zeros({4}, TensorOptions(kFloat32));
  z.index_put_({tensor<int64_t>({3, 1}, {2})}, tensor<double>({5, 6}, {2}));  // converts the values' dtype
  EXPECT_EQ(z.to_vector<double>(), (std::vector<double>{0, 6, 0, 5}));
  Tensor g = zeros({2, 3});
  g.index_put_({1, tensor<int64_t>({0, 2}, {2})}, 1.0);  // g[1, [0, 2]] = 1
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{0, 0, 0, 1, 0, 1}));
}

TEST(Indexing, GradientsFlowThroughIndexing) {
  Tensor w = randn({4, 3}).requires_grad_();
  Tensor y = w.index({Slice(1, None), tensor<int64_t>({0, 0}, {2})}).sum();  // w[1:, [0, 0]]
  y.backward();
  std::vector<double> want{0, 0, 0, 2, 0, 0, 2, 0, 0, 2, 0, 0};
  EXPECT_EQ(w.grad().to_vector<double>(), want);
}

TEST(Indexing, BadIndicesAreClearErrors) {
  Tensor x = grid();
  expect_error([&] { (void)x.index({0, 0, 0, 0}); }, {"index", "too many indices", "dimension 3"});
  expect_error([&] { (void)x.index({"...", 0, "..."}); }, {"single ellipsis"});
  expect_error([&] { (void)x.index({"::"}); }, {"\"...\""});
  expect_error([&] { (void)x.index({Slice(None, None, -1)}); }, {"step must be positive"});
  expect_error([&] { (void)x.index({5}); }, {"select"});
  expect_error([&] { (void)x.index({Slice(), tensor<int64_t>({3}, {1})}); }, {"index"});
  expect_error([&] { x.index_put_({0}, ones({5})); }, {"copy_"});
}

TEST(CppApi, NewFactoriesTakeSelfsDtypeAndDevice) {
  Tensor x = ones({2}, TensorOptions(kFloat64));
  Tensor a = x.new_zeros({3, 2});
  EXPECT_EQ(a.dtype(), kFloat64);
  EXPECT_EQ(a.sizes().vec(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(a.sum().item<double>(), 0.0);
  EXPECT_EQ(x.new_ones({2}, kInt32).dtype(), kInt32);
  EXPECT_EQ(x.new_full({2}, 2.5).to_vector<double>(), (std::vector<double>{2.5, 2.5}));
  EXPECT_EQ(x.new_empty({0, 4}).numel(), 0);
  EXPECT_EQ(x.new_zeros({x.size(0)}).numel(), 2);
}

TEST(CppApi, ScalarsCompareWithNumbersByValue) {
  Tensor t = full({}, 2e9);
  EXPECT_TRUE(t.item() > 1e9);
  EXPECT_TRUE(1e9 < t.item());
  EXPECT_TRUE(full({}, 1.0).item() == 1);
  EXPECT_TRUE(full({}, int64_t{3}, kInt64).item() >= 3);
  EXPECT_TRUE(full({}, int64_t{3}, kInt64).item() != 4);
  // int64 compares exactly beyond double's precision.
  EXPECT_TRUE(Scalar(int64_t{9007199254740993}) != int64_t{9007199254740992});
  const Scalar nan(std::numeric_limits<double>::quiet_NaN());
  EXPECT_FALSE(nan == 0.0);
  EXPECT_TRUE(nan != 0.0);
  EXPECT_TRUE(0.0 != nan);
  EXPECT_FALSE(nan < 1.0 || nan >= 1.0 || 1.0 < nan || 1.0 >= nan);
  EXPECT_TRUE(Scalar(true) == 1);
}

TEST(CppApi, EinsumTakesTensorsAsArguments) {
  Tensor a = randn({3, 4}), b = randn({3, 4});
  Tensor got = einsum("ij,ij->i", a, b);
  Tensor want = (a * b).sum(1);
  auto g = got.to_vector<double>(), w = want.to_vector<double>();
  ASSERT_EQ(g.size(), 3u);
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], 1e-5);
  EXPECT_EQ(einsum("ii", eye(3)).item<double>(), 3.0);
}

TEST(CppApi, SizesConvertToScalars) {
  Tensor x = zeros({2, 5});
  EXPECT_EQ(arange(x.size(1)).numel(), 5);
  EXPECT_EQ((ones({2}) * x.size(1)).to_vector<double>(), (std::vector<double>{5, 5}));
}

}  // namespace
}  // namespace kiln
