// scaled_dot_product_attention on CUDA at transformer shapes: bfloat16/float16 attention goes to
// the fused tensor-core kernels (Note [Flash attention]); its output and gradients must match the
// float64 attention of the same (rounded) inputs on the CPU, causal or not, for sequence lengths
// that are and are not multiples of the kernels' 64-row tiles; and its second derivative.
#include <cmath>
#include <tuple>
#include <utility>

#include "tests/cuda/cuda_test.h"

namespace kiln {
namespace {

// max |got - want| / max(1, max |want|).
double scaled_error(const Tensor& got, const Tensor& want) {
  Tensor g = got.cpu().to(kFloat64), w = want.to(kFloat64);
  double scale = std::max(1.0, w.abs().max().item<double>());
  return (g - w).abs().max().item<double>() / scale;
}

class CudaAttention : public ::testing::TestWithParam<std::tuple<DType, bool, int64_t, int64_t>> {};

TEST_P(CudaAttention, FusedMatchesFloat64) {
  KILN_REQUIRE_CUDA();
  auto [dt, causal, T, E] = GetParam();
  manual_seed(31);
  const int64_t B = 2, H = 3;
  Tensor q = randn({B, H, T, E}).to(dt), k = randn({B, H, T, E}).to(dt), v = randn({B, H, T, E}).to(dt);
  Tensor go = randn({B, H, T, E}).to(dt);
  // The CPU reference in float64 from the same rounded values.
  Tensor q64 = q.to(kFloat64).requires_grad_(true), k64 = k.to(kFloat64).requires_grad_(true),
         v64 = v.to(kFloat64).requires_grad_(true);
  Tensor want = scaled_dot_product_attention(q64, k64, v64, {}, 0.0, causal);
  (want * go.to(kFloat64)).sum().backward();
  Tensor qc = q.cuda().requires_grad_(true), kc = k.cuda().requires_grad_(true), vc = v.cuda().requires_grad_(true);
  Tensor got = scaled_dot_product_attention(qc, kc, vc, {}, 0.0, causal);
  ASSERT_EQ(got.dtype(), dt);
  (got * go.cuda()).sum().backward();
  // Low-precision weights and outputs: about 3 significant digits in bf16 (8 bits), more in fp16.
  const double tol = dt == DType::BFloat16 ? 2e-2 : 4e-3;
  EXPECT_LE(scaled_error(got, want), tol);
  EXPECT_LE(scaled_error(qc.grad(), q64.grad()), 2 * tol);
  EXPECT_LE(scaled_error(kc.grad(), k64.grad()), 2 * tol);
  EXPECT_LE(scaled_error(vc.grad(), v64.grad()), 2 * tol);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaAttention,
                         ::testing::Values(std::make_tuple(DType::BFloat16, true, int64_t{256}, int64_t{64}),
                                           std::make_tuple(DType::BFloat16, false, int64_t{100}, int64_t{64}),
                                           std::make_tuple(DType::Float16, true, int64_t{130}, int64_t{128}),
                                           std::make_tuple(DType::Float16, false, int64_t{64}, int64_t{32})));

// As GPT models call it: q, k and v are the heads of one [B, T, 3 C] projection viewed as
// [B, H, T, E] (strided views the kernels read in place), and the output goes back to [B, T, C]
// through a transpose (so its gradient reaches the backward kernel strided too). Every gradient
// and the output against float64 on the CPU, in float32 (three-TF32 kernels) and bfloat16.
TEST(CudaAttention, StridedHeadsOfAProjection) {
  KILN_REQUIRE_CUDA();
  manual_seed(33);
  const int64_t B = 2, T = 100, H = 3, E = 32, C = H * E;
  auto attend = [&](const Tensor& qkv) {
    std::vector<Tensor> parts = qkv.split(C, 2);
    auto heads = [&](const Tensor& t) { return t.view({B, T, H, E}).transpose(1, 2); };
    Tensor y = scaled_dot_product_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]), {}, 0.0, true);
    return y.transpose(1, 2).contiguous().view({B, T, C});
  };
  for (auto [dt, tol] : {std::pair{kFloat32, 1e-4}, std::pair{DType::BFloat16, 2e-2}}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = randn({B, T, 3 * C}).to(dt), up = randn({B, T, C}).to(dt);
    Tensor x64 = x.to(kFloat64).requires_grad_(true), xc = x.cuda().requires_grad_(true);
    Tensor want = attend(x64), got = attend(xc);
    (want * up.to(kFloat64)).sum().backward();
    (got * up.cuda()).sum().backward();
    EXPECT_LE(scaled_error(got, want), tol);
    EXPECT_LE(scaled_error(xc.grad(), x64.grad()), 2 * tol);
  }
}

// A second derivative through the fused kernel (its backward's own VJP, written with ops)
// matches the float64 attention's on the CPU: float32 (the three-TF32 kernels: float32 accuracy)
// closely; bfloat16 within its rounding compounded by two differentiations (0.058 of scale seen
// on an H100, where each of the forward, the gradient and its square rounds to 8 bits).
TEST(CudaAttentionGrad, SecondDerivativeOfTheFusedKernel) {
  KILN_REQUIRE_CUDA();
  manual_seed(32);
  auto second = [](const Tensor& q) {
    Tensor out = scaled_dot_product_attention(q, q, q, {}, 0.0, true);
    auto g = autograd::grad({(out.to(kFloat64) * out.to(kFloat64)).sum()}, {q}, {}, true, /*create_graph=*/true);
    return autograd::grad({g[0].to(kFloat64).square().sum()}, {q})[0];
  };
  for (auto [dt, tol] : {std::pair{kFloat32, 1e-4}, std::pair{DType::BFloat16, 1e-1}}) {
    Tensor x = randn({1, 2, 16, 16}).to(dt);
    Tensor got = second(x.cuda().requires_grad_(true));
    Tensor want = second(x.to(kFloat64).requires_grad_(true));
    EXPECT_LE(scaled_error(got, want), tol) << dt;
  }
}

}  // namespace
}  // namespace kiln
