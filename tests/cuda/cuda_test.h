// Shared by the CUDA tests: skip without a device, compare CUDA results with CPU ones.
#pragma once
#include <gtest/gtest.h>

#include <vector>

#include "kiln/cuda.h"
#include "kiln/kiln.h"

#define KILN_REQUIRE_CUDA()                                                       \
  do {                                                                            \
    if (!::kiln::cuda::is_available()) GTEST_SKIP() << "skipped: no CUDA device"; \
  } while (0)

namespace kiln::testing {

// The CUDA tests compare with the CPU's float32 results by the accuracy rule: TF32 convolutions
// (cuDNN's default, as PyTorch's) round products to a 10-bit mantissa, so the tests turn them off
// at load time; CudaNn.Tf32ConvolutionsAreTheDefault checks the default and the TF32 error.
inline const bool kCudnnTf32OffForTests = [] {
  kiln::backends::cudnn::allow_tf32(false);
  return true;
}();

// `got` (any device) equals `want` (CPU) in dtype, sizes and values within the tolerances.
inline void expect_close(const Tensor& got, const Tensor& want, double rtol = 1e-5, double atol = 1e-6) {
  ASSERT_EQ(got.dtype(), want.dtype());
  ASSERT_EQ(std::vector<int64_t>(got.sizes().begin(), got.sizes().end()),
            std::vector<int64_t>(want.sizes().begin(), want.sizes().end()));
  Tensor g = got.cpu();
  if (!is_floating_point(want.dtype())) {
    EXPECT_EQ(g.to(DType::Int64).contiguous().to_vector<int64_t>(),
              want.to(DType::Int64).contiguous().to_vector<int64_t>())
        << "got\n"
        << g << "\nwant\n"
        << want;
    return;
  }
  Tensor gd = g.to(DType::Float64), wd = want.to(DType::Float64);
  EXPECT_TRUE(allclose(gd, wd, rtol, atol, /*equal_nan=*/true)) << "got\n" << g << "\nwant\n" << want;
}

}  // namespace kiln::testing
