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

// [c0, c1, *kernel]
std::vector<int64_t> weight_shape(int64_t c0, int64_t c1, const std::vector<int64_t>& k) {
  std::vector<int64_t> s{c0, c1};
  s.insert(s.end(), k.begin(), k.end());
  return s;
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

// torch's _ConvNd._conv_forward: other modes than zeros pad first, then convolve unpadded.
Tensor conv_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const std::vector<int64_t>& stride,
                    const std::vector<int64_t>& padding, const std::string& padding_string,
                    const std::string& padding_mode, const std::vector<int64_t>& kernel,
                    const std::vector<int64_t>& dilation, int64_t groups) {
  const size_t nd = kernel.size();
  auto conv = [&](const Tensor& in, auto pad) {
    return nd == 1   ? conv1d(in, weight, bias, stride, pad, dilation, groups)
           : nd == 2 ? conv2d(in, weight, bias, stride, pad, dilation, groups)
                     : conv3d(in, weight, bias, stride, pad, dilation, groups);
  };
  if (padding_mode != "zeros")
    return conv(kiln::pad(x, reversed_padding_twice(padding_string, padding, kernel, dilation), padding_mode),
                IntArrayRef(0));
  if (!padding_string.empty()) return conv(x, padding_string);
  return conv(x, IntArrayRef(padding));
}

}  // namespace

Conv1d::Conv1d(int64_t in_channels, int64_t out_channels, IntArrayRef kernel_size, IntArrayRef stride,
               IntArrayRef padding, IntArrayRef dilation, int64_t groups, bool bias, const std::string& padding_mode)
    : Module("Conv1d"),
      in_channels(in_channels),
      out_channels(out_channels),
      kernel_size(expand_arg("Conv1d", "kernel_size", kernel_size, 1)),
      stride(expand_arg("Conv1d", "stride", stride, 1)),
      padding(expand_arg("Conv1d", "padding", padding, 1)),
      dilation(expand_arg("Conv1d", "dilation", dilation, 1)),
      groups(groups),
      padding_mode(padding_mode) {
  check_padding_mode("Conv1d", padding_mode);
  check_conv_args("Conv1d", in_channels, out_channels, groups, this->kernel_size, this->stride, this->padding,
                  this->dilation);
  weight = register_parameter("weight", empty({out_channels, in_channels / groups, this->kernel_size[0]}));
  this->bias = register_parameter("bias", bias ? empty({out_channels}) : Tensor());
  reset_parameters();
}

void Conv1d::reset_parameters() { reset_conv(weight, bias); }

Tensor Conv1d::forward(const Tensor& x) {
  return conv_forward(x, weight, bias, stride, padding, padding_string, padding_mode, kernel_size, dilation, groups);
}

void Conv1d::set_padding_string(std::string_view padding) {
  padding_string = padding_string_of("Conv1d", padding, stride);
}

std::string Conv1d::extra_repr() const {
  return conv_repr(in_channels, out_channels, kernel_size, stride, padding, dilation, {0}, groups, bias.defined(),
                   padding_string, padding_mode);
}

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, IntArrayRef kernel_size, IntArrayRef stride,
               IntArrayRef padding, IntArrayRef dilation, int64_t groups, bool bias, const std::string& padding_mode)
    : Module("Conv2d"),
      in_channels(in_channels),
      out_channels(out_channels),
      kernel_size(expand_arg("Conv2d", "kernel_size", kernel_size, 2)),
      stride(expand_arg("Conv2d", "stride", stride, 2)),
      padding(expand_arg("Conv2d", "padding", padding, 2)),
      dilation(expand_arg("Conv2d", "dilation", dilation, 2)),
      groups(groups),
      padding_mode(padding_mode) {
  check_padding_mode("Conv2d", padding_mode);
  check_conv_args("Conv2d", in_channels, out_channels, groups, this->kernel_size, this->stride, this->padding,
                  this->dilation);
  weight = register_parameter("weight",
                              empty({out_channels, in_channels / groups, this->kernel_size[0], this->kernel_size[1]}));
  this->bias = register_parameter("bias", bias ? empty({out_channels}) : Tensor());
  reset_parameters();
}

void Conv2d::reset_parameters() { reset_conv(weight, bias); }

Tensor Conv2d::forward(const Tensor& x) {
  return conv_forward(x, weight, bias, stride, padding, padding_string, padding_mode, kernel_size, dilation, groups);
}

void Conv2d::set_padding_string(std::string_view padding) {
  padding_string = padding_string_of("Conv2d", padding, stride);
}

std::string Conv2d::extra_repr() const {
  return conv_repr(in_channels, out_channels, kernel_size, stride, padding, dilation, {0, 0}, groups, bias.defined(),
                   padding_string, padding_mode);
}

