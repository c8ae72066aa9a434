// The shape and indexing functions composed of public ops (src/ops/shape_compose.cpp):
// values against loops written here, gradients against finite differences, torch's
// errors, and eager against compiled. PyTorch's own answers on edge cases are in
// test_torch_shape.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "kiln/kiln.h"
#include "tests/unit/expect_error.h"

namespace kiln {
namespace {

using kiln::testing::expect_error;
using V = std::vector<double>;

Tensor rnd(std::vector<int64_t> shape, uint64_t seed = 1) {
  manual_seed(seed);
  return randn(shape, kFloat64);
}
V vals(const Tensor& t) { return t.to_vector<double>(); }

// A row-major reader of a tensor's values: at({i, j, ...}).
struct Ref {
  V v;
  std::vector<int64_t> s;
  explicit Ref(const Tensor& t) : v(vals(t)), s(t.sizes().begin(), t.sizes().end()) {}
  double at(std::vector<int64_t> idx) const {
    int64_t off = 0;
    for (size_t d = 0; d < s.size(); ++d) off = off * s[d] + idx[d];
    return v[static_cast<size_t>(off)];
  }
};

// Every index of `shape` in row-major order.
void for_each_index(const std::vector<int64_t>& shape, const std::function<void(const std::vector<int64_t>&)>& f) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    f(idx);
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0 && ++idx[d] == shape[d]; --d) idx[d] = 0;
  }
}

// got must have `shape` and got[idx] == want(idx) for every idx.
void expect_values(const Tensor& got, const std::vector<int64_t>& shape,
                   const std::function<double(const std::vector<int64_t>&)>& want, double tol = 1e-12) {
  ASSERT_EQ(got.sizes().vec(), shape);
  Ref g(got);
  for_each_index(shape, [&](const std::vector<int64_t>& idx) {
    EXPECT_NEAR(g.at(idx), want(idx), tol) << "at index " << ::testing::PrintToString(idx);
  });
}

bool grad_ok(const std::function<Tensor(const std::vector<Tensor>&)>& f, std::vector<Tensor> in) {
  for (auto& t : in) t = t.detach().clone().requires_grad_(true);
  return gradcheck([&](const std::vector<Tensor>& x) { return std::vector<Tensor>{f(x)}; }, in);
}

TEST(ShapeOps, Movedim) {
  Tensor x = rnd({2, 3, 4});
  Ref r(x);
  // source 0 -> 2, 1 -> 0; the remaining dim 2 fills slot 1.
  expect_values(movedim(x, {0, 1}, {2, 0}), {3, 4, 2}, [&](auto& i) { return r.at({i[2], i[0], i[1]}); });
  expect_values(x.movedim(-1, 0), {4, 2, 3}, [&](auto& i) { return r.at({i[1], i[2], i[0]}); });
  expect_values(moveaxis(x, 1, -1), {2, 4, 3}, [&](auto& i) { return r.at({i[0], i[2], i[1]}); });
  Tensor xt = x.transpose(0, 2);  // non-contiguous [4, 3, 2]
  expect_values(movedim(xt, 0, 2), {3, 2, 4}, [&](auto& i) { return r.at({i[1], i[0], i[2]}); });
  EXPECT_EQ(movedim(tensor(Scalar(2.0)), 0, -1).dim(), 0);
  EXPECT_TRUE(grad_ok([](auto& in) { return movedim(in[0], {0, 2}, {1, 0}); }, {x}));
  expect_error([&] { movedim(x, {0, 0}, {1, 2}); }, {"movedim", "repeated dim in `source`", "[0, 0]"});
  expect_error([&] { movedim(x, {0, 1}, {1, 1}); }, {"movedim", "`destination`"});
  expect_error([&] { movedim(x, {0, 1}, {0}); }, {"movedim", "[0, 1]", "[0]"});
  expect_error([&] { movedim(x, 3, 0); }, {"movedim", "out of range"});
}

TEST(ShapeOps, BroadcastToAndTile) {
  Tensor x = rnd({3, 1});
  Ref r(x);
  expect_values(broadcast_to(x, {2, 3, 4}), {2, 3, 4}, [&](auto& i) { return r.at({i[1], 0}); });
  expect_values(x.broadcast_to({-1, 2}), {3, 2}, [&](auto& i) { return r.at({i[0], 0}); });
  expect_error([&] { broadcast_to(x, {3}); }, {"broadcast_to", "number of sizes provided (1)", "[3, 1]"});
  expect_error([&] { broadcast_to(x, {4, 2}); }, {"broadcast_to", "(4)", "existing size (3)", "dimension 0"});

  Tensor y = rnd({2, 3}, 2);
  Ref ry(y);
  expect_values(tile(y, {2}), {2, 6}, [&](auto& i) { return ry.at({i[0], i[1] % 3}); });
  expect_values(y.tile({2, 1, 2}), {2, 2, 6}, [&](auto& i) { return ry.at({i[1], i[2] % 3}); });
  expect_values(tile(y.t(), {2, 2}), {6, 4}, [&](auto& i) { return ry.at({i[1] % 2, i[0] % 3}); });
  expect_values(tile(y, {}), {2, 3}, [&](auto& i) { return ry.at(i); });
  EXPECT_EQ(tile(y, {0, 2}).sizes().vec(), (std::vector<int64_t>{0, 6}));
  EXPECT_EQ(tile(tensor(Scalar(1.5)), {}).dim(), 0);
  EXPECT_TRUE(grad_ok([](auto& in) { return tile(in[0], {3, 1, 2}); }, {y}));
  expect_error([&] { tile(y, {-1}); }, {"tile", "negative", "[-1]"});
}

