// Unary pointwise ops: public functions, meta functions and decompositions.
// VJP rules are in grad_pointwise.cpp, CPU kernels in backend/cpu/pointwise_unary.cpp.
#include <cmath>
#include <limits>

#include "dispatch/dispatch.h"
#include "kiln/autograd.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/pointwise.h"
#include "kiln/ops/shape.h"
#include "ops/meta_util.h"

namespace kiln {

namespace {
// ---- meta ----
const Tensor& unary_input(const OpCall& c) {
  KILN_CHECK(c.in(0).defined(), c.name(), ": expected a defined input tensor");
  return c.in(0);
}
std::vector<TensorMeta> out_like(const Tensor& x, DType t) { return one_output(x.sizes().vec(), t, x.device()); }

// Output dtype = input dtype (neg, abs, floor, ...).
std::vector<TensorMeta> meta_same1(const OpCall& c) {
  const Tensor& x = unary_input(c);
  return out_like(x, x.dtype());
}
std::vector<TensorMeta> meta_not_bool(const OpCall& c) {
  const Tensor& x = unary_input(c);
  KILN_CHECK(x.dtype() != DType::Bool, c.name(), ": not supported for bool tensors (shape ", shape_str(x.sizes()),
             ")");
  return out_like(x, x.dtype());
}
std::vector<TensorMeta> meta_neg(const OpCall& c) {
  const Tensor& x = unary_input(c);
  KILN_CHECK(x.dtype() != DType::Bool, c.name(),
             ": negation, the `-` operator, on a bool tensor is not supported; use the `~` or logical_not() "
             "operator to invert a mask");
  return out_like(x, x.dtype());
}
// Float math: integral and bool inputs give the default float dtype.
std::vector<TensorMeta> meta_float1(const OpCall& c) {
  const Tensor& x = unary_input(c);
  return out_like(x, to_floating(x.dtype()));
}
// Ops PyTorch defines only for floating inputs (no promotion).
std::vector<TensorMeta> meta_float_only(const OpCall& c) {
  const Tensor& x = unary_input(c);
  KILN_CHECK(is_floating_point(x.dtype()), c.name(), ": expected a floating point tensor, got dtype ", x.dtype(),
             " (shape ", shape_str(x.sizes()), ")");
  return out_like(x, x.dtype());
}
std::vector<TensorMeta> meta_gelu(const OpCall& c) {
  const std::string& a = c.attrs.str(0);
  KILN_CHECK(a == "none" || a == "tanh", "gelu: approximate must be 'none' or 'tanh', got '", a, "'");
  return meta_float_only(c);
}
// A pointwise backward op (grad_out, x; ...): grad_out and x of one floating dtype and shape.
std::vector<TensorMeta> meta_pointwise_backward(const OpCall& c) {
  const Tensor &g = c.in(0), &x = c.in(1);
  const char* op = c.name();
  KILN_CHECK(g.defined() && x.defined(), op, ": expected defined grad_out and x");
  KILN_CHECK(is_floating_point(x.dtype()), op, ": expected a floating x, got dtype ", x.dtype());
  KILN_CHECK(g.dtype() == x.dtype(), op, ": expected grad_out of dtype ", x.dtype(), " (x's), got ", g.dtype());
  KILN_CHECK(g.sizes() == x.sizes(), op, ": expected grad_out of shape ", shape_str(x.sizes()), " (x's), got ",
             shape_str(g.sizes()));
  return one_output(x.sizes().vec(), x.dtype(), output_device(c.inputs));
}
// _gelu_backward (grad_out, x; approximate).
std::vector<TensorMeta> meta_gelu_backward(const OpCall& c) {
  const std::string& a = c.attrs.str(0);
  KILN_CHECK(a == "none" || a == "tanh", c.name(), ": approximate must be 'none' or 'tanh', got '", a, "'");
  return meta_pointwise_backward(c);
}
std::vector<TensorMeta> meta_bool1(const OpCall& c) { return out_like(unary_input(c), DType::Bool); }
std::vector<TensorMeta> meta_bitwise_not(const OpCall& c) {
  const Tensor& x = unary_input(c);
  KILN_CHECK(!is_floating_point(x.dtype()), c.name(), ": expected an integral or bool tensor, got dtype ", x.dtype());
  return out_like(x, x.dtype());
}
// square(bool) is int64, as torch computes it as pow(x, 2).
std::vector<TensorMeta> meta_square(const OpCall& c) {
  const Tensor& x = unary_input(c);
  return out_like(x, x.dtype() == DType::Bool ? DType::Int64 : x.dtype());
}
std::vector<TensorMeta> meta_round(const OpCall& c) {
  const Tensor& x = unary_input(c);
  KILN_CHECK(c.attrs.i(0) == 0 || is_floating_point(x.dtype()), "round: decimals is only supported for floating "
             "point tensors, got dtype ", x.dtype());
  return out_like(x, x.dtype());
}
std::vector<TensorMeta> meta_polygamma(const OpCall& c) {
  KILN_CHECK(c.attrs.i(0) >= 0, "polygamma(n, x) does not support negative n, got n = ", c.attrs.i(0));
  return meta_float1(c);
}
std::vector<TensorMeta> meta_clamp(const OpCall& c) {
  const Tensor& x = unary_input(c);
  auto lo = c.attrs.opt_s(0), hi = c.attrs.opt_s(1);
  KILN_CHECK(lo || hi, "clamp: at least one of 'min' or 'max' must not be None");
  KILN_CHECK(x.dtype() != DType::Bool, "clamp: not supported for bool tensors (shape ", shape_str(x.sizes()), ")");
  std::vector<Tensor> ts{x};
  if (lo) ts.push_back(wrap_scalar(*lo));
  if (hi) ts.push_back(wrap_scalar(*hi));
  DType rt = result_type(ts);
  // clamp(uint8, -1, 300) raises as in torch; float16 bounds are compared in float (Note [Scalars
  // out of range]).
  if (lo) check_scalar_bound(*lo, rt, "clamp");
  if (hi) check_scalar_bound(*hi, rt, "clamp");
  return out_like(x, rt);
}
std::vector<TensorMeta> meta_to(const OpCall& c) { return out_like(unary_input(c), c.attrs.dtype(0)); }

KILN_REGISTER_META(neg, meta_neg);
KILN_REGISTER_META(abs, meta_same1);
KILN_REGISTER_META(sign, meta_same1);
KILN_REGISTER_META(floor, meta_same1);
KILN_REGISTER_META(ceil, meta_same1);
KILN_REGISTER_META(trunc, meta_same1);
KILN_REGISTER_META(round, meta_round);
KILN_REGISTER_META(nan_to_num, meta_same1);
KILN_REGISTER_META(clone, meta_same1);
KILN_REGISTER_META(relu, meta_not_bool);
KILN_REGISTER_META(square, meta_square);
KILN_REGISTER_META(exp, meta_float1);
KILN_REGISTER_META(exp2, meta_float1);
KILN_REGISTER_META(log, meta_float1);
KILN_REGISTER_META(log2, meta_float1);
KILN_REGISTER_META(log10, meta_float1);
KILN_REGISTER_META(log1p, meta_float1);
KILN_REGISTER_META(expm1, meta_float1);
KILN_REGISTER_META(sqrt, meta_float1);
KILN_REGISTER_META(rsqrt, meta_float1);
KILN_REGISTER_META(reciprocal, meta_float1);
KILN_REGISTER_META(sin, meta_float1);
KILN_REGISTER_META(cos, meta_float1);
KILN_REGISTER_META(tan, meta_float1);
KILN_REGISTER_META(tanh, meta_float1);
KILN_REGISTER_META(sigmoid, meta_float1);
KILN_REGISTER_META(erf, meta_float1);
KILN_REGISTER_META(erfinv, meta_float1);
KILN_REGISTER_META(lgamma, meta_float1);
KILN_REGISTER_META(digamma, meta_float1);
KILN_REGISTER_META(polygamma, meta_polygamma);
KILN_REGISTER_META(erfc, meta_float1);
KILN_REGISTER_META(asin, meta_float1);
KILN_REGISTER_META(acos, meta_float1);
KILN_REGISTER_META(atan, meta_float1);
KILN_REGISTER_META(sinh, meta_float1);
KILN_REGISTER_META(cosh, meta_float1);
KILN_REGISTER_META(asinh, meta_float1);
KILN_REGISTER_META(acosh, meta_float1);
KILN_REGISTER_META(atanh, meta_float1);
KILN_REGISTER_META(logit, meta_float1);
KILN_REGISTER_META(frac, meta_float_only);
KILN_REGISTER_META(gelu, meta_gelu);
KILN_REGISTER_META(_gelu_backward, meta_gelu_backward);
KILN_REGISTER_META(threshold_backward, meta_pointwise_backward);
KILN_REGISTER_META(hardtanh_backward, meta_pointwise_backward);
KILN_REGISTER_META(silu, meta_float_only);
KILN_REGISTER_META(isnan, meta_bool1);
KILN_REGISTER_META(isinf, meta_bool1);
KILN_REGISTER_META(isfinite, meta_bool1);
KILN_REGISTER_META(logical_not, meta_bool1);
KILN_REGISTER_META(bitwise_not, meta_bitwise_not);
KILN_REGISTER_META(clamp, meta_clamp);
KILN_REGISTER_META(to, meta_to);

// ---- decompositions (into prims) ----
Tensor prim1(OpId op, const Tensor& x) { return call_op1(op, {x}); }
Tensor mul_s(const Tensor& x, double s) { return call_op1(OpId::mul, {x, wrap_scalar(s)}); }
Tensor add_s(const Tensor& x, double s) { return call_op1(OpId::add, {x, wrap_scalar(s)}, {Scalar(1)}); }

std::vector<Tensor> decomp_square(const OpCall& c) {
  Tensor x = c.in(0).dtype() == DType::Bool ? call_op1(OpId::to, {c.in(0)}, {DType::Int64}) : c.in(0);
  return {call_op1(OpId::mul, {x, x})};
}
// Half/BFloat16 inputs compute in float32 and round once at the end (opmath, meta_util.h).
Tensor to_opmath(const Tensor& x) {
  DType ct = opmath(x.dtype());
  return ct == x.dtype() ? x : call_op1(OpId::to, {x}, {ct});
}
Tensor from_opmath(const Tensor& r, DType t) { return r.dtype() == t ? r : call_op1(OpId::to, {r}, {t}); }

// sigmoid(x) = 1 / (1 + exp(-x))
std::vector<Tensor> decomp_sigmoid(const OpCall& c) {
  Tensor x = c.in(0);
  if (!is_floating_point(x.dtype())) x = call_op1(OpId::to, {x}, {default_dtype()});
  Tensor r = prim1(OpId::reciprocal, add_s(prim1(OpId::exp, prim1(OpId::neg, to_opmath(x))), 1.0));
  return {from_opmath(r, x.dtype())};
}
// relu(x) = maximum(x, 0): keeps NaN, as torch's relu does.
std::vector<Tensor> decomp_relu(const OpCall& c) {
  return {call_op1(OpId::maximum, {c.in(0), wrap_scalar(Scalar(int64_t(0)))})};
}
// exact: x/2 (1 + erf(x/sqrt 2)); tanh: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
std::vector<Tensor> decomp_gelu(const OpCall& c) {
  const Tensor x = to_opmath(c.in(0));
  Tensor inner;
  if (c.attrs.str(0) == "tanh") {
    Tensor x3 = call_op1(OpId::mul, {call_op1(OpId::mul, {x, x}), x});
    inner = prim1(OpId::tanh, mul_s(call_op1(OpId::add, {x, x3}, {Scalar(0.044715)}), std::sqrt(2.0 / M_PI)));
  } else {
    inner = prim1(OpId::erf, mul_s(x, M_SQRT1_2));
  }
  return {from_opmath(call_op1(OpId::mul, {mul_s(x, 0.5), add_s(inner, 1.0)}), c.in(0).dtype())};
}
// _gelu_backward, the formulas of math::GeluBackward / GeluTanhBackward:
// exact: g (Phi(x) + x phi(x)); tanh: g ((1 + t)/2 + x/2 (1 - t^2) b (1 + 3k x^2)),
// t = tanh(b (x + k x^3)), b = sqrt(2/pi), k = 0.044715.
std::vector<Tensor> decomp_gelu_backward(const OpCall& c) {
  const Tensor g = to_opmath(c.in(0)), x = to_opmath(c.in(1));
  auto mul = [](const Tensor& a, const Tensor& b) { return call_op1(OpId::mul, {a, b}); };
  const Tensor x2 = mul(x, x);
  Tensor d;
  if (c.attrs.str(0) == "tanh") {
    const double b = std::sqrt(2.0 / M_PI), k = 0.044715;
    Tensor t = prim1(OpId::tanh, mul_s(call_op1(OpId::add, {x, mul(x2, x)}, {Scalar(k)}), b));
    Tensor left = mul_s(add_s(t, 1.0), 0.5);
    Tensor one_minus_t2 = add_s(prim1(OpId::neg, mul(t, t)), 1.0);
    Tensor right = mul(mul(mul_s(x, 0.5), one_minus_t2), mul_s(add_s(mul_s(x2, 3 * k), 1.0), b));
    d = call_op1(OpId::add, {left, right}, {Scalar(1)});
  } else {
    Tensor cdf = mul_s(add_s(prim1(OpId::erf, mul_s(x, M_SQRT1_2)), 1.0), 0.5);
    Tensor pdf = mul_s(prim1(OpId::exp, mul_s(x2, -0.5)), 0.5 * M_2_SQRTPI * M_SQRT1_2);
    d = call_op1(OpId::add, {cdf, mul(x, pdf)}, {Scalar(1)});
  }
  return {from_opmath(mul(g, d), c.in(1).dtype())};
}
// threshold_backward: where(x <= threshold, 0, grad); hardtanh_backward: 0 where x <= min_val
// or x >= max_val.
std::vector<Tensor> decomp_threshold_backward(const OpCall& c) {
  Tensor drop = call_op1(OpId::le, {c.in(1), wrap_scalar(c.attrs.s(0))});
  return {call_op1(OpId::where, {drop, wrap_scalar(Scalar(0.0)), c.in(0)})};
}
std::vector<Tensor> decomp_hardtanh_backward(const OpCall& c) {
  Tensor drop = call_op1(OpId::logical_or, {call_op1(OpId::le, {c.in(1), wrap_scalar(c.attrs.s(0))}),
                                            call_op1(OpId::ge, {c.in(1), wrap_scalar(c.attrs.s(1))})});
  return {call_op1(OpId::where, {drop, wrap_scalar(Scalar(0.0)), c.in(0)})};
}
// silu(x) = x * sigmoid(x)
std::vector<Tensor> decomp_silu(const OpCall& c) {
  Tensor x = to_opmath(c.in(0));
  Tensor s = prim1(OpId::reciprocal, add_s(prim1(OpId::exp, prim1(OpId::neg, x)), 1.0));
  return {from_opmath(call_op1(OpId::mul, {x, s}), c.in(0).dtype())};
}
// frac(x) = x - trunc(x): keeps the sign, NaN at +-inf (as math::Frac).
std::vector<Tensor> decomp_frac(const OpCall& c) {
  return {call_op1(OpId::sub, {c.in(0), prim1(OpId::trunc, c.in(0))}, {Scalar(1)})};
}
// logit(x) = log(z / (1 - z)), z = x clamped to [eps, 1 - eps] when eps is given (a NaN stays).
// The upper bound is 1 - eps rounded in the compute type, as torch's kernel computes it.
std::vector<Tensor> decomp_logit(const OpCall& c) {
  DType out = to_floating(c.in(0).dtype());
  Tensor z = to_opmath(call_op1(OpId::to, {c.in(0)}, {out}));
  if (auto eps = c.attrs.opt_f(0)) {
    double hi = z.dtype() == DType::Float32 ? double(1.0f - float(*eps)) : 1.0 - *eps;
    z = call_op1(OpId::clamp, {z}, {Scalar(*eps), Scalar(hi)});
  }
  Tensor one_minus = call_op1(OpId::sub, {wrap_scalar(Scalar(1)), z}, {Scalar(1)});
  return {from_opmath(prim1(OpId::log, call_op1(OpId::div, {z, one_minus}, {std::monostate{}})), out)};
}
std::vector<Tensor> decomp_clone(const OpCall& c) { return {call_op1(OpId::to, {c.in(0)}, {c.in(0).dtype()})}; }

KILN_REGISTER_DECOMP(square, decomp_square);
KILN_REGISTER_DECOMP(sigmoid, decomp_sigmoid);
KILN_REGISTER_DECOMP(relu, decomp_relu);
KILN_REGISTER_DECOMP(gelu, decomp_gelu);
KILN_REGISTER_DECOMP(_gelu_backward, decomp_gelu_backward);
KILN_REGISTER_DECOMP(threshold_backward, decomp_threshold_backward);
KILN_REGISTER_DECOMP(hardtanh_backward, decomp_hardtanh_backward);
KILN_REGISTER_DECOMP(silu, decomp_silu);
KILN_REGISTER_DECOMP(clone, decomp_clone);
KILN_REGISTER_DECOMP(frac, decomp_frac);
KILN_REGISTER_DECOMP(logit, decomp_logit);

Tensor u(OpId op, const Tensor& x) { return call_op1(op, {x}); }
}  // namespace

Tensor neg(const Tensor& x) { return u(OpId::neg, x); }
Tensor abs(const Tensor& x) { return u(OpId::abs, x); }
Tensor sign(const Tensor& x) { return u(OpId::sign, x); }
Tensor exp(const Tensor& x) { return u(OpId::exp, x); }
Tensor exp2(const Tensor& x) { return u(OpId::exp2, x); }
Tensor log(const Tensor& x) { return u(OpId::log, x); }
Tensor log2(const Tensor& x) { return u(OpId::log2, x); }
Tensor log10(const Tensor& x) { return u(OpId::log10, x); }
Tensor log1p(const Tensor& x) { return u(OpId::log1p, x); }
Tensor expm1(const Tensor& x) { return u(OpId::expm1, x); }
Tensor sqrt(const Tensor& x) { return u(OpId::sqrt, x); }
Tensor rsqrt(const Tensor& x) { return u(OpId::rsqrt, x); }
Tensor reciprocal(const Tensor& x) { return u(OpId::reciprocal, x); }
Tensor square(const Tensor& x) { return u(OpId::square, x); }
Tensor sin(const Tensor& x) { return u(OpId::sin, x); }
Tensor cos(const Tensor& x) { return u(OpId::cos, x); }
Tensor tan(const Tensor& x) { return u(OpId::tan, x); }
Tensor tanh(const Tensor& x) { return u(OpId::tanh, x); }
Tensor sigmoid(const Tensor& x) { return u(OpId::sigmoid, x); }
Tensor relu(const Tensor& x) { return u(OpId::relu, x); }
Tensor gelu(const Tensor& x, const std::string& approximate) { return call_op1(OpId::gelu, {x}, {approximate}); }
Tensor silu(const Tensor& x) { return u(OpId::silu, x); }
Tensor erf(const Tensor& x) { return u(OpId::erf, x); }
Tensor erfinv(const Tensor& x) { return u(OpId::erfinv, x); }
Tensor lgamma(const Tensor& x) { return u(OpId::lgamma, x); }
Tensor digamma(const Tensor& x) { return u(OpId::digamma, x); }
Tensor polygamma(int64_t n, const Tensor& x) { return call_op1(OpId::polygamma, {x}, {n}); }
Tensor erfc(const Tensor& x) { return u(OpId::erfc, x); }
Tensor asin(const Tensor& x) { return u(OpId::asin, x); }
Tensor acos(const Tensor& x) { return u(OpId::acos, x); }
Tensor atan(const Tensor& x) { return u(OpId::atan, x); }
Tensor sinh(const Tensor& x) { return u(OpId::sinh, x); }
Tensor cosh(const Tensor& x) { return u(OpId::cosh, x); }
Tensor asinh(const Tensor& x) { return u(OpId::asinh, x); }
Tensor acosh(const Tensor& x) { return u(OpId::acosh, x); }
Tensor atanh(const Tensor& x) { return u(OpId::atanh, x); }
Tensor frac(const Tensor& x) { return u(OpId::frac, x); }
Tensor logit(const Tensor& x, std::optional<double> eps) { return call_op1(OpId::logit, {x}, {opt_attr(eps)}); }
Tensor sgn(const Tensor& x) { return sign(x); }
// torch.deg2rad: x * (pi / 180); integer inputs give the default float dtype (the double scalar
// promotes them).
Tensor deg2rad(const Tensor& x) { return mul(x, Scalar(0.017453292519943295769236907684886127134428718885417)); }
Tensor floor(const Tensor& x) { return u(OpId::floor, x); }
Tensor ceil(const Tensor& x) { return u(OpId::ceil, x); }
Tensor round(const Tensor& x, int64_t decimals) { return call_op1(OpId::round, {x}, {decimals}); }
Tensor trunc(const Tensor& x) { return u(OpId::trunc, x); }
Tensor isnan(const Tensor& x) { return u(OpId::isnan, x); }
Tensor isinf(const Tensor& x) { return u(OpId::isinf, x); }
Tensor isfinite(const Tensor& x) { return u(OpId::isfinite, x); }
Tensor nan_to_num(const Tensor& x, std::optional<double> nan, std::optional<double> posinf,
                  std::optional<double> neginf) {
  return call_op1(OpId::nan_to_num, {x}, {opt_attr(nan), opt_attr(posinf), opt_attr(neginf)});
}
Tensor logical_not(const Tensor& x) { return u(OpId::logical_not, x); }
Tensor bitwise_not(const Tensor& x) { return u(OpId::bitwise_not, x); }
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  return call_op1(OpId::clamp, {x}, {opt_attr(min), opt_attr(max)});
}
// Tensor bounds: min(max(x, lo), hi), so lo > hi gives hi and NaN propagates (as math::Clamp).
// An undefined bound is absent.
Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max) {
  KILN_CHECK(min.defined() || max.defined(), "clamp: at least one of 'min' or 'max' must not be None");
  Tensor r = x;
  if (min.defined()) r = maximum(r, min);
  if (max.defined()) r = minimum(r, max);
  return r;
}
Tensor clamp_min(const Tensor& x, const Scalar& min) { return clamp(x, min, std::nullopt); }
Tensor clamp_max(const Tensor& x, const Scalar& max) { return clamp(x, std::nullopt, max); }

