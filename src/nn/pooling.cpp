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

}  // namespace kiln::nn
