// MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, Upsample (resampling over kiln::interpolate), PixelShuffle
// and PixelUnshuffle.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "kiln/nn/module.h"

namespace kiln::nn {

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(IntArrayRef kernel_size, IntArrayRef stride = {}, IntArrayRef padding = 0,
                     IntArrayRef dilation = 1, bool ceil_mode = false);
  // MaxPool2d({2, 2}) would otherwise be ambiguous with the (deleted) copy constructor.
  explicit MaxPool2d(std::initializer_list<int64_t> kernel_size)
      : MaxPool2d(IntArrayRef(kernel_size), IntArrayRef(), IntArrayRef(0), IntArrayRef(1), false) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::vector<int64_t> kernel_size, stride, padding, dilation;  // stride empty = kernel_size
  bool ceil_mode;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(IntArrayRef kernel_size, IntArrayRef stride = {}, IntArrayRef padding = 0,
                     bool ceil_mode = false, bool count_include_pad = true,
                     std::optional<int64_t> divisor_override = std::nullopt);
  explicit AvgPool2d(std::initializer_list<int64_t> kernel_size) : AvgPool2d(IntArrayRef(kernel_size)) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::vector<int64_t> kernel_size, stride, padding;
  bool ceil_mode, count_include_pad;
  std::optional<int64_t> divisor_override;
};

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(IntArrayRef output_size);
  explicit AdaptiveAvgPool2d(std::initializer_list<int64_t> output_size)
      : AdaptiveAvgPool2d(IntArrayRef(output_size)) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::vector<int64_t> output_size;
};

// torch's constructor arguments: exactly one of size / scale_factor (one value applies to every
// spatial dim); mode "nearest" or "bilinear".
//   nn::Upsample({.scale_factor = std::vector<double>{2}, .mode = "bilinear", .align_corners = false})
struct UpsampleOptions {
  std::optional<std::vector<int64_t>> size = std::nullopt;
  std::optional<std::vector<double>> scale_factor = std::nullopt;
  std::string mode = "nearest";
  std::optional<bool> align_corners = std::nullopt;
};

class Upsample : public Module {
 public:
  explicit Upsample(UpsampleOptions options);
  explicit Upsample(std::optional<std::vector<int64_t>> size,
                    std::optional<std::vector<double>> scale_factor = std::nullopt, const std::string& mode = "nearest",
                    std::optional<bool> align_corners = std::nullopt)
      : Upsample(UpsampleOptions{std::move(size), std::move(scale_factor), mode, align_corners}) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::optional<std::vector<int64_t>> size;
  std::optional<std::vector<double>> scale_factor;
  std::string mode;
  std::optional<bool> align_corners;
};

// [*, C*r*r, H, W] <-> [*, C, H*r, W*r] (kiln::pixel_shuffle / pixel_unshuffle).
class PixelShuffle : public Module {
 public:
  explicit PixelShuffle(int64_t upscale_factor) : Module("PixelShuffle"), upscale_factor(upscale_factor) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  int64_t upscale_factor;
};

class PixelUnshuffle : public Module {
 public:
  explicit PixelUnshuffle(int64_t downscale_factor) : Module("PixelUnshuffle"), downscale_factor(downscale_factor) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  int64_t downscale_factor;
};

}  // namespace kiln::nn