TEST(ShapeOps, Diff) {
  Tensor x = rnd({3, 4});
  Ref r(x);
  expect_values(diff(x), {3, 3}, [&](auto& i) { return r.at({i[0], i[1] + 1}) - r.at(i); });
  expect_values(x.diff(2, 0), {1, 4}, [&](auto& i) { return r.at({2, i[1]}) - 2 * r.at({1, i[1]}) + r.at({0, i[1]}); });
  Tensor pre = rnd({3, 1}, 3), app = rnd({3, 2}, 4);
  Ref rp(pre), ra(app);
  // [pre | x | app] along dim 1, then one difference.
  auto joined = [&](int64_t i, int64_t j) {
    return j == 0 ? rp.at({i, 0}) : j <= 4 ? r.at({i, j - 1}) : ra.at({i, j - 5});
  };
  expect_values(diff(x, 1, -1, pre, app), {3, 6}, [&](auto& i) { return joined(i[0], i[1] + 1) - joined(i[0], i[1]); });
  expect_values(diff(x, 0), {3, 4}, [&](auto& i) { return r.at(i); });
  EXPECT_EQ(diff(x, 7).sizes().vec(), (std::vector<int64_t>{3, 0}));  // more differences than entries
  // Non-contiguous input: differences along x.t()'s dim 0 are along x's dim 1.
  expect_values(diff(x.t(), 1, 0), {3, 3}, [&](auto& i) { return r.at({i[1], i[0] + 1}) - r.at({i[1], i[0]}); });
  Tensor b = diff(tensor<bool>({true, false, false, true}));
  EXPECT_EQ(b.dtype(), kBool);
  EXPECT_EQ(vals(b), (V{1, 0, 1}));
  EXPECT_EQ(vals(diff(tensor<int64_t>({1, 5, 2}))), (V{4, -3}));
  EXPECT_TRUE(grad_ok([](auto& in) { return diff(in[0], 2, 1, in[1], in[2]); }, {x, pre, app}));
  expect_error([&] { diff(tensor(Scalar(1.0))); }, {"diff", "at least one-dimensional"});
  expect_error([&] { diff(x, -1); }, {"diff", "non-negative", "-1"});
  expect_error([&] { diff(x, 1, -1, rnd({3})); }, {"diff", "prepend", "same number of dimensions", "[3]"});
  expect_error([&] { diff(x, 1, -1, {}, rnd({2, 1})); }, {"diff", "append", "[2, 1]", "[3, 4]"});
}

