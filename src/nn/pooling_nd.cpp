// The 1-D / 3-D pools, adaptive max pools, LP pools, Unfold and Fold modules over their functions.
#include "kiln/nn/pooling_nd.h"

#include "kiln/nn/functional.h"
#include "kiln/ops/nn.h"
#include "nn/nn_util.h"

namespace kiln::nn {

using detail::py_bool;
using detail::py_float;
using detail::py_int_or_tuple;

namespace {

// One int or n ints, each >= min, as given.
std::vector<int64_t> size_arg(const char* who, const char* what, IntArrayRef v, size_t n, int64_t min) {
  KILN_CHECK(v.size() == 1 || v.size() == n, who, ": expected ", what, " to be a single int or ", n, " ints, got ",
             v.size(), " values");
  for (int64_t e : v) KILN_CHECK(e >= min, who, ": ", what, " must be >= ", min, ", got ", py_int_or_tuple(v));
  return v.vec();
}
std::string pool_repr(const std::vector<int64_t>& k, const std::vector<int64_t>& s, const std::vector<int64_t>& p) {
  return "kernel_size=" + py_int_or_tuple(k) + ", stride=" + py_int_or_tuple(s) + ", padding=" + py_int_or_tuple(p);
}

}  // namespace

#define KILN_MAX_POOL(Name, nd, fn)                                                                                  \
  Name::Name(IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) \
      : Module(#Name),                                                                                               \
        kernel_size(size_arg(#Name, "kernel_size", kernel_size, nd, 1)),                                             \
        stride(stride.empty() ? this->kernel_size : size_arg(#Name, "stride", stride, nd, 1)),                       \
        padding(size_arg(#Name, "padding", padding, nd, 0)),                                                         \
        dilation(size_arg(#Name, "dilation", dilation, nd, 1)),                                                      \
        ceil_mode(ceil_mode) {}                                                                                      \
  Tensor Name::forward(const Tensor& x) { return std::get<0>(forward_with_indices(x)); }                             \
  std::tuple<Tensor, Tensor> Name::forward_with_indices(const Tensor& x) {                                           \
    return fn(x, kernel_size, stride, padding, dilation, ceil_mode);                                                 \
  }                                                                                                                  \
  std::string Name::extra_repr() const {                                                                             \
    return pool_repr(kernel_size, stride, padding) + ", dilation=" + py_int_or_tuple(dilation) +                     \
           ", ceil_mode=" + py_bool(ceil_mode);                                                                      \
  }
KILN_MAX_POOL(MaxPool1d, 1, max_pool1d_with_indices)
KILN_MAX_POOL(MaxPool3d, 3, max_pool3d_with_indices)
#undef KILN_MAX_POOL

AvgPool1d::AvgPool1d(IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding, bool ceil_mode,
                     bool count_include_pad)
    : Module("AvgPool1d"),
      kernel_size(size_arg("AvgPool1d", "kernel_size", kernel_size, 1, 1)),
      stride(stride.empty() ? this->kernel_size : size_arg("AvgPool1d", "stride", stride, 1, 1)),
      padding(size_arg("AvgPool1d", "padding", padding, 1, 0)),
      ceil_mode(ceil_mode),
      count_include_pad(count_include_pad) {}
Tensor AvgPool1d::forward(const Tensor& x) {
  return avg_pool1d(x, kernel_size, stride, padding, ceil_mode, count_include_pad);
}
// torch's AvgPool1d stores _single(...) tuples: "kernel_size=(3,)".
std::string AvgPool1d::extra_repr() const {
  auto t = [](const std::vector<int64_t>& v) { return "(" + std::to_string(v[0]) + ",)"; };
  return "kernel_size=" + t(kernel_size) + ", stride=" + t(stride) + ", padding=" + t(padding);
}

AvgPool3d::AvgPool3d(IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding, bool ceil_mode,
                     bool count_include_pad, std::optional<int64_t> divisor_override)
    : Module("AvgPool3d"),
      kernel_size(size_arg("AvgPool3d", "kernel_size", kernel_size, 3, 1)),
      stride(stride.empty() ? this->kernel_size : size_arg("AvgPool3d", "stride", stride, 3, 1)),
      padding(size_arg("AvgPool3d", "padding", padding, 3, 0)),
      ceil_mode(ceil_mode),
      count_include_pad(count_include_pad),
      divisor_override(divisor_override) {
  KILN_CHECK(!divisor_override || *divisor_override != 0, "AvgPool3d: divisor_override must not be zero");
}
Tensor AvgPool3d::forward(const Tensor& x) {
  return avg_pool3d(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
}
std::string AvgPool3d::extra_repr() const { return pool_repr(kernel_size, stride, padding); }

AdaptiveAvgPool1d::AdaptiveAvgPool1d(IntArrayRef output_size)
    : Module("AdaptiveAvgPool1d"), output_size(size_arg("AdaptiveAvgPool1d", "output_size", output_size, 1, 0)) {}
Tensor AdaptiveAvgPool1d::forward(const Tensor& x) { return adaptive_avg_pool1d(x, output_size); }
std::string AdaptiveAvgPool1d::extra_repr() const { return "output_size=" + py_int_or_tuple(output_size); }

AdaptiveAvgPool3d::AdaptiveAvgPool3d(IntArrayRef output_size)
    : Module("AdaptiveAvgPool3d"), output_size(size_arg("AdaptiveAvgPool3d", "output_size", output_size, 3, 0)) {}
Tensor AdaptiveAvgPool3d::forward(const Tensor& x) { return adaptive_avg_pool3d(x, output_size); }
std::string AdaptiveAvgPool3d::extra_repr() const { return "output_size=" + py_int_or_tuple(output_size); }

AdaptiveMaxPoolNd::AdaptiveMaxPoolNd(const char* name, int nd, IntArrayRef output_size, bool return_indices)
    : Module(name),
      output_size(size_arg(name, "output_size", output_size, static_cast<size_t>(nd), 0)),
      return_indices(return_indices),
      nd_(nd) {}
Tensor AdaptiveMaxPoolNd::forward(const Tensor& x) { return std::get<0>(forward_with_indices(x)); }
std::tuple<Tensor, Tensor> AdaptiveMaxPoolNd::forward_with_indices(const Tensor& x) {
  if (nd_ == 1) return adaptive_max_pool1d_with_indices(x, output_size);
  if (nd_ == 2) return adaptive_max_pool2d_with_indices(x, output_size);
  return adaptive_max_pool3d_with_indices(x, output_size);
}
std::string AdaptiveMaxPoolNd::extra_repr() const { return "output_size=" + py_int_or_tuple(output_size); }

// torch's LPPool repr: "norm_type=2, kernel_size=3, stride=None, ceil_mode=False".
static std::string lp_repr(double p, const std::vector<int64_t>& k, const std::vector<int64_t>& s, bool ceil) {
  // torch prints norm_type as given; an integral one was most likely given as an int.
  const std::string norm =
      p == static_cast<double>(static_cast<int64_t>(p)) ? std::to_string(static_cast<int64_t>(p)) : py_float(p);
  return "norm_type=" + norm + ", kernel_size=" + py_int_or_tuple(k) +
         ", stride=" + (s.empty() ? std::string("None") : py_int_or_tuple(s)) + ", ceil_mode=" + py_bool(ceil);
}

LPPool1d::LPPool1d(double norm_type, IntArrayRef kernel_size, IntArrayRef stride, bool ceil_mode)
    : Module("LPPool1d"),
      norm_type(norm_type),
      kernel_size(size_arg("LPPool1d", "kernel_size", kernel_size, 1, 1)),
      stride(stride.empty() ? std::vector<int64_t>{} : size_arg("LPPool1d", "stride", stride, 1, 1)),
      ceil_mode(ceil_mode) {}
Tensor LPPool1d::forward(const Tensor& x) {
  return functional::lp_pool1d(x, norm_type, kernel_size, stride, ceil_mode);
}
std::string LPPool1d::extra_repr() const { return lp_repr(norm_type, kernel_size, stride, ceil_mode); }

LPPool2d::LPPool2d(double norm_type, IntArrayRef kernel_size, IntArrayRef stride, bool ceil_mode)
    : Module("LPPool2d"),
      norm_type(norm_type),
      kernel_size(size_arg("LPPool2d", "kernel_size", kernel_size, 2, 1)),
      stride(stride.empty() ? std::vector<int64_t>{} : size_arg("LPPool2d", "stride", stride, 2, 1)),
      ceil_mode(ceil_mode) {}
Tensor LPPool2d::forward(const Tensor& x) {
  return functional::lp_pool2d(x, norm_type, kernel_size, stride, ceil_mode);
}
std::string LPPool2d::extra_repr() const { return lp_repr(norm_type, kernel_size, stride, ceil_mode); }

Unfold::Unfold(IntArrayRef kernel_size, IntArrayRef dilation, IntArrayRef padding, IntArrayRef stride)
    : Module("Unfold"),
      kernel_size(kernel_size.vec()),
      dilation(dilation.vec()),
      padding(padding.vec()),
      stride(stride.vec()) {}
Tensor Unfold::forward(const Tensor& x) { return functional::unfold(x, kernel_size, dilation, padding, stride); }
std::string Unfold::extra_repr() const {
  return "kernel_size=" + py_int_or_tuple(kernel_size) + ", dilation=" + py_int_or_tuple(dilation) +
         ", padding=" + py_int_or_tuple(padding) + ", stride=" + py_int_or_tuple(stride);
}

Fold::Fold(IntArrayRef output_size, IntArrayRef kernel_size, IntArrayRef dilation, IntArrayRef padding,
           IntArrayRef stride)
    : Module("Fold"),
      output_size(output_size.vec()),
      kernel_size(kernel_size.vec()),
      dilation(dilation.vec()),
      padding(padding.vec()),
      stride(stride.vec()) {}
Tensor Fold::forward(const Tensor& x) {
  return functional::fold(x, output_size, kernel_size, dilation, padding, stride);
}
std::string Fold::extra_repr() const {
  return "output_size=" + py_int_or_tuple(output_size) + ", kernel_size=" + py_int_or_tuple(kernel_size) +
         ", dilation=" + py_int_or_tuple(dilation) + ", padding=" + py_int_or_tuple(padding) +
         ", stride=" + py_int_or_tuple(stride);
}

}  // namespace kiln::nn
