// CPU kernels for unary pointwise ops: each a scalar functor from
// core/scalar_math.h run by the strided loops of loops.h.
#include <limits>

#include "backend/cpu/pointwise.h"
#include "ops/activation_util.h"

namespace kiln::cpu {
namespace {

// Ops that keep the input's dtype (neg, abs, floor on ints, ...).
template <TypeSet S, class F>
void same_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  unary_op<S>(outs[0], c.in(0), c.in(0).dtype(), F{});
}
// Float math: integer inputs were promoted by the meta function; compute in the output's dtype.
template <class F>
void float_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  unary_op<TypeSet::Floating>(outs[0], c.in(0), outs[0].dtype(), F{});
}

KILN_REGISTER_KERNEL(neg, CPU, (same_kernel<TypeSet::NotBool, math::Neg>));
KILN_REGISTER_KERNEL(abs, CPU, (same_kernel<TypeSet::All, math::Abs>));
KILN_REGISTER_KERNEL(sign, CPU, (same_kernel<TypeSet::All, math::Sign>));
KILN_REGISTER_KERNEL(floor, CPU, (same_kernel<TypeSet::All, math::Floor>));
KILN_REGISTER_KERNEL(ceil, CPU, (same_kernel<TypeSet::All, math::Ceil>));
KILN_REGISTER_KERNEL(trunc, CPU, (same_kernel<TypeSet::All, math::Trunc>));
KILN_REGISTER_KERNEL(isnan, CPU, (same_kernel<TypeSet::All, math::IsNan>));
KILN_REGISTER_KERNEL(isinf, CPU, (same_kernel<TypeSet::All, math::IsInf>));
KILN_REGISTER_KERNEL(isfinite, CPU, (same_kernel<TypeSet::All, math::IsFinite>));
KILN_REGISTER_KERNEL(logical_not, CPU, (same_kernel<TypeSet::All, math::LogicalNot>));
KILN_REGISTER_KERNEL(bitwise_not, CPU, (same_kernel<TypeSet::IntOrBool, math::BitwiseNot>));
KILN_REGISTER_KERNEL(relu, CPU, (same_kernel<TypeSet::NotBool, math::Relu>));

KILN_REGISTER_KERNEL(exp, CPU, float_kernel<math::Exp>);
KILN_REGISTER_KERNEL(exp2, CPU, float_kernel<math::Exp2>);
KILN_REGISTER_KERNEL(log, CPU, float_kernel<math::Log>);
KILN_REGISTER_KERNEL(log2, CPU, float_kernel<math::Log2>);
KILN_REGISTER_KERNEL(log10, CPU, float_kernel<math::Log10>);
KILN_REGISTER_KERNEL(log1p, CPU, float_kernel<math::Log1p>);
KILN_REGISTER_KERNEL(expm1, CPU, float_kernel<math::Expm1>);
KILN_REGISTER_KERNEL(sqrt, CPU, float_kernel<math::Sqrt>);
KILN_REGISTER_KERNEL(rsqrt, CPU, float_kernel<math::Rsqrt>);
KILN_REGISTER_KERNEL(reciprocal, CPU, float_kernel<math::Reciprocal>);
KILN_REGISTER_KERNEL(sin, CPU, float_kernel<math::Sin>);
KILN_REGISTER_KERNEL(cos, CPU, float_kernel<math::Cos>);
KILN_REGISTER_KERNEL(tan, CPU, float_kernel<math::Tan>);
KILN_REGISTER_KERNEL(tanh, CPU, float_kernel<math::Tanh>);
KILN_REGISTER_KERNEL(erf, CPU, float_kernel<math::Erf>);
KILN_REGISTER_KERNEL(erfinv, CPU, float_kernel<math::Erfinv>);
KILN_REGISTER_KERNEL(erfc, CPU, float_kernel<math::Erfc>);
KILN_REGISTER_KERNEL(lgamma, CPU, float_kernel<math::Lgamma>);
KILN_REGISTER_KERNEL(digamma, CPU, float_kernel<math::Digamma>);
KILN_REGISTER_KERNEL(asin, CPU, float_kernel<math::Asin>);
KILN_REGISTER_KERNEL(acos, CPU, float_kernel<math::Acos>);
KILN_REGISTER_KERNEL(atan, CPU, float_kernel<math::Atan>);
KILN_REGISTER_KERNEL(sinh, CPU, float_kernel<math::Sinh>);
KILN_REGISTER_KERNEL(cosh, CPU, float_kernel<math::Cosh>);
KILN_REGISTER_KERNEL(asinh, CPU, float_kernel<math::Asinh>);
KILN_REGISTER_KERNEL(acosh, CPU, float_kernel<math::Acosh>);
KILN_REGISTER_KERNEL(atanh, CPU, float_kernel<math::Atanh>);
KILN_REGISTER_KERNEL(sigmoid, CPU, float_kernel<math::Sigmoid>);
KILN_REGISTER_KERNEL(silu, CPU, float_kernel<math::Silu>);

// square(bool) is int64 (torch computes it as pow(x, 2)): compute in the output's dtype.
void square_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  unary_op(outs[0], c.in(0), outs[0].dtype(), math::Square{});
}
KILN_REGISTER_KERNEL(square, CPU, square_kernel);

