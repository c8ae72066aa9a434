// Upsample, PixelShuffle, PixelUnshuffle (the 2-D pools are in pooling_nd.cpp with the other ranks).
#include "kiln/nn/pooling.h"

#include "kiln/ops/nn.h"
#include "nn/nn_util.h"

namespace kiln::nn {

using detail::py_int_or_tuple;

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

// ---- the layers of torch.nn added for PyTorch parity (#30) ----
Tensor ChannelShuffle::forward(const Tensor& x) { return channel_shuffle(x, groups); }
std::string ChannelShuffle::extra_repr() const { return "groups=" + std::to_string(groups); }

namespace {
std::vector<int64_t> as_pair(IntArrayRef v, const char* what) {
  KILN_CHECK(v.size() == 1 || v.size() == 2, "MaxUnpool2d: ", what, " must be one int or a pair, got ", v.size(),
             " values");
  return v.size() == 1 ? std::vector<int64_t>{v[0], v[0]} : v.vec();
}
}  // namespace

MaxUnpool2d::MaxUnpool2d(IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding)
    : Module("MaxUnpool2d"),
      kernel_size(as_pair(kernel_size, "kernel_size")),
      stride(stride.empty() ? this->kernel_size : as_pair(stride, "stride")),
      padding(as_pair(padding, "padding")) {}
Tensor MaxUnpool2d::forward(const Tensor& x, const Tensor& indices, std::optional<std::vector<int64_t>> output_size) {
  return max_unpool2d(x, indices, kernel_size, stride, padding, std::move(output_size));
}
// As torch's: "kernel_size=(2, 2), stride=(2, 2), padding=(0, 0)".
std::string MaxUnpool2d::extra_repr() const {
  return "kernel_size=" + detail::py_tuple(kernel_size) + ", stride=" + detail::py_tuple(stride) +
         ", padding=" + detail::py_tuple(padding);
}

FractionalMaxPool2d::FractionalMaxPool2d(IntArrayRef kernel_size, std::optional<std::vector<int64_t>> output_size,
                                         std::optional<std::vector<double>> output_ratio, bool return_indices,
                                         Tensor _random_samples)
    : Module("FractionalMaxPool2d"),
      kernel_size(kernel_size.vec()),
      output_size(std::move(output_size)),
      output_ratio(std::move(output_ratio)),
      return_indices(return_indices),
      _random_samples(std::move(_random_samples)) {
  KILN_CHECK(this->output_size || this->output_ratio,
             "FractionalMaxPool2d requires specifying either an output size, or a pooling ratio");
  KILN_CHECK(!(this->output_size && this->output_ratio),
             "FractionalMaxPool2d: only one of output_size and output_ratio may be specified");
  if (this->output_ratio)
    for (double r : *this->output_ratio)
      KILN_CHECK(r > 0 && r < 1, "FractionalMaxPool2d: output_ratio must be between 0 and 1 (got ", r, ")");
}
Tensor FractionalMaxPool2d::forward(const Tensor& x) { return std::get<0>(forward_with_indices(x)); }
std::tuple<Tensor, Tensor> FractionalMaxPool2d::forward_with_indices(const Tensor& x) {
  return fractional_max_pool2d_with_indices(x, kernel_size, output_size, output_ratio, _random_samples);
}

}  // namespace kiln::nn