TEST(ShapeOps, TraceDiagDiagEmbed) {
  Tensor x = rnd({3, 4});
  Ref r(x);
  EXPECT_NEAR(trace(x).item<double>(), r.at({0, 0}) + r.at({1, 1}) + r.at({2, 2}), 1e-12);
  EXPECT_NEAR(x.t().trace().item<double>(), trace(x).item<double>(), 1e-12);
  Tensor ti = trace(arange(6, TensorOptions(kInt32)).view({2, 3}));
  EXPECT_EQ(ti.dtype(), kInt64);
  EXPECT_EQ(ti.item<int64_t>(), 4);
  EXPECT_EQ(trace(zeros({0, 3})).item<double>(), 0.0);
  EXPECT_TRUE(grad_ok([](auto& in) { return trace(in[0]); }, {x}));
  expect_error([&] { trace(rnd({3})); }, {"trace", "expected a matrix", "[3]"});

  Tensor v = rnd({3}, 2);
  Ref rv(v);
  for (int64_t k : {0, 1, -2}) {
    SCOPED_TRACE(k);
    int64_t m = 3 + std::abs(k);
    expect_values(diag(v, k), {m, m}, [&](auto& i) { return i[1] - i[0] != k ? 0.0 : rv.at({k >= 0 ? i[0] : i[1]}); });
  }
  expect_values(x.diag(1), {3}, [&](auto& i) { return r.at({i[0], i[0] + 1}); });
  expect_values(diag(x, -1), {2}, [&](auto& i) { return r.at({i[0] + 1, i[0]}); });
  expect_values(diag(x.t()), {3}, [&](auto& i) { return r.at({i[0], i[0]}); });
  EXPECT_EQ(diag(x, 5).numel(), 0);
  EXPECT_EQ(diag(zeros({0}), 2).sizes().vec(), (std::vector<int64_t>{2, 2}));
  EXPECT_TRUE(grad_ok([](auto& in) { return diag(in[0], -1); }, {v}));
  EXPECT_TRUE(grad_ok([](auto& in) { return diag(in[0], 1); }, {x}));
  expect_error([&] { diag(rnd({2, 2, 2})); }, {"diag", "1-D", "2-D", "[2, 2, 2]"});
  expect_error([&] { diag(tensor(Scalar(1.0))); }, {"diag", "[]"});

  // [2, 4] on diagonal 1 of dims (0, 2): out[i, b, j] = x[b, i] where j == i + 1.
  expect_values(diag_embed(x.narrow(0, 0, 2).t().t(), 1, 0, 2), {5, 2, 5}, [&](auto& i) {
    return i[2] - i[0] == 1 ? r.at({i[1], i[0]}) : 0.0;
  });
  expect_values(x.diag_embed(-1), {3, 5, 5}, [&](auto& i) { return i[2] - i[1] == -1 ? r.at({i[0], i[2]}) : 0.0; });
  expect_values(diag_embed(x.t(), 0, -1, -2), {4, 3, 3}, [&](auto& i) {
    return i[1] == i[2] ? r.at({i[1], i[0]}) : 0.0;
  });
  EXPECT_TRUE(grad_ok([](auto& in) { return diag_embed(in[0], -2, 2, 0); }, {x}));
  expect_error([&] { diag_embed(x, 0, 0, 0); }, {"diag_embed", "cannot be identical", "0, 0"});
  expect_error([&] { diag_embed(x, 0, 0, 3); }, {"diag_embed", "out of range"});
}

TEST(ShapeOps, Kron) {
  Tensor a = rnd({2, 3}), b = rnd({4, 2}, 2);
  Ref ra(a), rb(b);
  expect_values(kron(a, b), {8, 6}, [&](auto& i) { return ra.at({i[0] / 4, i[1] / 2}) * rb.at({i[0] % 4, i[1] % 2}); });
  expect_values(a.t().kron(b), {12, 4}, [&](auto& i) {
    return ra.at({i[1] / 2, i[0] / 4}) * rb.at({i[0] % 4, i[1] % 2});
  });
  Tensor c = rnd({3}, 3);
  Ref rc(c);
  // Lower rank: leading 1s.
  expect_values(kron(c, b), {4, 6}, [&](auto& i) { return rc.at({i[1] / 2}) * rb.at({i[0], i[1] % 2}); });
  Tensor s = kron(tensor(Scalar(2.0)), tensor(Scalar(3.0)));
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item<double>(), 6.0);
  Tensor mixed = kron(tensor<int64_t>({1, 2}), tensor<double>({1, 2}));
  EXPECT_EQ(mixed.dtype(), kFloat64);
  EXPECT_EQ(vals(mixed), (V{1, 2, 2, 4}));
  EXPECT_EQ(kron(zeros({0, 2}), b).sizes().vec(), (std::vector<int64_t>{0, 4}));
  EXPECT_TRUE(grad_ok([](auto& in) { return kron(in[0], in[1]); }, {a, c}));
}

