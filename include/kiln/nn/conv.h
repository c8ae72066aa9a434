// Conv1d, Conv2d, Conv3d, ConvTranspose1d/2d/3d, with torch's parameter names and default init
// (kaiming_uniform a=√5 on weight; bias U(-1/√fan_in, 1/√fan_in)). Conv1d/2d/3d take torch's
// padding_mode ("zeros", "reflect", "replicate", "circular": other than zeros, the input is padded
// with F.pad in that mode first) and padding as a string ("same" or "valid", as F.conv2d).
// Each family is one class template over the spatial rank N; the torch names are aliases.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/nn/module.h"
#include "kiln/ops/nn.h"

namespace kiln::nn {

template <int N>
class ConvNd : public Module {
  static_assert(N >= 1 && N <= 3, "ConvNd: 1, 2 or 3 spatial dims");

 public:
  ConvNd(int64_t in_channels, int64_t out_channels, IntArrayRef kernel_size, IntArrayRef stride = 1,
         IntArrayRef padding = 0, IntArrayRef dilation = 1, int64_t groups = 1, bool bias = true,
         const std::string& padding_mode = "zeros");
  // padding "same" or "valid".
  template <PaddingString S>
  ConvNd(int64_t in_channels, int64_t out_channels, IntArrayRef kernel_size, IntArrayRef stride, const S& padding,
         IntArrayRef dilation = 1, int64_t groups = 1, bool bias = true, const std::string& padding_mode = "zeros")
      : ConvNd(in_channels, out_channels, kernel_size, stride, 0, dilation, groups, bias, padding_mode) {
    set_padding_string(padding);
  }
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  void reset_parameters();
  int64_t in_channels, out_channels;
  std::vector<int64_t> kernel_size, stride, padding, dilation;  // N entries each
  int64_t groups;
  Tensor weight, bias;         // weight [out, in/groups, *kernel_size]
  std::string padding_mode;    // "zeros", "reflect", "replicate" or "circular"
  std::string padding_string;  // "same" or "valid" when padding was given so (padding is then 0), else empty

 private:
  void set_padding_string(std::string_view padding);
};

template <int N>
class ConvTransposeNd : public Module {
  static_assert(N >= 1 && N <= 3, "ConvTransposeNd: 1, 2 or 3 spatial dims");

 public:
  ConvTransposeNd(int64_t in_channels, int64_t out_channels, IntArrayRef kernel_size, IntArrayRef stride = 1,
                  IntArrayRef padding = 0, IntArrayRef output_padding = 0, int64_t groups = 1, bool bias = true,
                  IntArrayRef dilation = 1);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  void reset_parameters();
  int64_t in_channels, out_channels;
  std::vector<int64_t> kernel_size, stride, padding, output_padding, dilation;  // N entries each
  int64_t groups;
  Tensor weight, bias;  // weight [in, out/groups, *kernel_size]
};

// Defined for N = 1, 2, 3 in src/nn/conv.cpp.
extern template class ConvNd<1>;
extern template class ConvNd<2>;
extern template class ConvNd<3>;
extern template class ConvTransposeNd<1>;
extern template class ConvTransposeNd<2>;
extern template class ConvTransposeNd<3>;

using Conv1d = ConvNd<1>;
using Conv2d = ConvNd<2>;
using Conv3d = ConvNd<3>;
using ConvTranspose1d = ConvTransposeNd<1>;
using ConvTranspose2d = ConvTransposeNd<2>;
using ConvTranspose3d = ConvTransposeNd<3>;

}  // namespace kiln::nn
