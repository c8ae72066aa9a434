// Conv1d, Conv2d, Conv3d, ConvTranspose1d/2d/3d, with torch's parameter names and default init
// (kaiming_uniform a=√5 on weight; bias U(-1/√fan_in, 1/√fan_in)). Conv1d/2d/3d take torch's
// padding_mode ("zeros", "reflect", "replicate", "circular": other than zeros, the input is padded
// with F.pad in that mode first) and padding as a string ("same" or "valid", as F.conv2d).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/nn/module.h"
#include "kiln/ops/nn.h"

namespace kiln::nn {

class Conv1d : public Module {
 public:
  Conv1d(int64_t in_channels, int64_t out_channels, IntArrayRef kernel_size, IntArrayRef stride = 1,
         IntArrayRef padding = 0, IntArrayRef dilation = 1, int64_t groups = 1, bool bias = true,
         const std::string& padding_mode = "zeros");
  // padding "same" or "valid".
  template <PaddingString S>
  Conv1d(int64_t in_channels, int64_t out_channels, IntArrayRef kernel_size, IntArrayRef stride, const S& padding,
         IntArrayRef dilation = 1, int64_t groups = 1, bool bias = true, const std::string& padding_mode = "zeros")
      : Conv1d(in_channels, out_channels, kernel_size, stride, 0, dilation, groups, bias, padding_mode) {
    set_padding_string(padding);
  }
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  void reset_parameters();
  int64_t in_channels, out_channels;
  std::vector<int64_t> kernel_size, stride, padding, dilation;
  int64_t groups;
  Tensor weight, bias;         // weight [out, in/groups, k]
  std::string padding_mode;    // "zeros", "reflect", "replicate" or "circular"
  std::string padding_string;  // "same" or "valid" when padding was given so (padding is then 0), else empty

 private:
  void set_padding_string(std::string_view padding);
};

class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, IntArrayRef kernel_size, IntArrayRef stride = 1,
         IntArrayRef padding = 0, IntArrayRef dilation = 1, int64_t groups = 1, bool bias = true,
         const std::string& padding_mode = "zeros");
  // padding "same" or "valid".
  template <PaddingString S>
  Conv2d(int64_t in_channels, int64_t out_channels, IntArrayRef kernel_size, IntArrayRef stride, const S& padding,
         IntArrayRef dilation = 1, int64_t groups = 1, bool bias = true, const std::string& padding_mode = "zeros")
      : Conv2d(in_channels, out_channels, kernel_size, stride, 0, dilation, groups, bias, padding_mode) {
    set_padding_string(padding);
  }
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  void reset_parameters();
  int64_t in_channels, out_channels;
  std::vector<int64_t> kernel_size, stride, padding, dilation;  // two entries each
  int64_t groups;
  Tensor weight, bias;         // weight [out, in/groups, kh, kw]
  std::string padding_mode;    // "zeros", "reflect", "replicate" or "circular"
  std::string padding_string;  // "same" or "valid" when padding was given so (padding is then 0), else empty

 private:
  void set_padding_string(std::string_view padding);
};

class ConvTranspose2d : public Module {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, IntArrayRef kernel_size, IntArrayRef stride = 1,
                  IntArrayRef padding = 0, IntArrayRef output_padding = 0, int64_t groups = 1, bool bias = true,
                  IntArrayRef dilation = 1);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  void reset_parameters();
  int64_t in_channels, out_channels;
  std::vector<int64_t> kernel_size, stride, padding, output_padding, dilation;
  int64_t groups;
  Tensor weight, bias;  // weight [in, out/groups, kh, kw]
};

class Conv3d : public Module {
 public:
  Conv3d(int64_t in_channels, int64_t out_channels, IntArrayRef kernel_size, IntArrayRef stride = 1,
         IntArrayRef padding = 0, IntArrayRef dilation = 1, int64_t groups = 1, bool bias = true,
         const std::string& padding_mode = "zeros");
  // padding "same" or "valid".
  template <PaddingString S>
  Conv3d(int64_t in_channels, int64_t out_channels, IntArrayRef kernel_size, IntArrayRef stride, const S& padding,
         IntArrayRef dilation = 1, int64_t groups = 1, bool bias = true, const std::string& padding_mode = "zeros")
      : Conv3d(in_channels, out_channels, kernel_size, stride, 0, dilation, groups, bias, padding_mode) {
    set_padding_string(padding);
  }
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  void reset_parameters();
  int64_t in_channels, out_channels;
  std::vector<int64_t> kernel_size, stride, padding, dilation;  // three entries each
  int64_t groups;
  Tensor weight, bias;         // weight [out, in/groups, kd, kh, kw]
  std::string padding_mode;    // "zeros", "reflect", "replicate" or "circular"
  std::string padding_string;  // "same" or "valid" when padding was given so (padding is then 0), else empty

 private:
  void set_padding_string(std::string_view padding);
};

// ConvTranspose1d and ConvTranspose3d: as ConvTranspose2d over 1 and 3 spatial dims.
class ConvTranspose1d : public Module {
 public:
  ConvTranspose1d(int64_t in_channels, int64_t out_channels, IntArrayRef kernel_size, IntArrayRef stride = 1,
                  IntArrayRef padding = 0, IntArrayRef output_padding = 0, int64_t groups = 1, bool bias = true,
                  IntArrayRef dilation = 1);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  void reset_parameters();
  int64_t in_channels, out_channels;
  std::vector<int64_t> kernel_size, stride, padding, output_padding, dilation;
  int64_t groups;
  Tensor weight, bias;  // weight [in, out/groups, k]
};

class ConvTranspose3d : public Module {
 public:
  ConvTranspose3d(int64_t in_channels, int64_t out_channels, IntArrayRef kernel_size, IntArrayRef stride = 1,
                  IntArrayRef padding = 0, IntArrayRef output_padding = 0, int64_t groups = 1, bool bias = true,
                  IntArrayRef dilation = 1);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  void reset_parameters();
  int64_t in_channels, out_channels;
  std::vector<int64_t> kernel_size, stride, padding, output_padding, dilation;
  int64_t groups;
  Tensor weight, bias;  // weight [in, out/groups, kd, kh, kw]
};

}  // namespace kiln::nn
