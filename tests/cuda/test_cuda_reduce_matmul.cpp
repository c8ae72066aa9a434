// CUDA reductions and matmuls against the CPU, and composites running through their
// decompositions on CUDA kernels.
#include <limits>
#include <string>
#include <vector>

#include "tests/cuda/cuda_test.h"

namespace kiln {
namespace {

using testing::expect_close;

Tensor sample(std::vector<int64_t> sizes, DType t, uint64_t seed) {
  manual_seed(seed);
  Tensor x = randn(sizes) * 2;
  if (!is_floating_point(t)) x = x.round();
  return x.to(t);
}

double tol(DType t) { return t == DType::Float16 || t == DType::BFloat16 ? 2e-2 : 1e-5; }

TEST(CudaReduce, SumMeanProdAmaxAminOverDims) {
  KILN_REQUIRE_CUDA();
  for (DType t : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int64, DType::Int32}) {
    Tensor x = sample({6, 5, 7}, t, 1);
    Tensor g = x.cuda();
    for (std::vector<int64_t> dims : std::vector<std::vector<int64_t>>{{}, {0}, {1}, {2}, {0, 2}, {-1, 0}}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " dims " + std::to_string(dims.size()));
      expect_close(g.sum(dims), x.sum(dims), tol(t), tol(t));
      expect_close(g.sum(dims, /*keepdim=*/true), x.sum(dims, true), tol(t), tol(t));
      expect_close(amax(g, dims), amax(x, dims), 0, 0);
      expect_close(amin(g, dims, true), amin(x, dims, true), 0, 0);
      if (is_floating_point(t)) expect_close(mean(g, dims), mean(x, dims), tol(t), tol(t));
    }
    expect_close(prod(g * 0 + 1.5, 1), prod(x * 0 + 1.5, 1), tol(t), tol(t));
  }
  // Non-contiguous input, bool reductions.
  Tensor x = sample({4, 9}, DType::Float32, 2);
  expect_close(x.cuda().t().sum({1}), x.t().sum({1}), 1e-5, 1e-5);
  expect_close(any(x.cuda() > 3), any(x > 3), 0, 0);
  expect_close(all(x.cuda() > -10, 1), all(x > -10, 1), 0, 0);
}

TEST(CudaReduce, SumIsDeterministic) {
  KILN_REQUIRE_CUDA();
  Tensor g = sample({1 << 20}, DType::Float32, 3).cuda();
  float first = g.sum().item<float>();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(g.sum().item<float>(), first);
}

TEST(CudaReduce, ArgmaxMaxWithTiesAndNaN) {
  KILN_REQUIRE_CUDA();
  Tensor x = sample({7, 300}, DType::Float32, 4);
  expect_close(argmax(x.cuda(), 1), argmax(x, 1), 0, 0);
  expect_close(argmax(x.cuda()), argmax(x), 0, 0);
  auto [gv, gi] = x.cuda().max(0);
  auto [cv, ci] = x.max(0);
  expect_close(gv, cv, 0, 0);
  expect_close(gi, ci, 0, 0);
  // Ties: the first index wins; a NaN wins over numbers.
  Tensor t = full({5, 64}, 1.0);
  expect_close(argmax(t.cuda(), 1), argmax(t, 1), 0, 0);
  Tensor n = x.clone();
  n.index_put_({3, 17}, std::numeric_limits<float>::quiet_NaN());
  expect_close(argmax(n.cuda(), 1), argmax(n, 1), 0, 0);
  expect_close(amax(n.cuda(), {1}), amax(n, {1}), 0, 0);
}

TEST(CudaMatmul, MmBmmAddmmLinearAgainstCpu) {
  KILN_REQUIRE_CUDA();
  for (DType t : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    double tl = t == DType::Float32 ? 1e-4 : (t == DType::Float64 ? 1e-10 : 3e-2);
    Tensor a = sample({33, 17}, t, 5), b = sample({17, 29}, t, 6);
    expect_close(mm(a.cuda(), b.cuda()), mm(a, b), tl, tl);
    // Transposed operands go to cuBLAS without a copy.
    expect_close(mm(b.cuda().t(), a.cuda().t()), mm(b.t(), a.t()), tl, tl);
    Tensor x = sample({4, 9, 16}, t, 7), y = sample({4, 16, 5}, t, 8);
    expect_close(bmm(x.cuda(), y.cuda()), bmm(x, y), tl, tl);
    expect_close(matmul(x.cuda(), y.cuda()[0]), matmul(x, y[0]), tl, tl);
    Tensor w = sample({12, 16}, t, 9), bias = sample({12}, t, 10);
    expect_close(linear(x.cuda(), w.cuda(), bias.cuda()), linear(x, w, bias), tl, tl);
    Tensor c = sample({33, 29}, t, 11);
    expect_close(addmm(c.cuda(), a.cuda(), b.cuda(), 0.5, 2), addmm(c, a, b, 0.5, 2), tl, tl);
  }
  // Empty inner dimension: zeros.
  Tensor z = mm(zeros({3, 0}).cuda(), zeros({0, 4}).cuda());
  expect_close(z, zeros({3, 4}), 0, 0);
}

TEST(CudaMatmul, Float32IsNotTf32ByDefault) {
  KILN_REQUIRE_CUDA();
  EXPECT_FALSE(backends::allow_tf32());
  // 1 + 2^-20 is exact in float32 and lost in TF32's 10-bit mantissa.
  Tensor a = full({1, 1}, 1.0 + 1.0 / (1 << 20)), b = ones({1, 1});
  EXPECT_EQ(mm(a.cuda(), b.cuda()).item<float>(), a.item<float>());
}

TEST(CudaComposite, SoftmaxAndLayerNormThroughDecompositions) {
  KILN_REQUIRE_CUDA();
  Tensor x = sample({8, 33}, DType::Float32, 12);
  expect_close(softmax(x.cuda(), 1), softmax(x, 1), 1e-5, 1e-6);
  expect_close(log_softmax(x.cuda(), 0), log_softmax(x, 0), 1e-5, 1e-5);
  expect_close(layer_norm(x.cuda(), {33}), layer_norm(x, {33}), 1e-4, 1e-5);
}

TEST(CudaShape, CatIntoSlotsOfTheOutput) {
  KILN_REQUIRE_CUDA();
  Tensor a = sample({3, 4}, DType::Float32, 13), b = sample({3, 2}, DType::Float32, 14);
  expect_close(cat({a.cuda(), b.cuda()}, 1), cat({a, b}, 1), 0, 0);
  expect_close(cat({a.cuda().t(), b.cuda().t()}, 0), cat({a.t(), b.t()}, 0), 0, 0);
}

}  // namespace
}  // namespace kiln
