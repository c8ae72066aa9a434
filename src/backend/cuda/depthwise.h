// Plain description of the depthwise convolution launches (depthwise.cu), built by
// depthwise_ops.cpp: no Tensor here, as nn_kernels.h. Every pointer is to dense NCHW data.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

#include "kiln/dtype.h"

namespace kiln::cuda {

// x [N, C, H, W], weight [C * mult, 1, kh, kw], y [N, C * mult, oh, ow]: output channel oc
// reads input channel oc / mult (groups = C). A 1-d convolution is one with H = kh = 1.
struct DepthwiseArgs {
  int64_t N, C, mult, H, W, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
};

// y = the convolution of x with w, plus bias[oc] when bias is not null (floating dtypes).
void launch_depthwise_forward(const DepthwiseArgs& a, DType t, const void* x, const void* w, const void* bias, void* y,
                              cudaStream_t s);
// grad_x (overwritten): a gather per input element over the outputs whose windows hold it.
void launch_depthwise_backward_input(const DepthwiseArgs& a, DType t, const void* grad_y, const void* w, void* grad_x,
                                     cudaStream_t s);
// grad_w (overwritten): a block per weight element sums over batch and output positions in
// a fixed order (deterministic, no atomics).
void launch_depthwise_backward_weight(const DepthwiseArgs& a, DType t, const void* grad_y, const void* x, void* grad_w,
                                      cudaStream_t s);

}  // namespace kiln::cuda
