// Autograd across devices: .cuda() / .cpu() / .to(device) of a tensor that requires grad is
// differentiable, as torch's _to_copy; gradients come back on the source's device and dtype.
#include "tests/cuda/cuda_test.h"

namespace kiln {
namespace {

using testing::expect_close;

TEST(CudaAutograd, CopiesAcrossDevicesAreDifferentiable) {
  KILN_REQUIRE_CUDA();
  Tensor x = tensor<float>({1.0f, -2.0f, 3.0f}, DType::Float32).requires_grad_();
  Tensor y = x.cuda();
  ASSERT_TRUE(y.requires_grad());
  Tensor z = (y * y).cpu().to(Device("cuda"), DType::Float64);  // there, back, there again in float64
  z.sum().backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_TRUE(x.grad().is_cpu());
  EXPECT_EQ(x.grad().dtype(), DType::Float32);
  expect_close(x.grad(), tensor<float>({2.0f, -4.0f, 6.0f}, DType::Float32));
  // Second order through the copies: d/dx sum(2 x) = 2.
  Tensor a = tensor<double>({0.5, 1.5}, DType::Float64).requires_grad_();
  Tensor g = autograd::grad({(a.cuda() * a.cuda() * a.cuda()).sum()}, {a}, {}, /*retain_graph=*/true,
                            /*create_graph=*/true)[0];
  expect_close(g, tensor<double>({0.75, 6.75}, DType::Float64), 1e-12, 1e-12);
  Tensor gg = autograd::grad({g.sum()}, {a})[0];
  expect_close(gg, tensor<double>({3.0, 9.0}, DType::Float64), 1e-12, 1e-12);
}

// Note [Gradients of CPU scalars]: a 0-d CPU tensor beside CUDA tensors (dispatch lets it join a
// CUDA op) gets its gradient on the CPU, and that gradient flows on into CPU ops: here into the
// sum and the mul that made the scalar, whose VJPs would fail on a CUDA gradient.
TEST(CudaAutograd, CpuScalarGradientsComeBackToTheCpu) {
  KILN_REQUIRE_CUDA();
  Tensor h = tensor<float>({1.0f, 2.0f}, DType::Float32).requires_grad_();
  Tensor x = tensor<float>({3.0f, -1.0f, 4.0f}, DType::Float32).cuda().requires_grad_();
  Tensor s = (h * 2).sum();  // 0-d, CPU: 6
  Tensor y = x * s + s;      // CUDA
  ASSERT_TRUE(y.is_cuda());
  y.sum().backward();
  ASSERT_TRUE(h.grad().defined() && x.grad().defined());
  EXPECT_TRUE(h.grad().is_cpu());
  EXPECT_TRUE(x.grad().is_cuda());
  // dy/ds = sum(x) + 3 = 9; dh = 2 * 9.
  expect_close(h.grad(), tensor<float>({18.0f, 18.0f}, DType::Float32));
  expect_close(x.grad(), tensor<float>({6.0f, 6.0f, 6.0f}, DType::Float32));
  // The sum of a CUDA result and a CPU one, as a user adds two losses.
  Tensor a = tensor<float>({1.0f, 2.0f}, DType::Float32).requires_grad_();
  Tensor b = tensor<float>({5.0f}, DType::Float32).cuda().requires_grad_();
  ((a * a).sum() + (b * 3).sum()).backward();
  EXPECT_TRUE(a.grad().is_cpu());
  expect_close(a.grad(), tensor<float>({2.0f, 4.0f}, DType::Float32));
  expect_close(b.grad(), tensor<float>({3.0f}, DType::Float32));
}

}  // namespace
}  // namespace kiln
