// Float32 (and BFloat16) convolutions through oneDNN (when kiln is built with it, KILN_HAVE_ONEDNN): the
// direct convolution's forward, backward-data and backward-weights on plain contiguous
// NC[D]HW buffers. Each returns false when oneDNN is absent, switched off
// (kiln::backends::onednn::enabled()) or does not take the case; the caller then runs
// kiln's own kernels. Transposed convolutions are the direct ones with roles swapped.
#pragma once
#include <array>
#include <cstdint>

#include "core/half.h"

namespace kiln::cpu::onednn {

// A direct convolution over nd = 1..3 spatial dims: x [N, C_in, *in], weight
// [C_out, C_in/groups, *k], y [N, C_out, *out]; arrays hold the nd values.
struct ConvDesc {
  int nd;
  int64_t N, C_in, C_out, groups;
  std::array<int64_t, 3> in, out, k, stride, pad, dil;
  bool bf16 = false;  // every buffer BFloat16 (accumulated in float32, as torch's CPU bf16 convs)
};

// Whether BFloat16 convolutions run natively: oneDNN on a CPU with AVX512_BF16 or AMX.
bool bf16_supported();

// y = conv(x, w) + b (b may be null).
bool conv_forward(const ConvDesc& d, const float* x, const float* w, const float* b, float* y);
// gx = d conv / d x applied to gy.
bool conv_backward_data(const ConvDesc& d, const float* gy, const float* w, float* gx);
// gw (and gb when not null) from x and gy.
bool conv_backward_weights(const ConvDesc& d, const float* x, const float* gy, float* gw, float* gb);

// The same on BFloat16 buffers (d.bf16 set).
bool conv_forward(const ConvDesc& d, const BFloat16* x, const BFloat16* w, const BFloat16* b, BFloat16* y);
bool conv_backward_data(const ConvDesc& d, const BFloat16* gy, const BFloat16* w, BFloat16* gx);
bool conv_backward_weights(const ConvDesc& d, const BFloat16* x, const BFloat16* gy, BFloat16* gw, BFloat16* gb);

// How many convolutions oneDNN has run (tests check that a path really went there).
int64_t executions();

}  // namespace kiln::cpu::onednn
