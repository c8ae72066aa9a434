// The max, avg, adaptive and LP pools over 1, 2 and 3 spatial dims, and Unfold / Fold, as
// torch.nn's modules.
// Sizes are kept as given (one int or one per dim) so the repr reads as torch's.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/nn/module.h"

namespace kiln::nn {

// MaxPool1d/2d/3d, AvgPool1d/2d/3d, AdaptiveAvgPool1d/2d/3d and LPPool1d/2d are each one class
// template over the spatial rank N (defined for those N in src/nn/pooling_nd.cpp); the torch
// names are aliases. torch's return_indices=True makes forward return a tuple; here
// forward_with_indices does (a Module's forward returns one tensor).
template <int N>
class MaxPoolNd : public Module {
 public:
  explicit MaxPoolNd(IntArrayRef kernel_size, IntArrayRef stride = {}, IntArrayRef padding = 0,
                     IntArrayRef dilation = 1, bool ceil_mode = false);
  // MaxPool2d({2, 2}) would otherwise be ambiguous with the (deleted) copy constructor.
  explicit MaxPoolNd(std::initializer_list<int64_t> kernel_size)
      : MaxPoolNd(IntArrayRef(kernel_size), IntArrayRef(), IntArrayRef(0), IntArrayRef(1), false) {}
  Tensor forward(const Tensor& x) override;
  std::tuple<Tensor, Tensor> forward_with_indices(const Tensor& x);
  std::string extra_repr() const override;
  std::vector<int64_t> kernel_size, stride, padding, dilation;  // stride empty = kernel_size
  bool ceil_mode;
};

template <int N>
class AvgPoolNd : public Module {
  struct Args {};  // tags the constructor both public ones delegate to

 public:
  // torch's AvgPool1d has no divisor_override.
  explicit AvgPoolNd(IntArrayRef kernel_size, IntArrayRef stride = {}, IntArrayRef padding = 0, bool ceil_mode = false,
                     bool count_include_pad = true) requires(N == 1)
      : AvgPoolNd(Args{}, kernel_size, stride, padding, ceil_mode, count_include_pad, std::nullopt) {}
  explicit AvgPoolNd(IntArrayRef kernel_size, IntArrayRef stride = {}, IntArrayRef padding = 0, bool ceil_mode = false,
                     bool count_include_pad = true,
                     std::optional<int64_t> divisor_override = std::nullopt) requires(N > 1)
      : AvgPoolNd(Args{}, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override) {}
  explicit AvgPoolNd(std::initializer_list<int64_t> kernel_size)
      : AvgPoolNd(Args{}, IntArrayRef(kernel_size), IntArrayRef(), IntArrayRef(0), false, true, std::nullopt) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::vector<int64_t> kernel_size, stride, padding;
  bool ceil_mode, count_include_pad;
  std::optional<int64_t> divisor_override;  // always empty for N = 1

 private:
  AvgPoolNd(Args, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding, bool ceil_mode,
            bool count_include_pad, std::optional<int64_t> divisor_override);
};

template <int N>
class AdaptiveAvgPoolNd : public Module {
 public:
  explicit AdaptiveAvgPoolNd(IntArrayRef output_size);
  explicit AdaptiveAvgPoolNd(std::initializer_list<int64_t> output_size)
      : AdaptiveAvgPoolNd(IntArrayRef(output_size)) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::vector<int64_t> output_size;
};

// LPPool1d / LPPool2d: F.lp_pool1d / F.lp_pool2d; stride {} = kernel_size (torch's None).
template <int N>
class LPPoolNd : public Module {
 public:
  LPPoolNd(double norm_type, IntArrayRef kernel_size, IntArrayRef stride = {}, bool ceil_mode = false);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double norm_type;
  std::vector<int64_t> kernel_size, stride;
  bool ceil_mode;
};

extern template class MaxPoolNd<1>;
extern template class MaxPoolNd<2>;
extern template class MaxPoolNd<3>;
extern template class AvgPoolNd<1>;
extern template class AvgPoolNd<2>;
extern template class AvgPoolNd<3>;
extern template class AdaptiveAvgPoolNd<1>;
extern template class AdaptiveAvgPoolNd<2>;
extern template class AdaptiveAvgPoolNd<3>;
extern template class LPPoolNd<1>;
extern template class LPPoolNd<2>;

using MaxPool1d = MaxPoolNd<1>;
using MaxPool2d = MaxPoolNd<2>;
using MaxPool3d = MaxPoolNd<3>;
using AvgPool1d = AvgPoolNd<1>;
using AvgPool2d = AvgPoolNd<2>;
using AvgPool3d = AvgPoolNd<3>;
using AdaptiveAvgPool1d = AdaptiveAvgPoolNd<1>;
using AdaptiveAvgPool2d = AdaptiveAvgPoolNd<2>;
using AdaptiveAvgPool3d = AdaptiveAvgPoolNd<3>;
using LPPool1d = LPPoolNd<1>;
using LPPool2d = LPPoolNd<2>;

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
