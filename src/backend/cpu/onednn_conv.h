// Float32 convolutions through oneDNN (when kiln is built with it, KILN_HAVE_ONEDNN): the
// direct convolution's forward, backward-data and backward-weights on plain contiguous
// NC[D]HW buffers. Each returns false when oneDNN is absent, switched off
// (kiln::backends::onednn::enabled()) or does not take the case; the caller then runs
// kiln's own kernels. Transposed convolutions are the direct ones with roles swapped.
#pragma once
#include <array>
#include <cstdint>

namespace kiln::cpu::onednn {

// A direct convolution over nd = 1..3 spatial dims: x [N, C_in, *in], weight
// [C_out, C_in/groups, *k], y [N, C_out, *out]; arrays hold the nd values.
struct ConvDesc {
  int nd;
  int64_t N, C_in, C_out, groups;
  std::array<int64_t, 3> in, out, k, stride, pad, dil;
};

// y = conv(x, w) + b (b may be null).
bool conv_forward(const ConvDesc& d, const float* x, const float* w, const float* b, float* y);
// gx = d conv / d x applied to gy.
bool conv_backward_data(const ConvDesc& d, const float* gy, const float* w, float* gx);
// gw (and gb when not null) from x and gy.
bool conv_backward_weights(const ConvDesc& d, const float* x, const float* gy, float* gw, float* gb);

// How many convolutions oneDNN has run (tests check that a path really went there).
int64_t executions();

}  // namespace kiln::cpu::onednn