Tensor to(const Tensor& x, DType t, bool copy) {
  if (x.dtype() == t && !copy) return x;
  return call_op1(OpId::to, {x}, {t});
}
Tensor clone(const Tensor& x) { return call_op1(OpId::clone, {x}); }

// ---- operators ----
Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator~(const Tensor& a) { return bitwise_not(a); }

// ---- Tensor methods ----
Tensor Tensor::neg() const { return kiln::neg(*this); }
Tensor Tensor::abs() const { return kiln::abs(*this); }
Tensor Tensor::sign() const { return kiln::sign(*this); }
Tensor Tensor::exp() const { return kiln::exp(*this); }
Tensor Tensor::log() const { return kiln::log(*this); }
Tensor Tensor::sqrt() const { return kiln::sqrt(*this); }
Tensor Tensor::rsqrt() const { return kiln::rsqrt(*this); }
Tensor Tensor::reciprocal() const { return kiln::reciprocal(*this); }
Tensor Tensor::sin() const { return kiln::sin(*this); }
Tensor Tensor::cos() const { return kiln::cos(*this); }
Tensor Tensor::tanh() const { return kiln::tanh(*this); }
Tensor Tensor::sigmoid() const { return kiln::sigmoid(*this); }
Tensor Tensor::relu() const { return kiln::relu(*this); }
Tensor Tensor::floor() const { return kiln::floor(*this); }
Tensor Tensor::ceil() const { return kiln::ceil(*this); }
Tensor Tensor::round() const { return kiln::round(*this); }
Tensor Tensor::square() const { return kiln::square(*this); }
Tensor Tensor::clamp(std::optional<Scalar> min, std::optional<Scalar> max) const { return kiln::clamp(*this, min, max); }
Tensor Tensor::logical_not() const { return kiln::logical_not(*this); }
Tensor Tensor::isnan() const { return kiln::isnan(*this); }
Tensor Tensor::to(DType t, bool copy) const { return kiln::to(*this, t, copy); }
Tensor Tensor::clone() const { return kiln::clone(*this); }

