// MaxPool2d, AvgPool2d, AdaptiveAvgPool2d. Sizes are kept as given (one int or a pair) so the
// repr reads as torch's; the ops expand single values.
#include "kiln/nn/pooling.h"

#include "kiln/ops/nn.h"
#include "nn/nn_util.h"

namespace kiln::nn {

using detail::py_bool;
using detail::py_int_or_tuple;

namespace {

std::vector<int64_t> checked_size_arg(const char* who, const char* what, IntArrayRef v, int64_t min) {
  KILN_CHECK(v.size() == 1 || v.size() == 2, who, ": expected ", what, " to be a single int or a pair, got ", v.size(),
             " values");
  for (int64_t e : v) KILN_CHECK(e >= min, who, ": ", what, " must be >= ", min, ", got ", py_int_or_tuple(v));
  return v.vec();
}

}  // namespace

MaxPool2d::MaxPool2d(IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation,
                     bool ceil_mode)
    : Module("MaxPool2d"),
      kernel_size(checked_size_arg("MaxPool2d", "kernel_size", kernel_size, 1)),
      stride(stride.empty() ? this->kernel_size : checked_size_arg("MaxPool2d", "stride", stride, 1)),
      padding(checked_size_arg("MaxPool2d", "padding", padding, 0)),
      dilation(checked_size_arg("MaxPool2d", "dilation", dilation, 1)),
      ceil_mode(ceil_mode) {}

Tensor MaxPool2d::forward(const Tensor& x) { return max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode); }

std::string MaxPool2d::extra_repr() const {
  return "kernel_size=" + py_int_or_tuple(kernel_size) + ", stride=" + py_int_or_tuple(stride) +
         ", padding=" + py_int_or_tuple(padding) + ", dilation=" + py_int_or_tuple(dilation) +
         ", ceil_mode=" + py_bool(ceil_mode);
}

AvgPool2d::AvgPool2d(IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding, bool ceil_mode,
                     bool count_include_pad, std::optional<int64_t> divisor_override)
    : Module("AvgPool2d"),
      kernel_size(checked_size_arg("AvgPool2d", "kernel_size", kernel_size, 1)),
      stride(stride.empty() ? this->kernel_size : checked_size_arg("AvgPool2d", "stride", stride, 1)),
      padding(checked_size_arg("AvgPool2d", "padding", padding, 0)),
      ceil_mode(ceil_mode),
      count_include_pad(count_include_pad),
      divisor_override(divisor_override) {
  KILN_CHECK(!divisor_override || *divisor_override != 0, "AvgPool2d: divisor_override must not be zero");
}

Tensor AvgPool2d::forward(const Tensor& x) {
  return avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
}

std::string AvgPool2d::extra_repr() const {
  return "kernel_size=" + py_int_or_tuple(kernel_size) + ", stride=" + py_int_or_tuple(stride) +
         ", padding=" + py_int_or_tuple(padding);
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(IntArrayRef output_size)
    : Module("AdaptiveAvgPool2d"), output_size(checked_size_arg("AdaptiveAvgPool2d", "output_size", output_size, 0)) {}

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) { return adaptive_avg_pool2d(x, output_size); }

std::string AdaptiveAvgPool2d::extra_repr() const { return "output_size=" + py_int_or_tuple(output_size); }

Upsample::Upsample(UpsampleOptions o)
    : Module("Upsample"),
      size(std::move(o.size)),
      scale_factor(std::move(o.scale_factor)),
      mode(std::move(o.mode)),
      align_corners(o.align_corners) {
  KILN_CHECK(size.has_value() != scale_factor.has_value(),
             "Upsample: either size or scale_factor should be defined, and only one of them");
  KILN_CHECK(mode == "nearest" || mode == "bilinear", "Upsample: mode must be 'nearest' or 'bilinear', got '", mode,
             "'");
  KILN_CHECK(!align_corners || mode != "nearest",
             "Upsample: align_corners option can only be set with the interpolating modes: bilinear");
}

Tensor Upsample::forward(const Tensor& x) { return interpolate(x, size, scale_factor, mode, align_corners); }

// As torch: "scale_factor=2.0, mode='nearest'" or "size=(4, 6), mode='bilinear'".
std::string Upsample::extra_repr() const {
  std::string info;
  if (scale_factor) {
    const auto& f = *scale_factor;
    if (f.size() == 1) {
      info = "scale_factor=" + detail::py_float(f[0]);
    } else {
      info = "scale_factor=(";
      for (size_t i = 0; i < f.size(); ++i) info += (i ? ", " : "") + detail::py_float(f[i]);
      info += ")";
    }
  } else {
    info = "size=" + py_int_or_tuple(*size);
  }
  return info + ", mode='" + mode + "'";
}

Tensor PixelShuffle::forward(const Tensor& x) { return pixel_shuffle(x, upscale_factor); }
std::string PixelShuffle::extra_repr() const { return "upscale_factor=" + std::to_string(upscale_factor); }

Tensor PixelUnshuffle::forward(const Tensor& x) { return pixel_unshuffle(x, downscale_factor); }
std::string PixelUnshuffle::extra_repr() const { return "downscale_factor=" + std::to_string(downscale_factor); }

}  // namespace kiln::nn
