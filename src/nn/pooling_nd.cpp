// The pool modules over 1, 2 and 3 spatial dims, Unfold and Fold, over their functions.
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
  KILN_CHECK(v.size() == 1 || v.size() == n, who, ": expected ", what, " to be a single int",
             n == 1   ? ""
             : n == 2 ? " or a pair"
                      : " or " + std::to_string(n) + " ints",
             ", got ", v.size(), " values");
  for (int64_t e : v) KILN_CHECK(e >= min, who, ": ", what, " must be >= ", min, ", got ", py_int_or_tuple(v));
  return v.vec();
}
std::string pool_repr(const std::vector<int64_t>& k, const std::vector<int64_t>& s, const std::vector<int64_t>& p) {
  return "kernel_size=" + py_int_or_tuple(k) + ", stride=" + py_int_or_tuple(s) + ", padding=" + py_int_or_tuple(p);
}

// The module names, by rank (Module's type name: repr, errors).
constexpr const char* kMaxPoolName[] = {"", "MaxPool1d", "MaxPool2d", "MaxPool3d"};
constexpr const char* kAvgPoolName[] = {"", "AvgPool1d", "AvgPool2d", "AvgPool3d"};
constexpr const char* kAdaptiveAvgPoolName[] = {"", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d"};
constexpr const char* kLPPoolName[] = {"", "LPPool1d", "LPPool2d"};

}  // namespace

template <int N>
MaxPoolNd<N>::MaxPoolNd(IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation,
                        bool ceil_mode)
    : Module(kMaxPoolName[N]),
      kernel_size(size_arg(kMaxPoolName[N], "kernel_size", kernel_size, N, 1)),
      stride(stride.empty() ? this->kernel_size : size_arg(kMaxPoolName[N], "stride", stride, N, 1)),
      padding(size_arg(kMaxPoolName[N], "padding", padding, N, 0)),
      dilation(size_arg(kMaxPoolName[N], "dilation", dilation, N, 1)),
      ceil_mode(ceil_mode) {}
template <int N>
Tensor MaxPoolNd<N>::forward(const Tensor& x) {
  return std::get<0>(forward_with_indices(x));
}
template <int N>
std::tuple<Tensor, Tensor> MaxPoolNd<N>::forward_with_indices(const Tensor& x) {
  if constexpr (N == 1)
    return max_pool1d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode);
  else if constexpr (N == 2)
    return max_pool2d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode);
  else
    return max_pool3d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode);
}
template <int N>
std::string MaxPoolNd<N>::extra_repr() const {
  return pool_repr(kernel_size, stride, padding) + ", dilation=" + py_int_or_tuple(dilation) +
         ", ceil_mode=" + py_bool(ceil_mode);
}

template <int N>
AvgPoolNd<N>::AvgPoolNd(Args, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding, bool ceil_mode,
                        bool count_include_pad, std::optional<int64_t> divisor_override)
    : Module(kAvgPoolName[N]),
      kernel_size(size_arg(kAvgPoolName[N], "kernel_size", kernel_size, N, 1)),
      stride(stride.empty() ? this->kernel_size : size_arg(kAvgPoolName[N], "stride", stride, N, 1)),
      padding(size_arg(kAvgPoolName[N], "padding", padding, N, 0)),
      ceil_mode(ceil_mode),
      count_include_pad(count_include_pad),
      divisor_override(divisor_override) {
  KILN_CHECK(!divisor_override || *divisor_override != 0, kAvgPoolName[N], ": divisor_override must not be zero");
}
template <int N>
Tensor AvgPoolNd<N>::forward(const Tensor& x) {
  if constexpr (N == 1)
    return avg_pool1d(x, kernel_size, stride, padding, ceil_mode, count_include_pad);
  else if constexpr (N == 2)
    return avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
  else
    return avg_pool3d(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
}
template <int N>
std::string AvgPoolNd<N>::extra_repr() const {
  if constexpr (N == 1) {
    // torch's AvgPool1d stores _single(...) tuples: "kernel_size=(3,)".
    auto t = [](const std::vector<int64_t>& v) { return "(" + std::to_string(v[0]) + ",)"; };
    return "kernel_size=" + t(kernel_size) + ", stride=" + t(stride) + ", padding=" + t(padding);
  } else {
    return pool_repr(kernel_size, stride, padding);
  }
}

template <int N>
AdaptiveAvgPoolNd<N>::AdaptiveAvgPoolNd(IntArrayRef output_size)
    : Module(kAdaptiveAvgPoolName[N]),
      output_size(size_arg(kAdaptiveAvgPoolName[N], "output_size", output_size, N, 0)) {}
template <int N>
Tensor AdaptiveAvgPoolNd<N>::forward(const Tensor& x) {
  if constexpr (N == 1)
    return adaptive_avg_pool1d(x, output_size);
  else if constexpr (N == 2)
    return adaptive_avg_pool2d(x, output_size);
  else
    return adaptive_avg_pool3d(x, output_size);
}
template <int N>
std::string AdaptiveAvgPoolNd<N>::extra_repr() const {
  return "output_size=" + py_int_or_tuple(output_size);
}

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

template <int N>
LPPoolNd<N>::LPPoolNd(double norm_type, IntArrayRef kernel_size, IntArrayRef stride, bool ceil_mode)
    : Module(kLPPoolName[N]),
      norm_type(norm_type),
      kernel_size(size_arg(kLPPoolName[N], "kernel_size", kernel_size, N, 1)),
      stride(stride.empty() ? std::vector<int64_t>{} : size_arg(kLPPoolName[N], "stride", stride, N, 1)),
      ceil_mode(ceil_mode) {}
template <int N>
Tensor LPPoolNd<N>::forward(const Tensor& x) {
  if constexpr (N == 1)
    return functional::lp_pool1d(x, norm_type, kernel_size, stride, ceil_mode);
  else
    return functional::lp_pool2d(x, norm_type, kernel_size, stride, ceil_mode);
}
template <int N>
std::string LPPoolNd<N>::extra_repr() const {
  return lp_repr(norm_type, kernel_size, stride, ceil_mode);
}

template class MaxPoolNd<1>;
template class MaxPoolNd<2>;
template class MaxPoolNd<3>;
template class AvgPoolNd<1>;
template class AvgPoolNd<2>;
template class AvgPoolNd<3>;
template class AdaptiveAvgPoolNd<1>;
template class AdaptiveAvgPoolNd<2>;
template class AdaptiveAvgPoolNd<3>;
template class LPPoolNd<1>;
template class LPPoolNd<2>;

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