Tensor& Tensor::clamp_(std::optional<Scalar> min, std::optional<Scalar> max) {
  return call_op_inplace(*this, OpId::clamp, {*this}, {opt_attr(min), opt_attr(max)});
}
Tensor& Tensor::sqrt_() { return call_op_inplace(*this, OpId::sqrt, {*this}); }
Tensor& Tensor::exp_() { return call_op_inplace(*this, OpId::exp, {*this}); }
Tensor& Tensor::relu_() { return call_op_inplace(*this, OpId::relu, {*this}); }

// fill_ writes `full` of self's shape into self (no history: the result is a constant).
Tensor& Tensor::fill_(const Scalar& v) {
  check_scalar_fits(v, dtype(), "fill_");
  if (is_grad_enabled() && requires_grad()) {
    // Through the autograd path (which refuses leaves): the value no longer depends on the history.
    return call_op_inplace(*this, OpId::full_like, {*this}, {v, dtype(), device()});
  }
  // Every element receives the same value, so an expanded tensor (a stride-0 dim of size > 1,
  // whose elements share memory) is filled through the view without its repeats, as PyTorch
  // allows fill_ and zero_ there (Note [Overlapping writes]: ops whose value depends on the
  // element, add_, still refuse it).
  {
    Shape one(sizes().begin(), sizes().end());
    bool expanded = false;
    for (size_t d = 0; d < one.size(); ++d)
      if (strides()[d] == 0 && one[d] > 1) {
        one[d] = 1;
        expanded = true;
      }
    if (expanded) {
      Tensor cover = kiln::as_strided(*this, SymIntArrayRef(one), strides().vec(), storage_offset());
      cover.fill_(v);
      return *this;
    }
  }
  return call_op_inplace(*this, OpId::full, {}, {sizes().vec(), v, dtype(), device()});
}
Tensor& Tensor::zero_() { return fill_(Scalar(int64_t(0))); }

}  // namespace kiln

