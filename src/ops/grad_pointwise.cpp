// VJP rules of pointwise ops, written with kiln ops so they run in eager
// autograd, trace into ahead-of-time backward graphs, and differentiate again
// (double backward) where the math allows.
#include <cmath>

#include "dispatch/dispatch.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/pointwise.h"
#include "ops/grad_util.h"
#include "ops/save_rule.h"

namespace kiln {
namespace {

constexpr double kLn2 = 0.693147180559945309417;
constexpr double kLn10 = 2.30258509299404568402;
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;
constexpr double kSqrtPiOver2 = 0.886226925452758013649;
constexpr double kInvSqrt2Pi = 0.398942280401432677940;
constexpr double kSqrt1_2 = 0.707106781186547524401;
constexpr double kSqrt2OverPi = 0.797884560802865355880;
constexpr double kGeluKappa = 0.044715;

template <UnaryRule R>
constexpr auto unary = &unary_vjp<R>;
const Tensor& x_(const VjpCall& v) { return vjp_input0(v); }
const Tensor& y_(const VjpCall& v) { return v.outputs[0]; }

constexpr uint64_t bit(size_t i) { return uint64_t{1} << i; }
bool has(uint64_t needs, size_t i) { return (needs & bit(i)) != 0; }

// Piecewise-constant ops (floor, sign, rounding modes of div, ...) have a zero gradient, as in PyTorch.
std::vector<Tensor> zero_grads(const VjpCall& v) {
  std::vector<Tensor> r(v.input_meta.size());
  for (size_t i = 0; i < r.size(); ++i)
    if (v.needs(i)) r[i] = reduce_grad(v, i, v.grads[0] * 0.0);
  return r;
}

Tensor g_neg(const VjpCall&, const Tensor& g) { return neg(g); }
Tensor g_abs(const VjpCall& v, const Tensor& g) { return g * sign(x_(v)); }
Tensor g_exp(const VjpCall& v, const Tensor& g) { return g * y_(v); }
Tensor g_exp2(const VjpCall& v, const Tensor& g) { return g * y_(v) * kLn2; }
Tensor g_log(const VjpCall& v, const Tensor& g) { return g / x_(v); }
Tensor g_log2(const VjpCall& v, const Tensor& g) { return g / (x_(v) * kLn2); }
Tensor g_log10(const VjpCall& v, const Tensor& g) { return g / (x_(v) * kLn10); }
Tensor g_log1p(const VjpCall& v, const Tensor& g) { return g / (x_(v) + 1); }
Tensor g_expm1(const VjpCall& v, const Tensor& g) { return g * (y_(v) + 1); }
Tensor g_sqrt(const VjpCall& v, const Tensor& g) { return g / (y_(v) * 2); }
Tensor g_rsqrt(const VjpCall& v, const Tensor& g) { return g * (y_(v) * y_(v) * y_(v)) * -0.5; }
Tensor g_reciprocal(const VjpCall& v, const Tensor& g) { return -(g * (y_(v) * y_(v))); }
Tensor g_square(const VjpCall& v, const Tensor& g) { return g * x_(v) * 2; }
Tensor g_sin(const VjpCall& v, const Tensor& g) { return g * cos(x_(v)); }
Tensor g_cos(const VjpCall& v, const Tensor& g) { return -(g * sin(x_(v))); }
Tensor g_tan(const VjpCall& v, const Tensor& g) { return g * (y_(v) * y_(v) + 1); }
Tensor g_tanh(const VjpCall& v, const Tensor& g) { return g * rsub(y_(v) * y_(v), 1); }
Tensor g_sigmoid(const VjpCall& v, const Tensor& g) { return g * (y_(v) * rsub(y_(v), 1)); }
// Zero where the result is <= 0; NaN passes the gradient through (torch's threshold_backward).
// torch's threshold_backward: one pass (the op formula when the gradient needs a graph).
Tensor g_relu(const VjpCall& v, const Tensor& g) {
  const Tensor& y = y_(v);
  if (grad_needs_graph(v) || !is_floating_point(y.dtype())) return where(le(y, 0), Scalar(0), g);
  return call_op1(OpId::threshold_backward, {g.dtype() == y.dtype() ? g : g.to(y.dtype()), y}, {Scalar(0)});
}
Tensor g_erf(const VjpCall& v, const Tensor& g) { return g * (exp(-square(x_(v))) * kTwoOverSqrtPi); }
Tensor g_erfinv(const VjpCall& v, const Tensor& g) { return g * (exp(square(y_(v))) * kSqrtPiOver2); }
Tensor g_erfc(const VjpCall& v, const Tensor& g) { return -(g * (exp(-square(x_(v))) * kTwoOverSqrtPi)); }
Tensor g_lgamma(const VjpCall& v, const Tensor& g) { return g * digamma(x_(v)); }
Tensor g_digamma(const VjpCall& v, const Tensor& g) { return g * polygamma(1, x_(v)); }
Tensor g_polygamma(const VjpCall& v, const Tensor& g) { return g * polygamma(v.attrs.i(0) + 1, x_(v)); }
Tensor g_asin(const VjpCall& v, const Tensor& g) { return g * rsqrt(rsub(square(x_(v)), 1)); }
Tensor g_acos(const VjpCall& v, const Tensor& g) { return -(g * rsqrt(rsub(square(x_(v)), 1))); }
Tensor g_atan(const VjpCall& v, const Tensor& g) { return g / (square(x_(v)) + 1); }
Tensor g_sinh(const VjpCall& v, const Tensor& g) { return g * cosh(x_(v)); }
Tensor g_cosh(const VjpCall& v, const Tensor& g) { return g * sinh(x_(v)); }
Tensor g_asinh(const VjpCall& v, const Tensor& g) { return g * rsqrt(square(x_(v)) + 1); }
Tensor g_acosh(const VjpCall& v, const Tensor& g) { return g * rsqrt(square(x_(v)) - 1); }
Tensor g_atanh(const VjpCall& v, const Tensor& g) { return g / rsub(square(x_(v)), 1); }
// torch's logit_backward: g / (x (1 - x)); outside [0, 1] NaN, or with eps 0 outside [eps, 1 - eps].
Tensor g_logit(const VjpCall& v, const Tensor& g) {
  const Tensor& x = x_(v);
  Tensor d = g / (x * rsub(x, 1));
  if (auto eps = v.attrs.opt_f(0)) return where(logical_or(lt(x, *eps), gt(x, 1.0 - *eps)), Scalar(0), d);
  return where(logical_or(lt(x, 0), gt(x, 1)), Scalar(std::nan("")), d);
}
Tensor g_nan_to_num(const VjpCall& v, const Tensor& g) { return where(isfinite(x_(v)), g, Scalar(0)); }
// silu'(x) = s (1 + x (1 - s)), s = sigmoid(x)
Tensor g_silu(const VjpCall& v, const Tensor& g) {
  const Tensor& x = x_(v);
  Tensor s = sigmoid(x);
  return g * (s * (x * rsub(s, 1) + 1));
}
Tensor g_gelu(const VjpCall& v, const Tensor& g) {
  const Tensor& x = x_(v);
  // One kernel unless the gradient is to be differentiated (Note [Fused norm and activation backward]).
  if (!grad_needs_graph(v))
    return call_op1(OpId::_gelu_backward, {g.dtype() == x.dtype() ? g : g.to(x.dtype()), x}, {v.attrs.str(0)});
  if (v.attrs.str(0) == "tanh") {
    // d/dx x/2 (1 + t), t = tanh(b (x + k x^3)): (1 + t)/2 + x/2 (1 - t^2) b (1 + 3k x^2)
    Tensor x2 = square(x);
    Tensor t = tanh((x + x2 * x * kGeluKappa) * kSqrt2OverPi);
    Tensor left = (t + 1) * 0.5;
    Tensor right = x * 0.5 * rsub(square(t), 1) * ((x2 * (3 * kGeluKappa) + 1) * kSqrt2OverPi);
    return g * (left + right);
  }
  // Phi(x) + x phi(x)
  Tensor cdf = (erf(x * kSqrt1_2) + 1) * 0.5;
  Tensor pdf = exp(square(x) * -0.5) * kInvSqrt2Pi;
  return g * (cdf + x * pdf);
}
// Gradient flows where lo <= x <= hi (NaN x gets none), as PyTorch's clamp_backward.
Tensor g_clamp(const VjpCall& v, const Tensor& g) {
  const Tensor& x = x_(v);
  auto lo = v.attrs.opt_s(0), hi = v.attrs.opt_s(1);
  Tensor mask;
  if (lo) mask = ge(x, *lo);
  if (hi) mask = mask.defined() ? logical_and(mask, le(x, *hi)) : le(x, *hi);
  return where(mask, g, Scalar(0));
}
Tensor g_to(const VjpCall&, const Tensor& g) { return g; }

KILN_REGISTER_VJP(neg, unary<g_neg>);
KILN_REGISTER_VJP(abs, unary<g_abs>);
KILN_REGISTER_VJP(exp, unary<g_exp>);
KILN_REGISTER_VJP(exp2, unary<g_exp2>);
KILN_REGISTER_VJP(log, unary<g_log>);
KILN_REGISTER_VJP(log2, unary<g_log2>);
KILN_REGISTER_VJP(log10, unary<g_log10>);
KILN_REGISTER_VJP(log1p, unary<g_log1p>);
KILN_REGISTER_VJP(expm1, unary<g_expm1>);
KILN_REGISTER_VJP(sqrt, unary<g_sqrt>);
KILN_REGISTER_VJP(rsqrt, unary<g_rsqrt>);
KILN_REGISTER_VJP(reciprocal, unary<g_reciprocal>);
KILN_REGISTER_VJP(square, unary<g_square>);
KILN_REGISTER_VJP(sin, unary<g_sin>);
KILN_REGISTER_VJP(cos, unary<g_cos>);
KILN_REGISTER_VJP(tan, unary<g_tan>);
KILN_REGISTER_VJP(tanh, unary<g_tanh>);
KILN_REGISTER_VJP(sigmoid, unary<g_sigmoid>);
KILN_REGISTER_VJP(relu, unary<g_relu>);
KILN_REGISTER_VJP(gelu, unary<g_gelu>);
KILN_REGISTER_VJP(silu, unary<g_silu>);
KILN_REGISTER_VJP(erf, unary<g_erf>);
KILN_REGISTER_VJP(erfinv, unary<g_erfinv>);
KILN_REGISTER_VJP(lgamma, unary<g_lgamma>);
KILN_REGISTER_VJP(digamma, unary<g_digamma>);
KILN_REGISTER_VJP(polygamma, unary<g_polygamma>);
KILN_REGISTER_VJP(nan_to_num, unary<g_nan_to_num>);
KILN_REGISTER_VJP(erfc, unary<g_erfc>);
KILN_REGISTER_VJP(asin, unary<g_asin>);
KILN_REGISTER_VJP(acos, unary<g_acos>);
KILN_REGISTER_VJP(atan, unary<g_atan>);
KILN_REGISTER_VJP(sinh, unary<g_sinh>);
KILN_REGISTER_VJP(cosh, unary<g_cosh>);
KILN_REGISTER_VJP(asinh, unary<g_asinh>);
KILN_REGISTER_VJP(acosh, unary<g_acosh>);
KILN_REGISTER_VJP(atanh, unary<g_atanh>);
KILN_REGISTER_VJP(logit, unary<g_logit>);
KILN_REGISTER_VJP(clamp, unary<g_clamp>);
KILN_REGISTER_VJP(to, unary<g_to>);
KILN_REGISTER_VJP(sign, zero_grads);
KILN_REGISTER_VJP(floor, zero_grads);
KILN_REGISTER_VJP(ceil, zero_grads);
KILN_REGISTER_VJP(round, zero_grads);
KILN_REGISTER_VJP(trunc, zero_grads);

// ---- binary and ternary ----
std::vector<Tensor> vjp_add(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  std::vector<Tensor> r(2);
  if (v.needs(0)) r[0] = reduce_grad(v, 0, g);
  if (v.needs(1)) {
    const Scalar& alpha = v.attrs.s(0);
    r[1] = reduce_grad(v, 1, alpha == Scalar(1) ? g : g * alpha);
  }
  return r;
}
KILN_REGISTER_VJP(add, vjp_add);

std::vector<Tensor> vjp_sub(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  std::vector<Tensor> r(2);
  if (v.needs(0)) r[0] = reduce_grad(v, 0, g);
  if (v.needs(1)) {
    const Scalar& alpha = v.attrs.s(0);
    r[1] = reduce_grad(v, 1, alpha == Scalar(1) ? neg(g) : g * (-alpha.to_double()));
  }
  return r;
}
KILN_REGISTER_VJP(sub, vjp_sub);

std::vector<Tensor> vjp_mul(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  std::vector<Tensor> r(2);
  if (v.needs(0)) r[0] = reduce_grad(v, 0, g * v.inputs[1]);
  if (v.needs(1)) r[1] = reduce_grad(v, 1, g * v.inputs[0]);
  return r;
}
KILN_REGISTER_VJP(mul, vjp_mul);
// Note [Saving what the VJP reads]: each operand only for the other's gradient.
SaveSet save_other_operand(uint64_t needs, const Attrs&) {
  return {(has(needs, 1) ? bit(0) : 0) | (has(needs, 0) ? bit(1) : 0), 0};
}
KILN_REGISTER_SAVE_RULE(mul, save_other_operand);

std::vector<Tensor> vjp_div(const VjpCall& v) {
  if (!v.attrs.none(0)) return zero_grads(v);  // trunc/floor: piecewise constant
  const Tensor& g = v.grads[0];
  const Tensor &a = v.inputs[0], &b = v.inputs[1];
  std::vector<Tensor> r(2);
  if (v.needs(0)) r[0] = reduce_grad(v, 0, g / b);
  if (v.needs(1)) r[1] = reduce_grad(v, 1, -(g * a) / (b * b));
  return r;
}
KILN_REGISTER_VJP(div, vjp_div);
// The divisor for either gradient, the dividend for the divisor's; nothing for a rounding mode.
SaveSet save_div(uint64_t needs, const Attrs& attrs) {
  if (!attrs.none(0)) return {0, 0};
  return {(has(needs, 1) ? bit(0) : 0) | (needs & (bit(0) | bit(1)) ? bit(1) : 0), 0};
}
KILN_REGISTER_SAVE_RULE(div, save_div);

// fmod/remainder: d/da = 1, d/db = -(a / b rounded: trunc for fmod, floor for remainder).
std::vector<Tensor> vjp_mod(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  std::vector<Tensor> r(2);
  if (v.needs(0)) r[0] = reduce_grad(v, 0, g);
  if (v.needs(1)) {
    const char* mode = v.op == OpId::fmod ? "trunc" : "floor";
    r[1] = reduce_grad(v, 1, -(g * div(v.inputs[0], v.inputs[1], mode)));
  }
  return r;
}
KILN_REGISTER_VJP(fmod, vjp_mod);
KILN_REGISTER_VJP(remainder, vjp_mod);

// As PyTorch: zero where the exponent is 0 (base side) or where base == 0 and exponent >= 0 (exponent side).
std::vector<Tensor> vjp_pow(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  const Tensor& a = v.inputs[0];
  // A bool exponent (pow(x, true)) takes part in the arithmetic as a number.
  const Tensor b = v.inputs[1].dtype() == DType::Bool ? v.inputs[1].to(v.outputs[0].dtype()) : v.inputs[1];
  std::vector<Tensor> r(2);
  if (v.needs(0)) r[0] = reduce_grad(v, 0, where(eq(b, 0), Scalar(0), g * (b * pow(a, b - 1))));
  if (v.needs(1)) {
    Tensor mask = logical_and(eq(a, 0), ge(b, 0));
    r[1] = reduce_grad(v, 1, where(mask, Scalar(0), g * (v.outputs[0] * log(a))));
  }
  return r;
}
KILN_REGISTER_VJP(pow, vjp_pow);

// Ties split the gradient evenly, as PyTorch.
std::vector<Tensor> vjp_max_min(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  const Tensor &a = v.inputs[0], &b = v.inputs[1];
  Tensor half = where(eq(a, b), g * 0.5, g);
  bool is_max = v.op == OpId::maximum;
  std::vector<Tensor> r(2);
  if (v.needs(0)) r[0] = reduce_grad(v, 0, where(is_max ? lt(a, b) : gt(a, b), Scalar(0), half));
  if (v.needs(1)) r[1] = reduce_grad(v, 1, where(is_max ? gt(a, b) : lt(a, b), Scalar(0), half));
  return r;
}
KILN_REGISTER_VJP(maximum, vjp_max_min);
KILN_REGISTER_VJP(minimum, vjp_max_min);

std::vector<Tensor> vjp_atan2(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  const Tensor &a = v.inputs[0], &b = v.inputs[1];
  Tensor gd = g / (square(a) + square(b));
  std::vector<Tensor> r(2);
  if (v.needs(0)) r[0] = reduce_grad(v, 0, gd * b);
  if (v.needs(1)) r[1] = reduce_grad(v, 1, -(gd * a));
  return r;
}
KILN_REGISTER_VJP(atan2, vjp_atan2);

std::vector<Tensor> vjp_hypot(const VjpCall& v) {
  Tensor gd = v.grads[0] / v.outputs[0];
  std::vector<Tensor> r(2);
  if (v.needs(0)) r[0] = reduce_grad(v, 0, gd * v.inputs[0]);
  if (v.needs(1)) r[1] = reduce_grad(v, 1, gd * v.inputs[1]);
  return r;
}
KILN_REGISTER_VJP(hypot, vjp_hypot);

// torch's xlogy backward: a: xlogy(g, b), 0 where a == 0 and b <= 0; b: g * a / b.
std::vector<Tensor> vjp_xlogy(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  const Tensor &a = v.inputs[0], &b = v.inputs[1];
  std::vector<Tensor> r(2);
  if (v.needs(0)) r[0] = reduce_grad(v, 0, where(logical_and(eq(a, 0), le(b, 0)), Scalar(0), xlogy(g, b)));
  if (v.needs(1)) r[1] = reduce_grad(v, 1, g * a / b);
  return r;
}
KILN_REGISTER_VJP(xlogy, vjp_xlogy);

// torch's fmax/fmin backward: all of g to a where a wins (ties included) or b is NaN, else to b.
std::vector<Tensor> vjp_fmax_fmin(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  const Tensor &a = v.inputs[0], &b = v.inputs[1];
  Tensor to_a = logical_or(v.op == OpId::fmax ? ge(a, b) : le(a, b), isnan(b));
  std::vector<Tensor> r(2);
  if (v.needs(0)) r[0] = reduce_grad(v, 0, where(to_a, g, Scalar(0)));
  if (v.needs(1)) r[1] = reduce_grad(v, 1, where(to_a, Scalar(0), g));
  return r;
}
KILN_REGISTER_VJP(fmax, vjp_fmax_fmin);
KILN_REGISTER_VJP(fmin, vjp_fmax_fmin);

// torch's copysign backward: a: g * result / a (0 where a == 0); b: none.
std::vector<Tensor> vjp_copysign(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  const Tensor& a = v.inputs[0];
  std::vector<Tensor> r(2);
  if (v.needs(0)) r[0] = reduce_grad(v, 0, where(eq(a, 0), Scalar(0), g * (v.outputs[0] / a)));
  if (v.needs(1)) r[1] = reduce_grad(v, 1, g * 0.0);
  return r;
}
KILN_REGISTER_VJP(copysign, vjp_copysign);

// torch's logaddexp backward: g / (1 + exp(b - a)) to a, g / (1 + exp(a - b)) to b.
std::vector<Tensor> vjp_logaddexp(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  const Tensor &a = v.inputs[0], &b = v.inputs[1];
  std::vector<Tensor> r(2);
  if (v.needs(0)) r[0] = reduce_grad(v, 0, g / (exp(b - a) + 1));
  if (v.needs(1)) r[1] = reduce_grad(v, 1, g / (exp(a - b) + 1));
  return r;
}
KILN_REGISTER_VJP(logaddexp, vjp_logaddexp);

std::vector<Tensor> vjp_where(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  const Tensor& cond = v.inputs[0];
  std::vector<Tensor> r(3);
  if (v.needs(1)) r[1] = reduce_grad(v, 1, where(cond, g, Scalar(0)));
  if (v.needs(2)) r[2] = reduce_grad(v, 2, where(cond, Scalar(0), g));
  return r;
}
KILN_REGISTER_VJP(where, vjp_where);
SaveSet save_condition(uint64_t, const Attrs&) { return {bit(0), 0}; }
KILN_REGISTER_SAVE_RULE(where, save_condition);

std::vector<Tensor> vjp_lerp(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  const Tensor &s = v.inputs[0], &e = v.inputs[1], &w = v.inputs[2];
  std::vector<Tensor> r(3);
  if (v.needs(0)) r[0] = reduce_grad(v, 0, g * rsub(w, 1));
  if (v.needs(1)) r[1] = reduce_grad(v, 1, g * w);
  if (v.needs(2)) r[2] = reduce_grad(v, 2, g * (e - s));
  return r;
}
KILN_REGISTER_VJP(lerp, vjp_lerp);

std::vector<Tensor> vjp_addcmul(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  const Scalar& value = v.attrs.s(0);
  Tensor gv = value == Scalar(1) ? g : g * value;
  std::vector<Tensor> r(3);
  if (v.needs(0)) r[0] = reduce_grad(v, 0, g);
  if (v.needs(1)) r[1] = reduce_grad(v, 1, gv * v.inputs[2]);
  if (v.needs(2)) r[2] = reduce_grad(v, 2, gv * v.inputs[1]);
  return r;
}
KILN_REGISTER_VJP(addcmul, vjp_addcmul);
SaveSet save_addcmul(uint64_t needs, const Attrs&) {
  return {(has(needs, 2) ? bit(1) : 0) | (has(needs, 1) ? bit(2) : 0), 0};
}
KILN_REGISTER_SAVE_RULE(addcmul, save_addcmul);

std::vector<Tensor> vjp_addcdiv(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  const Scalar& value = v.attrs.s(0);
  Tensor gv = value == Scalar(1) ? g : g * value;
  const Tensor &t1 = v.inputs[1], &t2 = v.inputs[2];
  std::vector<Tensor> r(3);
  if (v.needs(0)) r[0] = reduce_grad(v, 0, g);
  if (v.needs(1)) r[1] = reduce_grad(v, 1, gv / t2);
  if (v.needs(2)) r[2] = reduce_grad(v, 2, -(gv * t1) / (t2 * t2));
  return r;
}
KILN_REGISTER_VJP(addcdiv, vjp_addcdiv);
SaveSet save_addcdiv(uint64_t needs, const Attrs&) {
  return {(has(needs, 2) ? bit(1) : 0) | (needs & (bit(1) | bit(2)) ? bit(2) : 0), 0};
}
KILN_REGISTER_SAVE_RULE(addcdiv, save_addcdiv);

}  // namespace
}  // namespace kiln
