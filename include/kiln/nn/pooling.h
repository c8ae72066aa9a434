// Upsample (resampling over kiln::interpolate), PixelShuffle and PixelUnshuffle; MaxPool2d,
// AvgPool2d and AdaptiveAvgPool2d come from pooling_nd.h with the other ranks.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
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

}  // namespace kiln::nn
