// kiln::autocast and kiln::GradScaler on CUDA: torch's CUDA op lists (float16 by default;
// softmax, log, layer_norm and the losses in float32), and a float16 training step whose
// gradients come back in float32 and match the CPU's float32 step.
#include "tests/cuda/cuda_test.h"

namespace kiln {
namespace {

using testing::expect_close;

TEST(CudaAmp, AutocastOpListsOnCuda) {
  KILN_REQUIRE_CUDA();
  manual_seed(0);
  Tensor x = randn({8, 16}).cuda(), w = randn({4, 16}).cuda();
  Tensor y = tensor<int64_t>({0, 1, 2, 3, 0, 1, 2, 3}, DType::Int64).cuda();
  autocast ac(Device("cuda"));
  EXPECT_EQ(get_autocast_dtype(DeviceType::CUDA), DType::Float16);
  Tensor out = linear(x, w);
  EXPECT_EQ(out.dtype(), DType::Float16);
  EXPECT_EQ(softmax(out, 1).dtype(), DType::Float32);  // CUDA's float32 list
  EXPECT_EQ(exp(out).dtype(), DType::Float32);
  EXPECT_EQ(cross_entropy(out, y).dtype(), DType::Float32);
  EXPECT_EQ((out + 1).dtype(), DType::Float16);
  // A CPU tensor is not touched by CUDA's autocast.
  EXPECT_EQ(linear(x.cpu(), w.cpu()).dtype(), DType::Float32);
}

TEST(CudaAmp, Float16StepWithGradScalerMatchesCpu) {
  KILN_REQUIRE_CUDA();
  manual_seed(1);
  Tensor x = randn({32, 16}), w0 = randn({8, 16}) * 0.1;
  Tensor y = randint(0, 8, {32}, TensorOptions(DType::Int64));
  auto step = [&](Device dev, bool amp) {
    Tensor w = w0.clone().to(dev).requires_grad_();  // a tensor of its own on every device
    optim::SGD opt(std::vector<Tensor>{w}, {.lr = 0.5});
    GradScaler scaler({.enabled = amp});
    Tensor loss;
    {
      autocast ac(dev, std::nullopt, amp);
      loss = cross_entropy(linear(x.to(dev), w), y.to(dev));
    }
    scaler.scale(loss).backward();
    EXPECT_EQ(w.grad().dtype(), DType::Float32);
    EXPECT_TRUE(scaler.step(opt));
    scaler.update();
    return w.detach().cpu();
  };
  expect_close(step(Device("cuda"), true), step(kCPU, false), 2e-3, 2e-3);
}

}  // namespace
}  // namespace kiln
