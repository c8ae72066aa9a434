// VJP rules of the pointwise activations (activation.cpp), written with kiln ops so they run
// in eager autograd, trace into ahead-of-time backward graphs and differentiate again. Masks
// follow torch's backward kernels, including which side of a comparison a NaN falls on.
#include "dispatch/dispatch.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/pointwise.h"
#include "ops/activation_util.h"
#include "ops/grad_util.h"

namespace kiln {
namespace {

template <UnaryRule R>
constexpr auto unary = &unary_vjp<R>;
const Tensor& x_(const VjpCall& v) { return vjp_input0(v); }

// torch's hardtanh_backward: zero where x <= min_val or x >= max_val, so the bounds themselves
// get none and a NaN (both comparisons false) passes the gradient.
Tensor g_hardtanh(const VjpCall& v, const Tensor& g) {
  const Tensor& x = x_(v);
  auto [lo, hi] = hardtanh_bounds(x.dtype(), v.attrs);
  if (grad_needs_graph(v) || !is_floating_point(x.dtype()))
    return where(logical_or(le(x, lo), ge(x, hi)), Scalar(0), g);
  return call_op1(OpId::hardtanh_backward, {g.dtype() == x.dtype() ? g : g.to(x.dtype()), x}, {lo, hi});
}
KILN_REGISTER_VJP(hardtanh, unary<g_hardtanh>);

// torch's leaky_relu_backward: x > 0 ? g : g * negative_slope (a NaN takes the slope).
Tensor g_leaky_relu(const VjpCall& v, const Tensor& g) { return where(gt(x_(v), 0), g, g * v.attrs.s(0)); }
KILN_REGISTER_VJP(leaky_relu, unary<g_leaky_relu>);

// torch's elu_backward: x <= 0 ? g * input_scale * alpha * scale * exp(x * input_scale) : g * scale.
Tensor g_elu(const VjpCall& v, const Tensor& g) {
  const Tensor& x = x_(v);
  double alpha = v.attrs.s(0).to_double(), scale = v.attrs.s(1).to_double(), in_scale = v.attrs.s(2).to_double();
  Tensor neg = g * (exp(in_scale == 1 ? x : x * in_scale) * (in_scale * alpha * scale));
  return where(le(x, 0), neg, scale == 1 ? g : g * scale);
}
KILN_REGISTER_VJP(elu, unary<g_elu>);

// torch's softplus_backward: x * beta > threshold ? g : g * z / (z + 1), z = exp(x * beta).
Tensor g_softplus(const VjpCall& v, const Tensor& g) {
  Tensor xb = x_(v) * v.attrs.s(0);
  Tensor z = exp(xb);
  return where(gt(xb, v.attrs.s(1)), g, g * z / (z + 1));
}
KILN_REGISTER_VJP(softplus, unary<g_softplus>);

// torch's hardsigmoid_backward: g / 6 where -3 < x < 3, else 0 (a NaN gets none).
Tensor g_hardsigmoid(const VjpCall& v, const Tensor& g) {
  const Tensor& x = x_(v);
  return where(logical_and(gt(x, -3), lt(x, 3)), g * (1.0 / 6), Scalar(0));
}
KILN_REGISTER_VJP(hardsigmoid, unary<g_hardsigmoid>);

// torch's hardswish_backward: 0 below -3, g * (x / 3 + 0.5) up to 3, g above (and for a NaN).
Tensor g_hardswish(const VjpCall& v, const Tensor& g) {
  const Tensor& x = x_(v);
  return where(lt(x, -3), Scalar(0), where(le(x, 3), g * (x / 3 + 0.5), g));
}
KILN_REGISTER_VJP(hardswish, unary<g_hardswish>);

// mish'(x) = t + x * sigmoid(x) * (1 - t^2), t = tanh(softplus(x)).
Tensor g_mish(const VjpCall& v, const Tensor& g) {
  const Tensor& x = x_(v);
  Tensor t = tanh(log1p(exp(x)));
  return g * (t + x * sigmoid(x) * rsub(t * t, 1));
}
KILN_REGISTER_VJP(mish, unary<g_mish>);

// d/dx log(sigmoid(x)) = 1 - sigmoid(x) = sigmoid(-x).
Tensor g_logsigmoid(const VjpCall& v, const Tensor& g) { return g * sigmoid(-x_(v)); }
KILN_REGISTER_VJP(logsigmoid, unary<g_logsigmoid>);

}  // namespace
}  // namespace kiln
