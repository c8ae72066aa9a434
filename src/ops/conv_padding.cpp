// conv1d/2d/3d with torch's string padding ("valid", "same"), as ATen's _convolution_mode.
#include <string>
#include <vector>

#include "core/tensor_impl.h"
#include "kiln/error.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/shape.h"

namespace kiln::detail {

Tensor conv_padding_string(int64_t nd, const Tensor& x, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
                           std::string_view padding, IntArrayRef dilation, int64_t groups) {
  const char* name = nd == 1 ? "conv1d" : nd == 2 ? "conv2d" : "conv3d";
  auto conv = [&](const Tensor& in, IntArrayRef pad) {
    return nd == 1   ? conv1d(in, weight, bias, stride, pad, dilation, groups)
           : nd == 2 ? conv2d(in, weight, bias, stride, pad, dilation, groups)
                     : conv3d(in, weight, bias, stride, pad, dilation, groups);
  };
  if (padding == "valid") return conv(x, 0);
  KILN_CHECK(padding == "same", name, ": Invalid padding string: '", std::string(padding),
             "' (expected 'same' or 'valid')");
  for (int64_t s : stride)
    KILN_CHECK(s == 1, name,
               ": padding='same' is not supported for strided convolutions, got stride=", shape_str(stride));
  // Shapes the conv itself rejects are left for it to report, with its own message.
  if (!weight.defined() || weight.dim() != nd + 2 || !x.defined() || x.dim() < nd) return conv(x, 0);
  KILN_CHECK(dilation.size() == 1 || static_cast<int64_t>(dilation.size()) == nd, name, ": dilation must have 1 or ",
             nd, " values, got ", shape_str(dilation));
  // Total d*(k-1) per dim: the symmetric part goes to the conv, an odd extra one is padded on the
  // right first (as torch, which pads with constant_pad_nd when the halves differ).
  std::vector<int64_t> left(static_cast<size_t>(nd)), extra(2 * static_cast<size_t>(nd), 0);
  bool symmetric = true;
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t d = dilation.size() == 1 ? dilation[0] : dilation[static_cast<size_t>(i)];
    const int64_t k = weight.sizes()[static_cast<size_t>(i + 2)];
    int64_t total = 0;
    KILN_CHECK(d > 0, name, ": dilation must be greater than zero, got ", shape_str(dilation));
    KILN_CHECK(k < 1 || !__builtin_mul_overflow(d, k - 1, &total), name, ": padding='same' with dilation ", d,
               " and kernel size ", k, " needs more padding than fits in int64");
    left[static_cast<size_t>(i)] = total / 2;
    const int64_t odd = total - 2 * (total / 2);
    extra[2 * static_cast<size_t>(nd - 1 - i) + 1] = odd;  // F.pad's pairs start from the last dim
    if (odd != 0) symmetric = false;
  }
  return conv(symmetric ? x : pad(x, extra), left);
}

}  // namespace kiln::detail
