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

}  // namespace
}  // namespace kiln