TEST(ShapeOps, Tensordot) {
  Tensor a = rnd({2, 3, 4}), b = rnd({4, 5, 3}, 2);
  Ref ra(a), rb(b);
  // Contract a's dims (1, 2) with b's (2, 0): out[i, j] = sum_{p, q} a[i, p, q] b[q, j, p].
  expect_values(
      tensordot(a, b, {1, 2}, {2, 0}), {2, 5},
      [&](auto& i) {
        double s = 0;
        for (int64_t p = 0; p < 3; ++p)
          for (int64_t q = 0; q < 4; ++q) s += ra.at({i[0], p, q}) * rb.at({q, i[1], p});
        return s;
      },
      1e-10);
  Tensor c = rnd({4, 6}, 3);
  Ref rc(c);
  expect_values(
      tensordot(a, c, 1), {2, 3, 6},
      [&](auto& i) {
        double s = 0;
        for (int64_t q = 0; q < 4; ++q) s += ra.at({i[0], i[1], q}) * rc.at({q, i[2]});
        return s;
      },
      1e-10);
  // b' = b.permute(2, 0, 1) is [3, 4, 5] and not contiguous: out[i, j] = sum a[i, p, q] b'[p, q, j].
  expect_values(
      tensordot(a, b.permute({2, 0, 1}), 2), {2, 5},
      [&](auto& i) {
        double s = 0;
        for (int64_t p = 0; p < 3; ++p)
          for (int64_t q = 0; q < 4; ++q) s += ra.at({i[0], p, q}) * rb.at({q, i[1], p});
        return s;
      },
      1e-10);
  EXPECT_EQ(tensordot(a, c, 0).sizes().vec(), (std::vector<int64_t>{2, 3, 4, 4, 6}));
  Tensor ia = tensor<int64_t>({1, 2, 3, 4}, {2, 2}), ib = tensor<int64_t>({5, 6, 7, 8}, {2, 2});
  Tensor ic = tensordot(ia, ib, {1}, {0});
  EXPECT_EQ(ic.dtype(), kInt64);
  EXPECT_EQ(vals(ic), (V{19, 22, 43, 50}));
  Tensor ic32 = tensordot(ia.to(kInt32), ib.to(kInt32), 1);
  EXPECT_EQ(ic32.dtype(), kInt32);
  EXPECT_EQ(vals(ic32), (V{19, 22, 43, 50}));
  EXPECT_TRUE(grad_ok([](auto& in) { return tensordot(in[0], in[1], {1, -1}, {2, 0}); }, {a, b}));
  expect_error([&] { tensordot(a, b, -1); }, {"tensordot", "dims >= 0", "-1"});
  expect_error([&] { tensordot(a, b, 4); }, {"tensordot", "dims=4"});
  expect_error([&] { tensordot(a, b, {0}, {0, 1}); }, {"tensordot", "same length"});
  expect_error([&] { tensordot(a, b, {1}, {1}); }, {"tensordot", "size 3 in dim 1", "size 5 in dim 1"});
  expect_error([&] { tensordot(a, b, {1, 1}, {2, 2}); }, {"tensordot", "repeated dim"});
  expect_error([&] { tensordot(a, b.to(kFloat32), 1); }, {"tensordot", "same dtype"});
}

TEST(ShapeOps, Rot90) {
  Tensor x = rnd({2, 3});
  Ref r(x);
  expect_values(rot90(x), {3, 2}, [&](auto& i) { return r.at({i[1], 2 - i[0]}); });
  expect_values(x.rot90(2), {2, 3}, [&](auto& i) { return r.at({1 - i[0], 2 - i[1]}); });
  expect_values(rot90(x, -1), {3, 2}, [&](auto& i) { return r.at({1 - i[1], i[0]}); });
  expect_values(rot90(x, 7, {1, 0}), {3, 2}, [&](auto& i) { return r.at({i[1], 2 - i[0]}); });  // 7 = 3 turns back
  expect_values(rot90(x, 4), {2, 3}, [&](auto& i) { return r.at(i); });
  Tensor y = rnd({2, 3, 4}, 2);
  Ref ry(y);
  expect_values(rot90(y, 1, {-1, 0}), {4, 3, 2}, [&](auto& i) { return ry.at({1 - i[2], i[1], i[0]}); });
  expect_values(rot90(x.t()), {2, 3}, [&](auto& i) { return r.at({1 - i[0], i[1]}); });
  EXPECT_TRUE(grad_ok([](auto& in) { return rot90(in[0], 3, {2, 1}); }, {y}));
  expect_error([&] { rot90(x, 1, {0}); }, {"rot90", "rotation dims == 2", "dims = 1"});
  expect_error([&] { rot90(rnd({3}), 1, {0, 1}); }, {"rot90", "total dims >= 2", "[3]"});
  expect_error([&] { rot90(x, 1, {0, -2}); }, {"rot90", "to be different", "dim1 = -2"});
}

TEST(ShapeOps, TakeAlongDim) {
  Tensor x = rnd({3, 4});
  Ref r(x);
  Tensor idx = tensor<int64_t>({3, 0, 1, 1, 2, 2}, {3, 2});
  Ref ri(idx);
  expect_values(take_along_dim(x, idx, 1), {3, 2}, [&](auto& i) {
    return r.at({i[0], static_cast<int64_t>(ri.at(i))});
  });
  // Broadcast: one row of indices for every row.
  Tensor row = tensor<int64_t>({2, 0}, {1, 2});
  expect_values(x.take_along_dim(row, -1), {3, 2}, [&](auto& i) { return r.at({i[0], i[1] == 0 ? 2 : 0}); });
  std::vector<int64_t> picks = {2, 0, 1, 2};
  expect_values(take_along_dim(x.t(), tensor<int64_t>(picks, {4, 1}), 1), {4, 1}, [&](auto& i) {
    return r.at({picks[i[0]], i[0]});
  });
  expect_values(take_along_dim(x, tensor<int64_t>({11, 0})), {2}, [&](auto& i) {
    return i[0] ? r.at({0, 0}) : r.at({2, 3});
  });
  EXPECT_TRUE(grad_ok([&](auto& in) { return take_along_dim(in[0], idx, 1); }, {x}));
  expect_error([&] { take_along_dim(x, tensor<int>({0}, {1, 1}), 1); }, {"take_along_dim", "int64", "int32"});
  expect_error([&] { take_along_dim(x, tensor<int64_t>({0}), 1); },
               {"take_along_dim", "same number of dimensions", "[3, 4]", "[1]"});
  expect_error([&] { take_along_dim(x, tensor<int64_t>({4}, {1, 1}), 1); }, {"take_along_dim", "index 4", "size 4"});
  expect_error([&] { take_along_dim(tensor(Scalar(1.0)), tensor(Scalar(int64_t{0})), 0); },
               {"take_along_dim", "no dimensions"});
}

