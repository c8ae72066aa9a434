// Conv1d/2d/3d, ConvTranspose1d/2d/3d: torch's parameter shapes, default init and repr.
#include "kiln/nn/conv.h"

#include <cmath>
#include <string>
#include <string_view>

#include "kiln/nn/init.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/shape.h"
#include "nn/nn_util.h"

namespace kiln::nn {

using detail::expand_arg;
using detail::py_tuple;

namespace {

// The checks torch's _ConvNd.__init__ makes, with the layer's name.
void check_conv_args(const char* who, int64_t in_channels, int64_t out_channels, int64_t groups,
                     IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation) {
  KILN_CHECK(groups > 0, who, ": groups must be a positive integer, got ", groups);
  KILN_CHECK(in_channels >= 0 && out_channels >= 0, who,
             ": expected non-negative channel counts, got in_channels=", in_channels, " out_channels=", out_channels);
  KILN_CHECK(in_channels % groups == 0, who, ": in_channels (", in_channels, ") must be divisible by groups (", groups,
             ")");
  KILN_CHECK(out_channels % groups == 0, who, ": out_channels (", out_channels, ") must be divisible by groups (",
             groups, ")");
  for (int64_t k : kernel_size) KILN_CHECK(k > 0, who, ": kernel_size must be positive, got ", py_tuple(kernel_size));
  for (int64_t s : stride) KILN_CHECK(s > 0, who, ": stride must be positive, got ", py_tuple(stride));
  for (int64_t p : padding) KILN_CHECK(p >= 0, who, ": padding must be non-negative, got ", py_tuple(padding));
  for (int64_t d : dilation) KILN_CHECK(d > 0, who, ": dilation must be positive, got ", py_tuple(dilation));
}

bool all_equal(const std::vector<int64_t>& v, int64_t x) {
  for (int64_t e : v)
    if (e != x) return false;
  return true;
}

// torch's _ConvNd.extra_repr: non-default settings only.
std::string conv_repr(int64_t in, int64_t out, const std::vector<int64_t>& k, const std::vector<int64_t>& s,
                      const std::vector<int64_t>& p, const std::vector<int64_t>& d, const std::vector<int64_t>& op,
                      int64_t groups, bool bias, const std::string& padding_string = "",
                      const std::string& padding_mode = "zeros") {
  std::string r =
      std::to_string(in) + ", " + std::to_string(out) + ", kernel_size=" + py_tuple(k) + ", stride=" + py_tuple(s);
  if (!padding_string.empty())
    r += ", padding=" + padding_string;
  else if (!all_equal(p, 0))
    r += ", padding=" + py_tuple(p);
  if (!all_equal(d, 1)) r += ", dilation=" + py_tuple(d);
  if (!all_equal(op, 0)) r += ", output_padding=" + py_tuple(op);
  if (groups != 1) r += ", groups=" + std::to_string(groups);
  if (!bias) r += ", bias=False";
  if (padding_mode != "zeros") r += ", padding_mode=" + padding_mode;
  return r;
}

// Weight kaiming_uniform(a=√5), bias U(-1/√fan_in, 1/√fan_in) with fan_in from the weight (dim 1 ×
// receptive field, which for a transposed conv is out_channels/groups × kernel, as torch).
void reset_conv(Tensor& weight, Tensor& bias) {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) detail::init_bias_from_fan_in(bias, init::calculate_fan_in_and_fan_out(weight).first);
}

// torch's check on a transposed conv's output_padding.
void check_output_padding(const char* who, const std::vector<int64_t>& op, const std::vector<int64_t>& stride,
                          const std::vector<int64_t>& dilation) {
  for (size_t i = 0; i < op.size(); ++i)
    KILN_CHECK(op[i] >= 0 && (op[i] < stride[i] || op[i] < dilation[i]), who,
               ": output padding must be smaller than either stride or dilation, got output_padding=", py_tuple(op),
               " stride=", py_tuple(stride), " dilation=", py_tuple(dilation));
}

// torch's _ConvNd checks on padding_mode and a padding string.
void check_padding_mode(const char* who, const std::string& mode) {
  KILN_CHECK(mode == "zeros" || mode == "reflect" || mode == "replicate" || mode == "circular", who,
             ": padding_mode must be one of {'zeros', 'reflect', 'replicate', 'circular'}, but got padding_mode='",
             mode, "'");
}

std::string padding_string_of(const char* who, std::string_view padding, const std::vector<int64_t>& stride) {
  KILN_CHECK(padding == "same" || padding == "valid", who, ": Invalid padding string '", std::string(padding),
             "', should be one of {'valid', 'same'}");
  if (padding == "same")
    for (int64_t s : stride)
      KILN_CHECK(s == 1, who,
                 ": padding='same' is not supported for strided convolutions, got stride=", py_tuple(stride));
  return std::string(padding);
}

// torch's _reversed_padding_repeated_twice: F.pad's (left, right) pairs from the last dim, for
// "same" the halves of dilation*(k-1) with the odd one on the right.
std::vector<int64_t> reversed_padding_twice(const std::string& padding_string, const std::vector<int64_t>& padding,
                                            const std::vector<int64_t>& kernel, const std::vector<int64_t>& dilation) {
  std::vector<int64_t> out;
  for (size_t i = kernel.size(); i-- > 0;) {
    int64_t l = padding[i], r = padding[i];
    if (padding_string == "valid") l = r = 0;
    if (padding_string == "same") {
      const int64_t total = dilation[i] * (kernel[i] - 1);
      l = total / 2;
      r = total - l;
    }
    out.push_back(l);
    out.push_back(r);
  }
  return out;
}

// [c0, c1, *kernel]
std::vector<int64_t> weight_shape(int64_t c0, int64_t c1, const std::vector<int64_t>& k) {
  std::vector<int64_t> s{c0, c1};
  s.insert(s.end(), k.begin(), k.end());
  return s;
}

// The module names, by rank (Module's type name: repr, errors).
constexpr const char* kConvName[] = {"", "Conv1d", "Conv2d", "Conv3d"};
constexpr const char* kConvTransposeName[] = {"", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"};

}  // namespace

template <int N>
ConvNd<N>::ConvNd(int64_t in_channels, int64_t out_channels, IntArrayRef kernel_size, IntArrayRef stride,
                  IntArrayRef padding, IntArrayRef dilation, int64_t groups, bool bias, const std::string& padding_mode)
    : Module(kConvName[N]),
      in_channels(in_channels),
      out_channels(out_channels),
      kernel_size(expand_arg(kConvName[N], "kernel_size", kernel_size, N)),
      stride(expand_arg(kConvName[N], "stride", stride, N)),
      padding(expand_arg(kConvName[N], "padding", padding, N)),
      dilation(expand_arg(kConvName[N], "dilation", dilation, N)),
      groups(groups),
      padding_mode(padding_mode) {
  check_padding_mode(kConvName[N], padding_mode);
  check_conv_args(kConvName[N], in_channels, out_channels, groups, this->kernel_size, this->stride, this->padding,
                  this->dilation);
  weight =
      register_parameter("weight", kiln::empty(weight_shape(out_channels, in_channels / groups, this->kernel_size)));
  this->bias = register_parameter("bias", bias ? empty({out_channels}) : Tensor());
  reset_parameters();
}

template <int N>
void ConvNd<N>::reset_parameters() {
  reset_conv(weight, bias);
}

// torch's _ConvNd._conv_forward: other modes than zeros pad first, then convolve unpadded.
template <int N>
Tensor ConvNd<N>::forward(const Tensor& x) {
  auto conv = [&](const Tensor& in, auto pad) {
    if constexpr (N == 1)
      return conv1d(in, weight, bias, stride, pad, dilation, groups);
    else if constexpr (N == 2)
      return conv2d(in, weight, bias, stride, pad, dilation, groups);
    else
      return conv3d(in, weight, bias, stride, pad, dilation, groups);
  };
  if (padding_mode != "zeros")
    return conv(kiln::pad(x, reversed_padding_twice(padding_string, padding, kernel_size, dilation), padding_mode),
                IntArrayRef(0));
  if (!padding_string.empty()) return conv(x, padding_string);
  return conv(x, IntArrayRef(padding));
}

template <int N>
void ConvNd<N>::set_padding_string(std::string_view padding) {
  padding_string = padding_string_of(kConvName[N], padding, stride);
}

template <int N>
std::string ConvNd<N>::extra_repr() const {
  return conv_repr(in_channels, out_channels, kernel_size, stride, padding, dilation, std::vector<int64_t>(N, 0),
                   groups, bias.defined(), padding_string, padding_mode);
}

template <int N>
ConvTransposeNd<N>::ConvTransposeNd(int64_t in_channels, int64_t out_channels, IntArrayRef kernel_size,
                                    IntArrayRef stride, IntArrayRef padding, IntArrayRef output_padding, int64_t groups,
                                    bool bias, IntArrayRef dilation)
    : Module(kConvTransposeName[N]),
      in_channels(in_channels),
      out_channels(out_channels),
      kernel_size(expand_arg(kConvTransposeName[N], "kernel_size", kernel_size, N)),
      stride(expand_arg(kConvTransposeName[N], "stride", stride, N)),
      padding(expand_arg(kConvTransposeName[N], "padding", padding, N)),
      output_padding(expand_arg(kConvTransposeName[N], "output_padding", output_padding, N)),
      dilation(expand_arg(kConvTransposeName[N], "dilation", dilation, N)),
      groups(groups) {
  check_conv_args(kConvTransposeName[N], in_channels, out_channels, groups, this->kernel_size, this->stride,
                  this->padding, this->dilation);
  check_output_padding(kConvTransposeName[N], this->output_padding, this->stride, this->dilation);
  weight =
      register_parameter("weight", kiln::empty(weight_shape(in_channels, out_channels / groups, this->kernel_size)));
  this->bias = register_parameter("bias", bias ? empty({out_channels}) : Tensor());
  reset_parameters();
}

template <int N>
void ConvTransposeNd<N>::reset_parameters() {
  reset_conv(weight, bias);
}

template <int N>
Tensor ConvTransposeNd<N>::forward(const Tensor& x) {
  if constexpr (N == 1)
    return conv_transpose1d(x, weight, bias, stride, padding, output_padding, groups, dilation);
  else if constexpr (N == 2)
    return conv_transpose2d(x, weight, bias, stride, padding, output_padding, groups, dilation);
  else
    return conv_transpose3d(x, weight, bias, stride, padding, output_padding, groups, dilation);
}

template <int N>
std::string ConvTransposeNd<N>::extra_repr() const {
  return conv_repr(in_channels, out_channels, kernel_size, stride, padding, dilation, output_padding, groups,
                   bias.defined());
}

template class ConvNd<1>;
template class ConvNd<2>;
template class ConvNd<3>;
template class ConvTransposeNd<1>;
template class ConvTransposeNd<2>;
template class ConvTransposeNd<3>;

}  // namespace kiln::nn
