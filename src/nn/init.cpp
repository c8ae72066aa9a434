// nn::init: torch.nn.init's fills and formulas. Every fill runs under NoGradGuard, so a
// parameter is initialised in place without recording autograd history.
#include "kiln/nn/init.h"

#include <cmath>

#include "core/tensor_impl.h"
#include "kiln/autograd.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/pointwise.h"

namespace kiln::nn::init {

namespace {

void check_defined(const Tensor& t, const char* fn) { KILN_CHECK(t.defined(), "nn::init::", fn, ": undefined tensor"); }

int64_t fan_for(const Tensor& t, const std::string& mode, const char* fn) {
  KILN_CHECK(mode == "fan_in" || mode == "fan_out", "nn::init::", fn, ": mode '", mode,
             "' not supported, please use one of fan_in, fan_out");
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  return mode == "fan_in" ? fan_in : fan_out;
}

double norm_cdf(double x) { return (1.0 + std::erf(x / std::sqrt(2.0))) / 2.0; }

}  // namespace

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  check_defined(t, "calculate_fan_in_and_fan_out");
  KILN_CHECK(t.dim() >= 2,
             "nn::init: fan in and fan out can not be computed for a tensor with fewer than 2 "
             "dimensions, got shape ",
             shape_str(t.sizes()));
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.sizes()[d];
  return {t.sizes()[1] * receptive, t.sizes()[0] * receptive};
}

double calculate_gain(const std::string& nonlinearity, double param) {
  static const char* const kLinear[] = {"linear",           "conv1d",           "conv2d",           "conv3d",
                                        "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "sigmoid"};
  for (const char* n : kLinear)
    if (nonlinearity == n) return 1.0;
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") return std::sqrt(2.0 / (1.0 + param * param));
  if (nonlinearity == "selu") return 3.0 / 4.0;
  KILN_FAIL("nn::init::calculate_gain: unsupported nonlinearity '", nonlinearity,
            "' (expected linear, conv1d, conv2d, conv3d, conv_transpose1d/2d/3d, sigmoid, tanh, relu, "
            "leaky_relu or selu)");
}

Tensor& uniform_(Tensor& t, double a, double b, Generator* gen) {
  check_defined(t, "uniform_");
  NoGradGuard no_grad;
  return kiln::uniform_(t, a, b, gen);
}

Tensor& normal_(Tensor& t, double mean, double std, Generator* gen) {
  check_defined(t, "normal_");
  NoGradGuard no_grad;
  return kiln::normal_(t, mean, std, gen);
}

// As torch: inverse-CDF sampling. u ~ U(2Φ(α)-1, 2Φ(β)-1), then mean + std·√2·erfinv(u), clamped to
// [a, b] against rounding at the ends.
Tensor& trunc_normal_(Tensor& t, double mean, double std, double a, double b, Generator* gen) {
  check_defined(t, "trunc_normal_");
  KILN_CHECK(a <= b, "nn::init::trunc_normal_: expected a <= b, got a=", a, " b=", b);
  KILN_CHECK(std > 0, "nn::init::trunc_normal_: expected std > 0, got ", std);
  KILN_CHECK(t.is_floating_point(), "nn::init::trunc_normal_: expected a floating tensor, got dtype ", t.dtype());
  NoGradGuard no_grad;
  if (t.numel() == 0) return t;
  double lo = 2.0 * norm_cdf((a - mean) / std) - 1.0, hi = 2.0 * norm_cdf((b - mean) / std) - 1.0;
  // Reduced-precision tensors sample in float32 so erfinv keeps its resolution near ±1.
  DType ct = t.dtype() == kFloat64 ? kFloat64 : kFloat32;
  Tensor u = empty(t.sizes().vec(), TensorOptions(ct).device(t.device()));
  kiln::uniform_(u, lo, hi, gen);
  Tensor v = clamp(erfinv(u) * (std * std::sqrt(2.0)) + mean, Scalar(a), Scalar(b));
  t.copy_(v);
  return t;
}

Tensor& constant_(Tensor& t, double value) {
  check_defined(t, "constant_");
  NoGradGuard no_grad;
  return t.fill_(value);
}

Tensor& zeros_(Tensor& t) {
  check_defined(t, "zeros_");
  NoGradGuard no_grad;
  return t.zero_();
}

Tensor& ones_(Tensor& t) {
  check_defined(t, "ones_");
  NoGradGuard no_grad;
  return t.fill_(1);
}

Tensor& xavier_uniform_(Tensor& t, double gain, Generator* gen) {
  check_defined(t, "xavier_uniform_");
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  if (t.numel() == 0) return t;
  double bound = std::sqrt(3.0) * gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out));
  return init::uniform_(t, -bound, bound, gen);
}

Tensor& xavier_normal_(Tensor& t, double gain, Generator* gen) {
  check_defined(t, "xavier_normal_");
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  if (t.numel() == 0) return t;
  return init::normal_(t, 0.0, gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out)), gen);
}

// Zero-element tensors are left alone (torch warns and returns), which also avoids dividing by a zero fan.
Tensor& kaiming_uniform_(Tensor& t, double a, const std::string& mode, const std::string& nonlinearity,
                         Generator* gen) {
  check_defined(t, "kaiming_uniform_");
  int64_t fan = fan_for(t, mode, "kaiming_uniform_");
  double gain = calculate_gain(nonlinearity, a);
  if (t.numel() == 0) return t;
  double bound = std::sqrt(3.0) * gain / std::sqrt(static_cast<double>(fan));
  return init::uniform_(t, -bound, bound, gen);
}

Tensor& kaiming_normal_(Tensor& t, double a, const std::string& mode, const std::string& nonlinearity, Generator* gen) {
  check_defined(t, "kaiming_normal_");
  int64_t fan = fan_for(t, mode, "kaiming_normal_");
  double gain = calculate_gain(nonlinearity, a);
  if (t.numel() == 0) return t;
  return init::normal_(t, 0.0, gain / std::sqrt(static_cast<double>(fan)), gen);
}

}  // namespace kiln::nn::init