TEST(ShapeOps, IndexFillAndIndexCopy) {
  Tensor x = rnd({3, 4});
  Ref r(x);
  Tensor idx = tensor<int64_t>({0, -1});
  expect_values(index_fill(x, 1, idx, 7.5), {3, 4}, [&](auto& i) { return i[1] == 0 || i[1] == 3 ? 7.5 : r.at(i); });
  expect_values(x.t().index_fill(0, tensor(Scalar(int64_t{1})), tensor(Scalar(-2.0))), {4, 3}, [&](auto& i) {
    return i[0] == 1 ? -2.0 : r.at({i[1], i[0]});
  });
  Tensor xi = tensor<int64_t>({1, 2, 3});
  EXPECT_EQ(vals(index_fill(xi, 0, tensor<int64_t>({1}), 7.9)), (V{1, 7, 3}));  // as torch: converted
  EXPECT_EQ(index_fill(tensor(Scalar(3.0)), 0, tensor<int64_t>({-1}), 5.0).item<double>(), 5.0);
  EXPECT_EQ(vals(index_fill(x, 0, tensor<int64_t>({}), 1.0)), vals(x));
  EXPECT_TRUE(grad_ok(
      [](auto& in) {
        return index_fill(in[0], 0, tensor<int64_t>({2, 0, 2}), in[1]);
      },
      {x, tensor(Scalar(0.5), kFloat64)}));
  expect_error([&] { index_fill(x, 1, tensor<int64_t>({4}), 1.0); }, {"index_fill", "index 4", "size 4"});
  expect_error([&] { index_fill(x, 1, tensor<int64_t>({-5}), 1.0); }, {"index_fill", "index -5"});
  expect_error([&] { index_fill(x, 1, tensor<int>({0}), 1.0); }, {"index_fill", "int64", "int32"});
  expect_error([&] { index_fill(x, 1, tensor<int64_t>({0}, {1, 1}), 1.0); }, {"index_fill", "vector", "[1, 1]"});
  expect_error([&] { index_fill(x, 1, tensor<int64_t>({0}), rnd({1})); }, {"index_fill", "0-dimensional", "[1]"});

  Tensor src = rnd({3, 2}, 2);
  Ref rs(src);
  expect_values(index_copy(x, 1, tensor<int64_t>({3, 0}), src), {3, 4}, [&](auto& i) {
    return i[1] == 3 ? rs.at({i[0], 0}) : i[1] == 0 ? rs.at({i[0], 1}) : r.at(i);
  });
  expect_values(x.t().index_copy(0, tensor<int64_t>({2, 1}), src.t()), {4, 3}, [&](auto& i) {
    return i[0] == 2 ? rs.at({i[1], 0}) : i[0] == 1 ? rs.at({i[1], 1}) : r.at({i[1], i[0]});
  });
  expect_values(index_copy(x, 0, tensor(Scalar(int64_t{1})), rnd({1, 4}, 5)), {3, 4}, [&](auto& i) {
    return i[0] == 1 ? Ref(rnd({1, 4}, 5)).at({0, i[1]}) : r.at(i);
  });
  EXPECT_EQ(index_copy(tensor(Scalar(3.0)), 0, tensor(Scalar(int64_t{0})), tensor(Scalar(5.0))).item<double>(), 5.0);
  EXPECT_TRUE(grad_ok([](auto& in) { return index_copy(in[0], 1, tensor<int64_t>({1, 3}), in[1]); }, {x, src}));
  expect_error(
      [&] {
        index_copy(x, 1, tensor<int64_t>({0, 1, 2}), src);
      },
      {"index_copy", "number of indices (3)", "(2)"});
  expect_error(
      [&] {
        index_copy(x, 1, tensor<int64_t>({0, 1}), rnd({2, 2}));
      },
      {"index_copy", "slice shapes", "[2, 2]"});
  expect_error([&] { index_copy(x, 1, tensor<int64_t>({0, 1}), src.to(kFloat32)); }, {"index_copy", "same dtype"});
  expect_error([&] { index_copy(x, 1, tensor<int64_t>({0, 4}), src); }, {"index_copy", "index 4", "size 4"});
  expect_error([&] { index_copy(x, 1, tensor<int64_t>({-1, 0}), src); }, {"index_copy", "index -1"});
  expect_error([&] { index_copy(x, 1, tensor<int64_t>({0}), rnd({3})); }, {"index_copy", "dimensionality"});
  expect_error([&] { index_copy(x, 1, tensor<int64_t>({0, 1}, {1, 2}), src); }, {"index_copy", "dimension 1 or 0"});
}

