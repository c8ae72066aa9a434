// kiln::compile on CUDA tensors: every backend gives eager's answer. Inductor emits CPU code
// only, so its CUDA graphs run on the eager CUDA kernels and count as fallbacks.
#include "tests/cuda/cuda_test.h"

namespace kiln {
namespace {

using testing::expect_close;

TEST(CudaCompile, EveryBackendMatchesEagerOnCuda) {
  KILN_REQUIRE_CUDA();
  manual_seed(0);
  Tensor w0 = randn({8, 8}).cuda();
  auto body = [](const Tensor& x, const Tensor& w) { return (relu(mm(x, w)) * 2 + 1).sum(1); };
  Tensor x = randn({4, 8}).cuda();
  for (const char* backend : {"eager", "aot_eager", "inductor"}) {
    SCOPED_TRACE(backend);
    Tensor w = w0.clone().requires_grad_();
    Tensor we = w0.clone().requires_grad_();
    auto f = compile(body, {.backend = backend, .background = false});
    Tensor got = f(x, w);
    Tensor want = body(x, we);
    EXPECT_TRUE(got.is_cuda());
    expect_close(got, want.detach().cpu(), 1e-5, 1e-5);
    got.sum().backward();
    want.sum().backward();
    expect_close(w.grad(), we.grad().cpu(), 1e-5, 1e-5);
    if (std::string(backend) == "inductor") {
      EXPECT_EQ(f.stats().generated_kernel_runs, 0);
      EXPECT_GT(f.stats().kernel_fallbacks, 0);
    }
  }
}

}  // namespace
}  // namespace kiln