// ---- sinc, isneginf, isposinf, signbit ----
namespace kiln {
namespace {
std::vector<TensorMeta> meta_sinc(const OpCall& c) {
  const Tensor& x = unary_input(c);
  return out_like(x, to_floating(x.dtype()));
}
std::vector<TensorMeta> meta_bool_out(const OpCall& c) { return out_like(unary_input(c), DType::Bool); }

// torch's kernel: 1 where x == 0, else sin(pi x) / (pi x). The product is taken where x != 0 only
// (1 elsewhere) so that the unused branch's gradient at 0 is finite: sinc'(0) = 0 as in torch.
std::vector<Tensor> decomp_sinc(const OpCall& c) {
  const DType out = meta_sinc(c)[0].dtype, t = opmath(out);  // float16/bfloat16 compute in float32
  Tensor x = c.in(0).dtype() == t ? c.in(0) : c.in(0).to(t);
  Tensor zero = eq(x, Scalar(0.0));
  Tensor px = where(zero, Scalar(1.0), x) * Scalar(3.14159265358979323846);
  Tensor r = where(zero, Scalar(1.0), sin(px) / px);
  return {r.dtype() == out ? r : r.to(out)};
}
// Integers and bools are never infinite.
std::vector<Tensor> decomp_isneginf(const OpCall& c) {
  meta_bool_out(c);  // errors first, with the op's name
  const Tensor& x = c.in(0);
  if (!is_floating_point(x.dtype())) return {zeros_like(x, TensorOptions(DType::Bool).device(x.device()))};
  return {eq(x, Scalar(-std::numeric_limits<double>::infinity()))};
}
std::vector<Tensor> decomp_isposinf(const OpCall& c) {
  meta_bool_out(c);  // errors first, with the op's name
  const Tensor& x = c.in(0);
  if (!is_floating_point(x.dtype())) return {zeros_like(x, TensorOptions(DType::Bool).device(x.device()))};
  return {eq(x, Scalar(std::numeric_limits<double>::infinity()))};
}
// The sign bit itself for floats (-0.0 and a negative NaN have it): copysign carries it to 1.
std::vector<Tensor> decomp_signbit(const OpCall& c) {
  meta_bool_out(c);  // errors first, with the op's name
  const Tensor& x = c.in(0);
  if (x.dtype() == DType::Bool) return {zeros_like(x, TensorOptions(DType::Bool).device(x.device()))};
  if (!is_floating_point(x.dtype())) return {lt(x, Scalar(int64_t(0)))};
  return {lt(copysign(ones_like(x), x), Scalar(0.0))};
}
KILN_REGISTER_META(sinc, meta_sinc);
KILN_REGISTER_META(isneginf, meta_bool_out);
KILN_REGISTER_META(isposinf, meta_bool_out);
KILN_REGISTER_META(signbit, meta_bool_out);
KILN_REGISTER_DECOMP(sinc, decomp_sinc);
KILN_REGISTER_DECOMP(isneginf, decomp_isneginf);
KILN_REGISTER_DECOMP(isposinf, decomp_isposinf);
KILN_REGISTER_DECOMP(signbit, decomp_signbit);
}  // namespace

Tensor sinc(const Tensor& x) { return call_op1(OpId::sinc, {x}); }
Tensor isneginf(const Tensor& x) { return call_op1(OpId::isneginf, {x}); }
Tensor isposinf(const Tensor& x) { return call_op1(OpId::isposinf, {x}); }
Tensor signbit(const Tensor& x) { return call_op1(OpId::signbit, {x}); }
}  // namespace kiln
