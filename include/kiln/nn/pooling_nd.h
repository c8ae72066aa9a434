// The 1-D and 3-D pools, adaptive max pools, LP pools, and Unfold / Fold, as torch.nn's modules.
// Sizes are kept as given (one int or one per dim) so the repr reads as torch's.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/nn/module.h"

namespace kiln::nn {

// MaxPool1d / MaxPool3d. torch's return_indices=True makes forward return a tuple; here
// forward_with_indices does (a Module's forward returns one tensor).
class MaxPool1d : public Module {
 public:
  explicit MaxPool1d(IntArrayRef kernel_size, IntArrayRef stride = {}, IntArrayRef padding = 0,
                     IntArrayRef dilation = 1, bool ceil_mode = false);
  Tensor forward(const Tensor& x) override;
  std::tuple<Tensor, Tensor> forward_with_indices(const Tensor& x);
  std::string extra_repr() const override;
  std::vector<int64_t> kernel_size, stride, padding, dilation;
  bool ceil_mode;
};

class MaxPool3d : public Module {
 public:
  explicit MaxPool3d(IntArrayRef kernel_size, IntArrayRef stride = {}, IntArrayRef padding = 0,
                     IntArrayRef dilation = 1, bool ceil_mode = false);
  Tensor forward(const Tensor& x) override;
  std::tuple<Tensor, Tensor> forward_with_indices(const Tensor& x);
  std::string extra_repr() const override;
  std::vector<int64_t> kernel_size, stride, padding, dilation;
  bool ceil_mode;
};

class AvgPool1d : public Module {
 public:
  explicit AvgPool1d(IntArrayRef kernel_size, IntArrayRef stride = {}, IntArrayRef padding = 0, bool ceil_mode = false,
                     bool count_include_pad = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::vector<int64_t> kernel_size, stride, padding;
  bool ceil_mode, count_include_pad;
};

class AvgPool3d : public Module {
 public:
  explicit AvgPool3d(IntArrayRef kernel_size, IntArrayRef stride = {}, IntArrayRef padding = 0, bool ceil_mode = false,
                     bool count_include_pad = true, std::optional<int64_t> divisor_override = std::nullopt);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::vector<int64_t> kernel_size, stride, padding;
  bool ceil_mode, count_include_pad;
  std::optional<int64_t> divisor_override;
};

class AdaptiveAvgPool1d : public Module {
 public:
  explicit AdaptiveAvgPool1d(IntArrayRef output_size);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::vector<int64_t> output_size;
};

class AdaptiveAvgPool3d : public Module {
 public:
  explicit AdaptiveAvgPool3d(IntArrayRef output_size);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::vector<int64_t> output_size;
};

// AdaptiveMaxPool1d/2d/3d (nd spatial dims); forward_with_indices as MaxPool1d's.
class AdaptiveMaxPoolNd : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::tuple<Tensor, Tensor> forward_with_indices(const Tensor& x);
  std::string extra_repr() const override;
  std::vector<int64_t> output_size;
  bool return_indices;  // kept for the repr / state; forward returns the output alone

 protected:
  AdaptiveMaxPoolNd(const char* name, int nd, IntArrayRef output_size, bool return_indices);
  int nd_;
};
class AdaptiveMaxPool1d : public AdaptiveMaxPoolNd {
 public:
  explicit AdaptiveMaxPool1d(IntArrayRef output_size, bool return_indices = false)
      : AdaptiveMaxPoolNd("AdaptiveMaxPool1d", 1, output_size, return_indices) {}
};
class AdaptiveMaxPool2d : public AdaptiveMaxPoolNd {
 public:
  explicit AdaptiveMaxPool2d(IntArrayRef output_size, bool return_indices = false)
      : AdaptiveMaxPoolNd("AdaptiveMaxPool2d", 2, output_size, return_indices) {}
};
class AdaptiveMaxPool3d : public AdaptiveMaxPoolNd {
 public:
  explicit AdaptiveMaxPool3d(IntArrayRef output_size, bool return_indices = false)
      : AdaptiveMaxPoolNd("AdaptiveMaxPool3d", 3, output_size, return_indices) {}
};

// LPPool1d / LPPool2d: F.lp_pool1d / F.lp_pool2d; stride {} = kernel_size (torch's None).
class LPPool1d : public Module {
 public:
  LPPool1d(double norm_type, IntArrayRef kernel_size, IntArrayRef stride = {}, bool ceil_mode = false);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double norm_type;
  std::vector<int64_t> kernel_size, stride;
  bool ceil_mode;
};
class LPPool2d : public Module {
 public:
  LPPool2d(double norm_type, IntArrayRef kernel_size, IntArrayRef stride = {}, bool ceil_mode = false);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double norm_type;
  std::vector<int64_t> kernel_size, stride;
  bool ceil_mode;
};

class Unfold : public Module {
 public:
  explicit Unfold(IntArrayRef kernel_size, IntArrayRef dilation = 1, IntArrayRef padding = 0, IntArrayRef stride = 1);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::vector<int64_t> kernel_size, dilation, padding, stride;
};
class Fold : public Module {
 public:
  Fold(IntArrayRef output_size, IntArrayRef kernel_size, IntArrayRef dilation = 1, IntArrayRef padding = 0,
       IntArrayRef stride = 1);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::vector<int64_t> output_size, kernel_size, dilation, padding, stride;
};

}  // namespace kiln::nn