ConvTranspose2d::ConvTranspose2d(int64_t in_channels, int64_t out_channels, IntArrayRef kernel_size, IntArrayRef stride,
                                 IntArrayRef padding, IntArrayRef output_padding, int64_t groups, bool bias,
                                 IntArrayRef dilation)
    : Module("ConvTranspose2d"),
      in_channels(in_channels),
      out_channels(out_channels),
      kernel_size(expand_arg("ConvTranspose2d", "kernel_size", kernel_size, 2)),
      stride(expand_arg("ConvTranspose2d", "stride", stride, 2)),
      padding(expand_arg("ConvTranspose2d", "padding", padding, 2)),
      output_padding(expand_arg("ConvTranspose2d", "output_padding", output_padding, 2)),
      dilation(expand_arg("ConvTranspose2d", "dilation", dilation, 2)),
      groups(groups) {
  check_conv_args("ConvTranspose2d", in_channels, out_channels, groups, this->kernel_size, this->stride, this->padding,
                  this->dilation);
  for (size_t i = 0; i < 2; ++i)
    KILN_CHECK(this->output_padding[i] >= 0 &&
                   (this->output_padding[i] < this->stride[i] || this->output_padding[i] < this->dilation[i]),
               "ConvTranspose2d: output padding must be smaller than either stride or dilation, got output_padding=",
               py_tuple(this->output_padding), " stride=", py_tuple(this->stride),
               " dilation=", py_tuple(this->dilation));
  weight = register_parameter("weight",
                              empty({in_channels, out_channels / groups, this->kernel_size[0], this->kernel_size[1]}));
  this->bias = register_parameter("bias", bias ? empty({out_channels}) : Tensor());
  reset_parameters();
}

void ConvTranspose2d::reset_parameters() { reset_conv(weight, bias); }

Tensor ConvTranspose2d::forward(const Tensor& x) {
  return conv_transpose2d(x, weight, bias, stride, padding, output_padding, groups, dilation);
}

std::string ConvTranspose2d::extra_repr() const {
  return conv_repr(in_channels, out_channels, kernel_size, stride, padding, dilation, output_padding, groups,
                   bias.defined());
}

Conv3d::Conv3d(int64_t in_channels, int64_t out_channels, IntArrayRef kernel_size, IntArrayRef stride,
               IntArrayRef padding, IntArrayRef dilation, int64_t groups, bool bias, const std::string& padding_mode)
    : Module("Conv3d"),
      in_channels(in_channels),
      out_channels(out_channels),
      kernel_size(expand_arg("Conv3d", "kernel_size", kernel_size, 3)),
      stride(expand_arg("Conv3d", "stride", stride, 3)),
      padding(expand_arg("Conv3d", "padding", padding, 3)),
      dilation(expand_arg("Conv3d", "dilation", dilation, 3)),
      groups(groups),
      padding_mode(padding_mode) {
  check_padding_mode("Conv3d", padding_mode);
  check_conv_args("Conv3d", in_channels, out_channels, groups, this->kernel_size, this->stride, this->padding,
                  this->dilation);
  weight =
      register_parameter("weight", kiln::empty(weight_shape(out_channels, in_channels / groups, this->kernel_size)));
  this->bias = register_parameter("bias", bias ? empty({out_channels}) : Tensor());
  reset_parameters();
}

void Conv3d::reset_parameters() { reset_conv(weight, bias); }

Tensor Conv3d::forward(const Tensor& x) {
  return conv_forward(x, weight, bias, stride, padding, padding_string, padding_mode, kernel_size, dilation, groups);
}

void Conv3d::set_padding_string(std::string_view padding) {
  padding_string = padding_string_of("Conv3d", padding, stride);
}

std::string Conv3d::extra_repr() const {
  return conv_repr(in_channels, out_channels, kernel_size, stride, padding, dilation, {0, 0, 0}, groups, bias.defined(),
                   padding_string, padding_mode);
}

#define KILN_CONV_TRANSPOSE(Name, fn, nd)                                                                          \
  Name::Name(int64_t in_channels, int64_t out_channels, IntArrayRef kernel_size, IntArrayRef stride,               \
             IntArrayRef padding, IntArrayRef output_padding, int64_t groups, bool bias, IntArrayRef dilation)     \
      : Module(#Name),                                                                                             \
        in_channels(in_channels),                                                                                  \
        out_channels(out_channels),                                                                                \
        kernel_size(expand_arg(#Name, "kernel_size", kernel_size, nd)),                                            \
        stride(expand_arg(#Name, "stride", stride, nd)),                                                           \
        padding(expand_arg(#Name, "padding", padding, nd)),                                                        \
        output_padding(expand_arg(#Name, "output_padding", output_padding, nd)),                                   \
        dilation(expand_arg(#Name, "dilation", dilation, nd)),                                                     \
        groups(groups) {                                                                                           \
    check_conv_args(#Name, in_channels, out_channels, groups, this->kernel_size, this->stride, this->padding,      \
                    this->dilation);                                                                               \
    check_output_padding(#Name, this->output_padding, this->stride, this->dilation);                               \
    weight = register_parameter("weight",                                                                          \
                                kiln::empty(weight_shape(in_channels, out_channels / groups, this->kernel_size))); \
    this->bias = register_parameter("bias", bias ? empty({out_channels}) : Tensor());                              \
    reset_parameters();                                                                                            \
  }                                                                                                                \
  void Name::reset_parameters() { reset_conv(weight, bias); }                                                      \
  Tensor Name::forward(const Tensor& x) {                                                                          \
    return fn(x, weight, bias, stride, padding, output_padding, groups, dilation);                                 \
  }                                                                                                                \
  std::string Name::extra_repr() const {                                                                           \
    return conv_repr(in_channels, out_channels, kernel_size, stride, padding, dilation, output_padding, groups,    \
                     bias.defined());                                                                              \
  }

// One definition for both ranks (ConvTranspose2d predates them and is spelled out above).
KILN_CONV_TRANSPOSE(ConvTranspose1d, conv_transpose1d, 1)
KILN_CONV_TRANSPOSE(ConvTranspose3d, conv_transpose3d, 3)
#undef KILN_CONV_TRANSPOSE

}  // namespace kiln::nn
