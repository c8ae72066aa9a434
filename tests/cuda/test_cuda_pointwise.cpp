// CUDA pointwise kernels against the CPU ones: several dtypes, broadcasting, non-contiguous
// inputs, promotion, wrapped scalars and in-place writes.
#include <functional>
#include <string>
#include <vector>

#include "tests/cuda/cuda_test.h"
#include "tests/unit/expect_error.h"

namespace kiln {
namespace {

using testing::expect_close;

// A CPU input with a few special values mixed in for float dtypes.
Tensor sample(std::vector<int64_t> sizes, DType t, uint64_t seed, bool positive = false) {
  manual_seed(seed);
  Tensor x = randn(sizes) * 3;
  if (positive) x = x.abs() + 1;
  if (!is_floating_point(t)) x = x.round();
  return x.to(t);
}

double tol(DType t) { return t == DType::Float16 || t == DType::BFloat16 ? 1e-2 : 1e-5; }

using Unary = std::function<Tensor(const Tensor&)>;
using Binary = std::function<Tensor(const Tensor&, const Tensor&)>;

TEST(CudaPointwise, UnaryFloatOps) {
  KILN_REQUIRE_CUDA();
  std::vector<std::pair<std::string, Unary>> ops = {
      {"exp", [](const Tensor& x) { return exp(x); }},
      {"neg", [](const Tensor& x) { return -x; }},
      {"abs", [](const Tensor& x) { return abs(x); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
      {"gelu", [](const Tensor& x) { return gelu(x); }},
      {"tanh_gelu", [](const Tensor& x) { return gelu(x, "tanh"); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }},
      {"sqrt", [](const Tensor& x) { return sqrt(abs(x)); }},
      {"log1p", [](const Tensor& x) { return log1p(abs(x)); }},
      {"erf", [](const Tensor& x) { return erf(x); }},
      {"floor", [](const Tensor& x) { return floor(x); }},
      {"isnan", [](const Tensor& x) { return isnan(x); }},
      {"relu", [](const Tensor& x) { return relu(x); }},
      {"clamp", [](const Tensor& x) { return clamp(x, -1.0, 2.0); }},
  };
  for (DType t : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    Tensor x = sample({3, 5, 7}, t, 1);
    for (auto& [name, f] : ops) {
      SCOPED_TRACE(name + " " + std::string(dtype_name(t)));
      expect_close(f(x.cuda()), f(x), tol(t), tol(t));
    }
  }
}

TEST(CudaPointwise, IntegerOpsAndPromotion) {
  KILN_REQUIRE_CUDA();
  for (DType t : {DType::Int64, DType::Int32, DType::UInt8, DType::Int8}) {
    Tensor a = sample({4, 6}, t, 2, /*positive=*/true), b = sample({4, 6}, t, 3, /*positive=*/true);
    SCOPED_TRACE(std::string(dtype_name(t)));
    expect_close(a.cuda() + b.cuda(), a + b, 0, 0);
    expect_close(a.cuda() * b.cuda(), a * b, 0, 0);
    expect_close(remainder(a.cuda(), b.cuda()), remainder(a, b), 0, 0);
    expect_close(eq(a.cuda(), b.cuda()), eq(a, b), 0, 0);
    expect_close(a.cuda() / b.cuda(), a / b, 1e-6, 1e-6);  // true division promotes to float
    // int tensor + float tensor promotes to float.
    Tensor f = sample({4, 6}, DType::Float32, 4);
    expect_close(a.cuda() + f.cuda(), a + f, 1e-6, 1e-6);
  }
  Tensor a = sample({5}, DType::Int64, 5), z = zeros({5}, TensorOptions(DType::Int64));
  testing::expect_error([&] { (void)remainder(a.cuda(), z.cuda()); }, {"ZeroDivisionError"});
}

TEST(CudaPointwise, BinaryOpsBroadcastAndNonContiguous) {
  KILN_REQUIRE_CUDA();
  std::vector<std::pair<std::string, Binary>> ops = {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b, 2.5); }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(abs(a), b); }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }},
      {"lt", [](const Tensor& a, const Tensor& b) { return lt(a, b); }},
      {"atan2", [](const Tensor& a, const Tensor& b) { return atan2(a, b); }},
  };
  for (DType t : {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64}) {
    Tensor a = sample({4, 1, 6}, t, 6), b = sample({5, 1}, t, 7);
    Tensor c = sample({6, 5, 4}, t, 8).permute({2, 1, 0});  // (4, 5, 6), non-contiguous
    for (auto& [name, f] : ops) {
      SCOPED_TRACE(name + " " + std::string(dtype_name(t)));
      expect_close(f(a.cuda(), b.cuda()), f(a, b), tol(t), tol(t));
      expect_close(f(c.cuda(), a.cuda()), f(c, a), tol(t), tol(t));
      // (5, 4, 6) against (5, 1, 1).
      expect_close(f(c.cuda().transpose(0, 1), b.cuda().unsqueeze(-1)), f(c.transpose(0, 1), b.unsqueeze(-1)), tol(t), tol(t));
    }
  }
}

