// Shapes and checks of the convolution and pooling prims, shared by their meta
// functions (src/ops/conv.cpp) and CPU kernels (src/backend/cpu/conv.cpp).
#pragma once
#include <algorithm>
#include <array>

#include "ops/registry.h"

namespace kiln {

// A convolution over nd = 1, 2 or 3 spatial dims as the prim `convolution`
// sees it (channels first, batched). For transposed convolutions C_in/C_out
// are those of the transposed op: x [N, C_in, *in], weight [C_in,
// C_out/groups, *k], out [N, C_out, *out]. Arrays hold the nd spatial values.
// One group per input channel: a depthwise convolution (PyTorch's test: a single-channel input
// is an ordinary convolution).
inline bool depthwise_groups(int64_t groups, int64_t c_in) { return groups > 1 && c_in == groups; }

// Channels-last (NHWC) strides of 4-d sizes [N, C, H, W]: the layout cuDNN's convolution kernels
// run in (Note [Channels-last graphs], compile/lower/layout.cpp).
inline Shape channels_last_strides(IntArrayRef sizes) {
  const int64_t c = std::max<int64_t>(sizes[1], 1), h = std::max<int64_t>(sizes[2], 1), w = std::max<int64_t>(sizes[3], 1);
  return Shape{h * w * c, 1, w * c, c};
}

struct ConvShape {
  int64_t N, C_in, C_out, groups;
  int nd;
  bool transposed;
  std::array<int64_t, 3> in, k, stride, pad, dil, opad, out;
  Shape out_sizes() const {
    Shape s{N, C_out};
    for (int i = 0; i < nd; ++i) s.push_back(out[i]);
    return s;
  }
  int64_t out_plane() const {
    int64_t p = 1;
    for (int i = 0; i < nd; ++i) p *= out[i];
    return p;
  }
};

// Validates x/weight/bias and the attrs (stride, padding, dilation, transposed,
// output_padding, groups: the first six attrs of `convolution`) with torch's
// messages. The spatial rank is weight.dim() - 2; each attr list holds one
// value (used for every dim) or one per spatial dim.
ConvShape conv_shape(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias, const Attrs& a);

// A 2-D pooling window over x [N, C, H, W] or [C, H, W] (N = 1, batched = false): pool_nd_shape's
// values in the 2-D kernels' fields.
struct PoolShape {
  int64_t N, C, H, W, kH, kW, sh, sw, ph, pw, dh, dw;
  bool ceil_mode, batched;
  int64_t Ho, Wo;
  Shape out_sizes() const { return batched ? Shape{N, C, Ho, Wo} : Shape{C, Ho, Wo}; }
};

// kernel_size, stride (empty = kernel_size), padding, dilation (1 for avg pool), ceil_mode.
PoolShape pool_shape(const char* op, const Tensor& x, IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding,
                     IntArrayRef dilation, bool ceil_mode, bool floating_only = true);

// A pooling window over nd = 1, 2 or 3 spatial dims of x [N, C, *in] or [C, *in]; arrays hold the
// nd values as the user gave them (messages show those, not the prim's).
struct PoolNdShape {
  int nd;
  int64_t N, C;
  bool ceil_mode, batched;
  std::array<int64_t, 3> in, k, stride, pad, dil, out;
  Shape out_sizes() const {
    Shape s{C};
    for (int i = 0; i < nd; ++i) s.push_back(out[i]);
    if (batched) s.insert(s.begin(), N);
    return s;
  }
};
// As pool_shape over nd dims; `floating_only` false lets int64 through (avg pools).
PoolNdShape pool_nd_shape(const char* op, int nd, const Tensor& x, IntArrayRef kernel, IntArrayRef stride,
                          IntArrayRef padding, IntArrayRef dilation, bool ceil_mode, bool floating_only = true);

// torch's pooling_output_shape (in ceil mode the last window must start inside
// the input or the left padding).
int64_t pooling_output_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil_mode);

// A list of 1 or 2 ints as a pair (torch's _pair), naming `what` on error.
std::array<int64_t, 2> int_pair(const char* op, const char* what, IntArrayRef v);
// A list of 1 or n ints as n values (torch's _single/_pair/_triple).
std::array<int64_t, 3> int_tuple(const char* op, const char* what, IntArrayRef v, int n);

// Avg pools compute integers only for int64, as torch's CPU kernels.
bool avg_pool_dtype_ok(DType t);

}  // namespace kiln
