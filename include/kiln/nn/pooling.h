// Upsample (resampling over kiln::interpolate), PixelShuffle and PixelUnshuffle; MaxPool2d,
// AvgPool2d and AdaptiveAvgPool2d come from pooling_nd.h with the other ranks.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/nn/module.h"
#include "kiln/nn/pooling_nd.h"

namespace kiln::nn {

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

// The layers over src/ops/pooling_extra.cpp, as torch.nn's.
class ChannelShuffle : public Module {
 public:
  explicit ChannelShuffle(int64_t groups) : Module("ChannelShuffle"), groups(groups) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  int64_t groups;
};

// The inverse of MaxPool2d(return_indices): forward(x, indices, output_size) (kiln::max_unpool2d).
class MaxUnpool2d : public Module {
 public:
  explicit MaxUnpool2d(IntArrayRef kernel_size, IntArrayRef stride = {}, IntArrayRef padding = 0);
  Tensor forward(const Tensor& x, const Tensor& indices,
                 std::optional<std::vector<int64_t>> output_size = std::nullopt);
  std::string extra_repr() const override;
  std::vector<int64_t> kernel_size, stride, padding;  // pairs; stride defaults to kernel_size
};

// Exactly one of output_size and output_ratio (each value in (0, 1)); _random_samples, when given,
// fixes the windows of every call (kiln::fractional_max_pool2d). forward returns the output alone;
// forward_with_indices also the indices, as return_indices=True.
class FractionalMaxPool2d : public Module {
 public:
  explicit FractionalMaxPool2d(IntArrayRef kernel_size,
                               std::optional<std::vector<int64_t>> output_size = std::nullopt,
                               std::optional<std::vector<double>> output_ratio = std::nullopt,
                               bool return_indices = false, Tensor _random_samples = {});
  Tensor forward(const Tensor& x) override;
  std::tuple<Tensor, Tensor> forward_with_indices(const Tensor& x);
  std::vector<int64_t> kernel_size;
  std::optional<std::vector<int64_t>> output_size;
  std::optional<std::vector<double>> output_ratio;
  bool return_indices;  // kept for the state; forward returns the output alone
  Tensor _random_samples;
};

}  // namespace kiln::nn
