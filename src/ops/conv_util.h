// Shapes and checks of the convolution and pooling prims, shared by their meta
// functions (src/ops/conv.cpp) and CPU kernels (src/backend/cpu/conv.cpp).
#pragma once
#include "ops/registry.h"

namespace kiln {

// A 2-D convolution as the prim `convolution` sees it (NCHW, batched).
// For transposed convolutions C_in/C_out are those of the transposed op:
// x [N, C_in, H, W], weight [C_in, C_out/groups, kH, kW], out [N, C_out, Ho, Wo].
struct ConvShape {
  int64_t N, C_in, H, W, C_out, kH, kW;
  int64_t sh, sw, ph, pw, dh, dw, oph, opw, groups;
  bool transposed;
  int64_t Ho, Wo;
};

// Validates x/weight/bias and the attrs (stride, padding, dilation, transposed,
// output_padding, groups: the first six attrs of `convolution`) with torch's messages.
ConvShape conv_shape(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias, const Attrs& a);

// A 2-D pooling window over x [N, C, H, W] or [C, H, W] (N = 1, batched = false).
struct PoolShape {
  int64_t N, C, H, W, kH, kW, sh, sw, ph, pw, dh, dw;
  bool ceil_mode, batched;
  int64_t Ho, Wo;
  Shape out_sizes() const {
    return batched ? Shape{N, C, Ho, Wo} : Shape{C, Ho, Wo};
  }
};

// kernel_size, stride (empty = kernel_size), padding, dilation (1 for avg pool), ceil_mode.
PoolShape pool_shape(const char* op, const Tensor& x, IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding,
                     IntArrayRef dilation, bool ceil_mode);

// A list of 1 or 2 ints as a pair (torch's _pair), naming `what` on error.
std::array<int64_t, 2> int_pair(const char* op, const char* what, IntArrayRef v);

}  // namespace kiln