TEST(CudaPointwise, ScalarsWhereLerpAddcmulAndInPlace) {
  KILN_REQUIRE_CUDA();
  Tensor x = sample({8, 3}, DType::Float32, 9), y = sample({8, 3}, DType::Float32, 10);
  Tensor gx = x.cuda(), gy = y.cuda();
  expect_close(gx + 2, x + 2);
  expect_close(2.5 * gx - 1, 2.5 * x - 1);
  expect_close(where(gx > 0, gx, gy), where(x > 0, x, y));
  expect_close(where(gx > 0, gx, 0.0), where(x > 0, x, 0.0));
  expect_close(lerp(gx, gy, full({3}, 0.25).cuda()), lerp(x, y, full({3}, 0.25)));
  expect_close(addcmul(gx, gx, gy, 0.5), addcmul(x, x, y, 0.5));
  gx.add_(gy, 3);
  x.add_(y, 3);
  expect_close(gx, x);
  Tensor v = gx.transpose(0, 1);  // in place through a non-contiguous view
  v.mul_(2);
  x.transpose(0, 1).mul_(2);
  expect_close(gx, x);
}

// Note [Vectorized elementwise]: dense operands, a broadcast number and a broadcast row take the
// vector kernel when aligned and whole vectors; odd numels (the scalar tail), rows that are not
// a whole number of vectors, and views at odd offsets (misaligned) take the scalar ones. Each
// gives the CPU's answer.
TEST(CudaPointwise, VectorizedAndScalarPathsAgree) {
  KILN_REQUIRE_CUDA();
  for (DType t : {DType::Float32, DType::BFloat16, DType::Float64, DType::Int32}) {
    for (int64_t cols : {int64_t{3072}, int64_t{8}, int64_t{6}, int64_t{7}, int64_t{1}}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " cols " + std::to_string(cols));
      Tensor x = sample({5, cols}, t, 11), y = sample({5, cols}, t, 12), bias = sample({cols}, t, 13);
      Tensor xc = x.cuda(), yc = y.cuda(), bc = bias.cuda();
      expect_close(xc + yc, x + y, tol(t), tol(t));
      expect_close(xc * bc, x * bias, tol(t), tol(t));
      expect_close(bc - xc, bias - x, tol(t), tol(t));
      expect_close(xc * 3, x * 3, tol(t), tol(t));
      expect_close(xc + yc.select(1, 0).unsqueeze(1), x + y.select(1, 0).unsqueeze(1), tol(t), tol(t));
      expect_close(xc.to(DType::Float32), x.to(DType::Float32), tol(t), tol(t));
      // Misaligned: a flat view starting one element in.
      Tensor xf = x.reshape({-1}).narrow(0, 1, x.numel() - 1), yf = y.reshape({-1}).narrow(0, 1, y.numel() - 1);
      expect_close(xc.reshape({-1}).narrow(0, 1, x.numel() - 1) + yc.reshape({-1}).narrow(0, 1, y.numel() - 1),
                   xf + yf, tol(t), tol(t));
      // In place, through a row-broadcast operand.
      Tensor xi = x.clone(), xic = xc.clone();
      xi.add_(bias);
      xic.add_(bc);
      expect_close(xic, xi, tol(t), tol(t));
    }
  }
}

// A float32 tensor plus a float16/bfloat16 one (autocast's residual adds) reads the low-precision
// operand as it is (launch_add_float_low): the same float32 sums as the CPU's promoted add, in
// either order, broadcast, in place and through a misaligned view.
TEST(CudaPointwise, FloatPlusLowPrecisionAsTheCpu) {
  KILN_REQUIRE_CUDA();
  for (DType low : {DType::BFloat16, DType::Float16}) {
    SCOPED_TRACE(dtype_name(low));
    Tensor x = sample({6, 130}, DType::Float32, 31), y = sample({6, 130}, low, 32), row = sample({130}, low, 33);
    Tensor xc = x.cuda(), yc = y.cuda(), rc = row.cuda();
    expect_close(xc + yc, x + y, 0, 0);
    expect_close(yc + xc, y + x, 0, 0);
    expect_close(xc + rc, x + row, 0, 0);
    EXPECT_EQ((xc + yc).dtype(), DType::Float32);
    Tensor xi = x.clone(), xic = xc.clone();
    xi.add_(y);
    xic.add_(yc);
    expect_close(xic, xi, 0, 0);
    Tensor xs = x.reshape({-1}).narrow(0, 1, 700), ys = y.reshape({-1}).narrow(0, 3, 700);
    expect_close(xc.reshape({-1}).narrow(0, 1, 700) + yc.reshape({-1}).narrow(0, 3, 700), xs + ys, 0, 0);
  }
}

// Note [Chunked copies]: same-dtype copies whose innermost dim is dense move 16-, 8- or 4-byte
// chunks; inner rows that are not whole chunks, misaligned views and casts take the element path.
TEST(CudaPointwise, ChunkedCopiesAgree) {
  KILN_REQUIRE_CUDA();
  for (DType t : {DType::BFloat16, DType::Float32, DType::Float16, DType::Int64, DType::UInt8}) {
    for (int64_t e : {int64_t{64}, int64_t{8}, int64_t{6}, int64_t{3}}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " inner " + std::to_string(e));
      Tensor x = sample({2, 5, 3, e}, t, 21);
      Tensor xc = x.cuda();
      expect_close(xc.transpose(1, 2).contiguous(), x.transpose(1, 2).contiguous());
      expect_close(xc.narrow(3, 1, e - 1).contiguous(), x.narrow(3, 1, e - 1).contiguous());
      expect_close(xc.transpose(0, 2).to(DType::Float32), x.transpose(0, 2).to(DType::Float32), tol(t), tol(t));
      Tensor dst = zeros({2, 3, 5, e}, TensorOptions(t).device(xc.device())).transpose(1, 2);
      dst.copy_(xc);
      expect_close(dst, x);
    }
  }
}

}  // namespace
}  // namespace kiln