void gelu_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  if (c.attrs.str(0) == "tanh") unary_op<TypeSet::Floating>(outs[0], c.in(0), outs[0].dtype(), math::GeluTanh{});
  else unary_op<TypeSet::Floating>(outs[0], c.in(0), outs[0].dtype(), math::Gelu{});
}
KILN_REGISTER_KERNEL(gelu, CPU, gelu_kernel);

// _gelu_backward (Note [Fused norm and activation backward]): the functors autograd's formula
// and the CUDA kernel share, in opmath.
void gelu_backward_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  if (c.attrs.str(0) == "tanh")
    binary_op<TypeSet::Floating>(outs[0], c.in(0), c.in(1), outs[0].dtype(), math::GeluTanhBackward{});
  else
    binary_op<TypeSet::Floating>(outs[0], c.in(0), c.in(1), outs[0].dtype(), math::GeluBackward{});
}
KILN_REGISTER_KERNEL(_gelu_backward, CPU, gelu_backward_kernel);

// threshold_backward / hardtanh_backward: the functors the CUDA kernels share.
void threshold_backward_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  binary_op<TypeSet::Floating>(outs[0], c.in(0), c.in(1), outs[0].dtype(),
                               math::ThresholdBackward<double>{c.attrs.s(0).to_double()});
}
KILN_REGISTER_KERNEL(threshold_backward, CPU, threshold_backward_kernel);
void hardtanh_backward_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  binary_op<TypeSet::Floating>(outs[0], c.in(0), c.in(1), outs[0].dtype(),
                               math::HardtanhBackward<double>{c.attrs.s(0).to_double(), c.attrs.s(1).to_double()});
}
KILN_REGISTER_KERNEL(hardtanh_backward, CPU, hardtanh_backward_kernel);

void round_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  int64_t d = c.attrs.i(0);
  if (d == 0) unary_op(outs[0], c.in(0), c.in(0).dtype(), math::Round{});
  else unary_op<TypeSet::Floating>(outs[0], c.in(0), c.in(0).dtype(), math::RoundDecimals{d});
}
KILN_REGISTER_KERNEL(round, CPU, round_kernel);

void polygamma_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  unary_op<TypeSet::Floating>(outs[0], c.in(0), outs[0].dtype(), math::Polygamma{c.attrs.i(0)});
}
KILN_REGISTER_KERNEL(polygamma, CPU, polygamma_kernel);

// The largest finite value of a floating type, nan_to_num's default for +inf.
template <class T>
double max_finite() {
  if constexpr (std::is_same_v<T, Half>) return 65504.0;
  else if constexpr (std::is_same_v<T, BFloat16>) return 3.38953138925153547590e38;
  else return static_cast<double>(std::numeric_limits<T>::max());
}

void nan_to_num_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  DType t = c.in(0).dtype();
  if (!is_floating_point(t)) {
    copy_cpu(outs[0], c.in(0));  // integers and bool have no NaN or inf
    return;
  }
  visit_in_set<TypeSet::Floating>(t, [&]<class T>() {
    double hi = max_finite<T>();
    math::NanToNum f{c.attrs.opt_f(0).value_or(0.0), c.attrs.opt_f(1).value_or(hi), c.attrs.opt_f(2).value_or(-hi)};
    elementwise<T, T>(outs[0], {c.in(0)}, f);
  });
}
KILN_REGISTER_KERNEL(nan_to_num, CPU, nan_to_num_kernel);

// clamp with scalar bounds: math::Clamp with an absent bound at the type's extreme.
void clamp_scalar_bounds(const Tensor& out, const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  DType t = out.dtype();
  visit_in_set<TypeSet::NotBool>(t, [&]<class T>() {
    using C = math::opmath_t<T>;
    C l, h;
    if constexpr (math::is_floating_v<T>) {
      l = lo ? static_cast<C>(lo->to_double()) : -std::numeric_limits<C>::infinity();
      h = hi ? static_cast<C>(hi->to_double()) : std::numeric_limits<C>::infinity();
    } else {
      l = lo ? static_cast<C>(lo->to_long()) : std::numeric_limits<C>::lowest();
      h = hi ? static_cast<C>(hi->to_long()) : std::numeric_limits<C>::max();
    }
    const T tl = T(l), th = T(h);
    elementwise<T, T>(out, {cast_to(x, t)}, [tl, th](T v) { return math::Clamp{}(v, tl, th); });
  });
}
void clamp_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  clamp_scalar_bounds(outs[0], c.in(0), c.attrs.opt_s(0), c.attrs.opt_s(1));
}
KILN_REGISTER_KERNEL(clamp, CPU, clamp_kernel);

// hardtanh's forward is clamp with both bounds (the op differs only in its gradient).
void hardtanh_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  auto [lo, hi] = hardtanh_bounds(c.in(0).dtype(), c.attrs);
  clamp_scalar_bounds(outs[0], c.in(0), lo, hi);
}
KILN_REGISTER_KERNEL(hardtanh, CPU, hardtanh_kernel);

}  // namespace
}  // namespace kiln::cpu
