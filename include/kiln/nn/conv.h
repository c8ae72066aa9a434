// Conv1d, Conv2d, Conv3d, ConvTranspose1d/2d/3d (zero padding), with torch's parameter names and default init
// (kaiming_uniform a=√5 on weight; bias U(-1/√fan_in, 1/√fan_in)).
#pragma once
#include <cstdint>
#include <vector>

#include "kiln/nn/module.h"

namespace kiln::nn {

class Conv1d : public Module {
 public:
  Conv1d(int64_t in_channels, int64_t out_channels, IntArrayRef kernel_size, IntArrayRef stride = 1,
         IntArrayRef padding = 0, IntArrayRef dilation = 1, int64_t groups = 1, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  void reset_parameters();
  int64_t in_channels, out_channels;
  std::vector<int64_t> kernel_size, stride, padding, dilation;
  int64_t groups;
  Tensor weight, bias;  // weight [out, in/groups, k]
};

class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, IntArrayRef kernel_size, IntArrayRef stride = 1,
         IntArrayRef padding = 0, IntArrayRef dilation = 1, int64_t groups = 1, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  void reset_parameters();
  int64_t in_channels, out_channels;
  std::vector<int64_t> kernel_size, stride, padding, dilation;  // two entries each
  int64_t groups;
  Tensor weight, bias;  // weight [out, in/groups, kh, kw]
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
         IntArrayRef padding = 0, IntArrayRef dilation = 1, int64_t groups = 1, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  void reset_parameters();
  int64_t in_channels, out_channels;
  std::vector<int64_t> kernel_size, stride, padding, dilation;  // three entries each
  int64_t groups;
  Tensor weight, bias;  // weight [out, in/groups, kd, kh, kw]
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