TEST(ShapeOps, RepeatInterleave) {
  Tensor x = rnd({2, 3});
  Ref r(x);
  expect_values(repeat_interleave(x, 2), {12}, [&](auto& i) { return r.at({i[0] / 6, (i[0] / 2) % 3}); });
  expect_values(x.repeat_interleave(3, -1), {2, 9}, [&](auto& i) { return r.at({i[0], i[1] / 3}); });
  expect_values(x.t().repeat_interleave(2, 0), {6, 2}, [&](auto& i) { return r.at({i[1], i[0] / 2}); });
  std::vector<int64_t> rows = {0, 1, 1, 1};
  expect_values(repeat_interleave(x, tensor<int64_t>({1, 3}), 0), {4, 3}, [&](auto& i) {
    return r.at({rows[i[0]], i[1]});
  });
  std::vector<int64_t> cols = {0, 0, 2};
  expect_values(x.repeat_interleave(tensor<int>({2, 0, 1}), 1), {2, 3}, [&](auto& i) {
    return r.at({i[0], cols[i[1]]});
  });
  expect_values(repeat_interleave(x, tensor(Scalar(int64_t{2})), 0), {4, 3}, [&](auto& i) {
    return r.at({i[0] / 2, i[1]});
  });
  EXPECT_EQ(repeat_interleave(x, tensor<int64_t>({0, 0, 1, 0, 0, 0})).sizes().vec(), (std::vector<int64_t>{1}));
  EXPECT_EQ(vals(repeat_interleave(tensor<int64_t>({2, 0, 1}))), (V{0, 0, 2}));
  EXPECT_EQ(repeat_interleave(x, 0, 1).sizes().vec(), (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(vals(repeat_interleave(tensor(Scalar(3.0)), 2)), (V{3, 3}));
  EXPECT_TRUE(grad_ok([](auto& in) { return repeat_interleave(in[0], 2, 0); }, {x}));
  EXPECT_TRUE(grad_ok([](auto& in) { return repeat_interleave(in[0], tensor<int64_t>({3, 0, 2}), 1); }, {x}));
  expect_error([&] { repeat_interleave(x, -1); }, {"repeat_interleave", "negative"});
  expect_error([&] { repeat_interleave(x, tensor<int64_t>({1, -2}), 0); }, {"repeat_interleave", "negative", "-2"});
  expect_error(
      [&] {
        repeat_interleave(x, tensor<int64_t>({1, 2}), 1);
      },
      {"repeat_interleave", "same size", "repeats.size(0) = 2", "input.size(1) = 3"});
  expect_error([&] { repeat_interleave(x, tensor<double>({1, 2}), 0); }, {"repeat_interleave", "int64", "float64"});
  expect_error(
      [&] {
        repeat_interleave(x, tensor<int64_t>({1, 2}, {1, 2}), 0);
      },
      {"repeat_interleave", "0-dim or 1-dim"});
  expect_error([&] { repeat_interleave(tensor(Scalar(int64_t{2}))); }, {"repeat_interleave", "1-D"});
  expect_error([&] { repeat_interleave(tensor(Scalar(1.0)), 2, 0); }, {"repeat_interleave", "no dimensions"});
}

TEST(ShapeOps, PixelShuffle) {
  int64_t r = 2;
  Tensor x = rnd({2, 8, 2, 3});
  Ref rx(x);
  // out[n, c, h*r + i, w*r + j] = x[n, c*r*r + i*r + j, h, w]
  expect_values(pixel_shuffle(x, r), {2, 2, 4, 6}, [&](auto& o) {
    return rx.at({o[0], o[1] * 4 + (o[2] % 2) * 2 + o[3] % 2, o[2] / 2, o[3] / 2});
  });
  Tensor y = rnd({3, 1, 4, 6}, 2);
  Ref ry(y);
  expect_values(pixel_unshuffle(y, r), {3, 4, 2, 3}, [&](auto& o) {
    return ry.at({o[0], o[1] / 4, o[2] * 2 + (o[1] % 4) / 2, o[3] * 2 + o[1] % 2});
  });
  EXPECT_EQ(vals(pixel_unshuffle(pixel_shuffle(x, r), r)), vals(x));
  Tensor z = rnd({2, 3, 9, 2, 1}, 3);  // two batch dims
  EXPECT_EQ(pixel_shuffle(z, 3).sizes().vec(), (std::vector<int64_t>{2, 3, 1, 6, 3}));
  EXPECT_EQ(vals(pixel_unshuffle(pixel_shuffle(z, 3), 3)), vals(z));
  EXPECT_EQ(vals(pixel_shuffle(x.transpose(2, 3), 2)), vals(pixel_shuffle(x.transpose(2, 3).contiguous(), 2)));
  EXPECT_EQ(pixel_shuffle(zeros({0, 4, 1, 1}), 2).sizes().vec(), (std::vector<int64_t>{0, 1, 2, 2}));
  EXPECT_TRUE(grad_ok([](auto& in) { return pixel_shuffle(in[0], 2); }, {x}));
  EXPECT_TRUE(grad_ok([](auto& in) { return pixel_unshuffle(in[0], 2); }, {y}));
  expect_error([&] { pixel_shuffle(zeros({1, 5, 2, 2}), 2); }, {"pixel_shuffle", "size(-3)=5", "divisible by 4"});
  expect_error([&] { pixel_shuffle(zeros({4, 2}), 2); }, {"pixel_shuffle", "at least 3 dimensions", "[4, 2]"});
  expect_error([&] { pixel_shuffle(zeros({4, 2, 2}), 0); }, {"pixel_shuffle", "positive", "0"});
  expect_error([&] { pixel_unshuffle(zeros({1, 1, 5, 4}), 2); }, {"pixel_unshuffle", "height", "size(-2)=5"});
  expect_error([&] { pixel_unshuffle(zeros({1, 1, 4, 5}), 2); }, {"pixel_unshuffle", "width", "size(-1)=5"});
}

TEST(ShapeOps, Meshgrid) {
  Tensor a = rnd({2}), b = rnd({3}, 2), c = tensor(Scalar(4.0), kFloat64);
  Ref ra(a), rb(b);
  auto ij = meshgrid({a, b, c});
  ASSERT_EQ(ij.size(), 3u);
  expect_values(ij[0], {2, 3, 1}, [&](auto& i) { return ra.at({i[0]}); });
  expect_values(ij[1], {2, 3, 1}, [&](auto& i) { return rb.at({i[1]}); });
  expect_values(ij[2], {2, 3, 1}, [&](auto&) { return 4.0; });
  auto xy = meshgrid({a, b}, "xy");
  expect_values(xy[0], {3, 2}, [&](auto& i) { return ra.at({i[1]}); });
  expect_values(xy[1], {3, 2}, [&](auto& i) { return rb.at({i[0]}); });
  auto one = meshgrid({a}, "xy");
  expect_values(one[0], {2}, [&](auto& i) { return ra.at(i); });
  EXPECT_EQ(meshgrid({zeros({0}, kFloat64), b})[1].sizes().vec(), (std::vector<int64_t>{0, 3}));
  EXPECT_TRUE(grad_ok(
      [](auto& in) {
        auto g = meshgrid({in[0], in[1]}, "xy");
        return g[0] * g[1];
      },
      {a, b}));
  expect_error([&] { meshgrid({}); }, {"meshgrid", "non-empty"});
  expect_error([&] { meshgrid({a, zeros({2, 2})}); }, {"meshgrid", "0-D or 1-D", "tensor 1", "[2, 2]"});
  expect_error([&] { meshgrid({a, b.to(kFloat32)}); }, {"meshgrid", "same dtype"});
  expect_error([&] { meshgrid({a}, "foo"); }, {"meshgrid", "\"xy\" or \"ij\"", "foo"});
}

TEST(ShapeOps, Cross) {
  Tensor a = rnd({4, 3}), b = rnd({4, 3}, 2);
  Ref ra(a), rb(b);
  auto comp = [&](const Ref& p, const Ref& q, int64_t n, int64_t k) {
    int64_t k1 = (k + 1) % 3, k2 = (k + 2) % 3;
    return p.at({n, k1}) * q.at({n, k2}) - p.at({n, k2}) * q.at({n, k1});
  };
  expect_values(linalg_cross(a, b), {4, 3}, [&](auto& i) { return comp(ra, rb, i[0], i[1]); });
  expect_values(cross(a, b, 1), {4, 3}, [&](auto& i) { return comp(ra, rb, i[0], i[1]); });
  expect_values(cross(a.t(), b.t(), 0), {3, 4}, [&](auto& i) { return comp(ra, rb, i[1], i[0]); });
  expect_values(a.t().cross(b.t()), {3, 4}, [&](auto& i) { return comp(ra, rb, i[1], i[0]); });  // first dim of size 3
  Tensor b1 = rnd({1, 3}, 3);
  Ref rb1(b1);
  expect_values(linalg_cross(a, b1, -1), {4, 3}, [&](auto& i) {  // broadcast
    int64_t k1 = (i[1] + 1) % 3, k2 = (i[1] + 2) % 3;
    return ra.at({i[0], k1}) * rb1.at({0, k2}) - ra.at({i[0], k2}) * rb1.at({0, k1});
  });
  EXPECT_EQ(vals(cross(tensor<int64_t>({1, 2, 3}), tensor<int64_t>({4, 5, 6}))), (V{-3, 6, -3}));
  EXPECT_EQ(cross(zeros({0, 3}), zeros({0, 3})).sizes().vec(), (std::vector<int64_t>{0, 3}));
  EXPECT_TRUE(grad_ok([](auto& in) { return linalg_cross(in[0], in[1]); }, {a, b1}));
  expect_error(
      [&] {
        linalg_cross(rnd({2, 3}), rnd({2, 3}), 0);
      },
      {"linalg.cross", "dimension 0", "length 3", "2 and 2"});
  expect_error([&] { cross(rnd({2, 4}), rnd({2, 4})); }, {"cross", "no dimension of size 3", "[2, 4]"});
  expect_error([&] { linalg_cross(rnd({3, 3}), rnd({3})); }, {"linalg.cross", "same number of dimensions"});
  expect_error([&] { cross(a, b.to(kFloat32), 1); }, {"cross", "same dtype"});
  expect_error([&] { linalg_cross(rnd({3, 3}), rnd({2, 3})); }, {"linalg.cross"});
}

// The compositions run the same ops when compiled: eager and aot_eager give eager's values
// and gradients, and tensor repeats (a value read) break the graph instead of failing.
TEST(ShapeOps, CompiledMatchesEager) {
  auto fn = [](const Tensor& x, const Tensor& w) {
    Tensor y = movedim(x, 0, -1).tile({1, 2});                      // [4, 6]
    Tensor z = diag_embed(diff(y, 1, 1, {}, {}), 1).sum(0);         // [6, 6]
    Tensor k = kron(rot90(w), w);                                   // [4, 4]... w [2, 2]
    Tensor t = tensordot(z.narrow(0, 0, 4).narrow(1, 0, 4), k, 1);  // [4, 4]
    Tensor p = pixel_shuffle(t.reshape({4, 2, 2}), 2);              // [1, 4, 4]
    Tensor c = linalg_cross(t.narrow(1, 0, 3), t.narrow(1, 1, 3));
    auto g = meshgrid({t.diag(), w.diag()}, "xy");
    return (p.sum() + trace(t) + c.square().sum() + (g[0] * g[1]).sum() +
            index_fill(t, 1, tensor<int64_t>({0, 2}), 1.5).sum() +
            take_along_dim(t, tensor<int64_t>({1, 0, 3, 2}, {4, 1}), 1).sum() +
            repeat_interleave(t, 2, 0).square().mean() + broadcast_to(w, {3, 2, 2}).sum());
  };
  Tensor x = rnd({3, 4}), w = rnd({2, 2}, 2);
  Tensor xe = x.detach().clone().requires_grad_(), we = w.detach().clone().requires_grad_();
  Tensor want = fn(xe, we);
  want.backward();
  for (const char* backend : {"eager", "aot_eager"}) {
    SCOPED_TRACE(backend);
    CompileOptions o;
    o.backend = backend;
    auto f = compile(fn, o);
    for (int call = 0; call < 2; ++call) {
      Tensor xc = x.detach().clone().requires_grad_(), wc = w.detach().clone().requires_grad_();
      Tensor got = f(xc, wc);
      got.backward();
      EXPECT_NEAR(got.item<double>(), want.item<double>(), 1e-9);
      for (size_t i = 0; i < 12; ++i) {
        EXPECT_NEAR(vals(xc.grad())[i], vals(xe.grad())[i], 1e-9);
        if (i < 4) {
          EXPECT_NEAR(vals(wc.grad())[i], vals(we.grad())[i], 1e-9);
        }
      }
    }
    EXPECT_GE(f.stats().graphs_compiled, 1) << f.stats().str();
    EXPECT_TRUE(f.stats().breaks.empty()) << f.stats().str();  // no value is read
  }
  // Tensor repeats are read on the host: an input's values directly (the function is re-run
  // every call, so new counts give new results), a traced tensor's through a graph break.
  auto data_dep = [](const Tensor& x, const Tensor& reps, bool traced) {
    return repeat_interleave(x.exp(), traced ? reps.abs() : reps, 0).sum(1);
  };
  CompileOptions o;
  o.backend = "aot_eager";
  for (bool traced : {false, true}) {
    SCOPED_TRACE(traced);
    auto f = compile(data_dep, o);
    for (auto r : {std::vector<int64_t>{2, 0, 1}, std::vector<int64_t>{0, 1, 2}, std::vector<int64_t>{1, 3, 0}}) {
      Tensor reps = tensor<int64_t>(r);
      Tensor got = f(x, reps, traced), want2 = data_dep(x, reps, traced);
      ASSERT_EQ(got.sizes().vec(), want2.sizes().vec());
      for (size_t i = 0; i < static_cast<size_t>(got.numel()); ++i) EXPECT_NEAR(vals(got)[i], vals(want2)[i], 1e-12);
    }
    EXPECT_EQ(f.stats().breaks.empty(), !traced) << f.stats().str();
  }
}

}  // namespace
}  // namespace kiln
