// Binary and ternary pointwise ops: public functions, meta functions and
// decompositions (unary ops are in pointwise_unary.cpp). VJP rules are in
// grad_pointwise.cpp, CPU kernels in backend/cpu/pointwise.cpp.
#include "kiln/ops/pointwise.h"

#include "dispatch/dispatch.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/reduction.h"
#include "ops/meta_util.h"

namespace kiln {

namespace {
// ---- meta ----
void check_defined(const OpCall& c) {
  for (size_t i = 0; i < c.inputs.size(); ++i)
    KILN_CHECK(c.in(i).defined(), c.name(), ": input ", i, " is undefined");
}
std::string dtypes_str(const OpCall& c) {
  std::string s;
  for (const Tensor& t : c.inputs) s += (s.empty() ? "" : ", ") + std::string(dtype_name(t.dtype()));
  return s;
}

std::vector<TensorMeta> meta_same(const OpCall& c) {  // output like the promoted inputs
  check_defined(c);
  return one_output(broadcast_all(c.inputs, c.name()), result_type(c.inputs), output_device(c.inputs));
}
std::vector<TensorMeta> meta_floating(const OpCall& c) {  // int → default float (atan2, div, ...)
  check_defined(c);
  return one_output(broadcast_all(c.inputs, c.name()), to_floating(result_type(c.inputs)), output_device(c.inputs));
}
std::vector<TensorMeta> meta_bool(const OpCall& c) {  // comparisons and logical ops
  check_defined(c);
  return one_output(broadcast_all(c.inputs, c.name()), DType::Bool, output_device(c.inputs));
}
std::vector<TensorMeta> meta_no_bool(const OpCall& c) {
  auto m = meta_same(c);
  KILN_CHECK(m[0].dtype != DType::Bool, c.name(), ": not supported for bool tensors (input dtypes ", dtypes_str(c),
             ")");
  return m;
}
std::vector<TensorMeta> meta_bitwise(const OpCall& c) {
  auto m = meta_same(c);
  KILN_CHECK(!is_floating_point(m[0].dtype), c.name(), ": expected integral or bool tensors, got dtypes ",
             dtypes_str(c));
  return m;
}
std::vector<TensorMeta> meta_shift(const OpCall& c) {
  auto m = meta_same(c);
  KILN_CHECK(!is_floating_point(m[0].dtype) && m[0].dtype != DType::Bool, c.name(),
             ": expected integral tensors, got dtypes ", dtypes_str(c));
  return m;
}

std::vector<TensorMeta> meta_add(const OpCall& c) {
  check_defined(c);
  DType t = result_type(c.inputs);
  const Scalar& alpha = c.attrs.s(0);
  KILN_CHECK(!(alpha.is_floating_point() && !is_floating_point(t)), c.name(),
             ": for integral input tensors, argument alpha must not be a floating point number");
  KILN_CHECK(!(alpha.is_integral() && t == DType::Bool) || alpha.to_long() == 0 || alpha.to_long() == 1, c.name(),
             ": boolean alpha only supports values 0 and 1");
  return one_output(broadcast_all(c.inputs, c.name()), t, output_device(c.inputs));
}
std::vector<TensorMeta> meta_sub(const OpCall& c) {
  check_defined(c);
  KILN_CHECK(c.in(0).dtype() != DType::Bool && c.in(1).dtype() != DType::Bool,
             "sub: subtraction, the `-` operator, with a bool tensor is not supported (input dtypes ", dtypes_str(c),
             "); use the `~` or logical_not() operator to invert a mask, or logical_xor()");
  return meta_add(c);
}
std::vector<TensorMeta> meta_div(const OpCall& c) {
  auto mode = c.attrs.opt_str(0);
  if (!mode) return meta_floating(c);
  KILN_CHECK(*mode == "trunc" || *mode == "floor", "div: expected rounding_mode to be one of None, 'trunc', or "
             "'floor' but found '", *mode, "'");
  return meta_no_bool(c);
}
std::vector<TensorMeta> meta_where(const OpCall& c) {
  check_defined(c);
  KILN_CHECK(c.in(0).dtype() == DType::Bool, "where: expected condition to be a bool tensor, but got dtype ",
             c.in(0).dtype());
  return one_output(broadcast_all(c.inputs, c.name()), result_type(c.inputs.subspan(1)), output_device(c.inputs));
}
std::vector<TensorMeta> meta_lerp(const OpCall& c) {
  check_defined(c);
  KILN_CHECK(is_floating_point(c.in(0).dtype()), "lerp: expected a floating point start tensor, got dtype ",
             c.in(0).dtype());
  for (size_t i = 1; i < 3; ++i)
    KILN_CHECK(c.in(i).unsafe_impl()->is_wrapped_number || c.in(i).dtype() == c.in(0).dtype(), "lerp: expected dtype ",
               c.in(0).dtype(), " for `", i == 1 ? "end" : "weight", "` but got dtype ", c.in(i).dtype());
  return one_output(broadcast_all(c.inputs, c.name()), c.in(0).dtype(), output_device(c.inputs));
}
std::vector<TensorMeta> meta_addcmul(const OpCall& c) {
  auto m = meta_no_bool(c);
  KILN_CHECK(!(c.attrs.s(0).is_floating_point() && !is_floating_point(m[0].dtype)), c.name(),
             ": for integral input tensors, argument value must not be a floating point number");
  return m;
}
std::vector<TensorMeta> meta_addcdiv(const OpCall& c) {
  check_defined(c);
  KILN_CHECK(is_floating_point(c.in(1).dtype()) || is_floating_point(c.in(2).dtype()),
             "addcdiv: integer division with addcdiv is not supported (tensor1 and tensor2 dtypes ",
             c.in(1).dtype(), ", ", c.in(2).dtype(), "); use div() instead");
  return meta_addcmul(c);
}

// Ops PyTorch defines only for floating inputs (logaddexp): the promoted dtype must be floating.
std::vector<TensorMeta> meta_float_only(const OpCall& c) {
  auto m = meta_same(c);
  KILN_CHECK(is_floating_point(m[0].dtype), c.name(), ": expected floating point inputs, got dtypes ", dtypes_str(c));
  return m;
}
std::vector<TensorMeta> meta_isclose(const OpCall& c) {
  check_defined(c);
  KILN_CHECK(c.in(0).dtype() == c.in(1).dtype(), "isclose: ", c.in(0).dtype(), " did not match ", c.in(1).dtype());
  KILN_CHECK(c.attrs.f(0) >= 0, "isclose: rtol must be greater than or equal to zero, but got ", c.attrs.f(0));
  KILN_CHECK(c.attrs.f(1) >= 0, "isclose: atol must be greater than or equal to zero, but got ", c.attrs.f(1));
  return meta_bool(c);
}

KILN_REGISTER_META(add, meta_add);
KILN_REGISTER_META(sub, meta_sub);
KILN_REGISTER_META(mul, meta_same);
KILN_REGISTER_META(div, meta_div);
KILN_REGISTER_META(fmod, meta_no_bool);
KILN_REGISTER_META(remainder, meta_no_bool);
KILN_REGISTER_META(pow, meta_same);
KILN_REGISTER_META(maximum, meta_same);
KILN_REGISTER_META(minimum, meta_same);
KILN_REGISTER_META(atan2, meta_floating);
KILN_REGISTER_META(hypot, meta_floating);
KILN_REGISTER_META(xlogy, meta_floating);
KILN_REGISTER_META(copysign, meta_floating);
KILN_REGISTER_META(fmax, meta_same);
KILN_REGISTER_META(fmin, meta_same);
KILN_REGISTER_META(logaddexp, meta_float_only);
KILN_REGISTER_META(isclose, meta_isclose);
KILN_REGISTER_META(eq, meta_bool);
KILN_REGISTER_META(ne, meta_bool);
KILN_REGISTER_META(lt, meta_bool);
KILN_REGISTER_META(le, meta_bool);
KILN_REGISTER_META(gt, meta_bool);
KILN_REGISTER_META(ge, meta_bool);
KILN_REGISTER_META(logical_and, meta_bool);
KILN_REGISTER_META(logical_or, meta_bool);
KILN_REGISTER_META(logical_xor, meta_bool);
KILN_REGISTER_META(bitwise_and, meta_bitwise);
KILN_REGISTER_META(bitwise_or, meta_bitwise);
KILN_REGISTER_META(bitwise_xor, meta_bitwise);
KILN_REGISTER_META(bitwise_left_shift, meta_shift);
KILN_REGISTER_META(bitwise_right_shift, meta_shift);
KILN_REGISTER_META(where, meta_where);
KILN_REGISTER_META(lerp, meta_lerp);
KILN_REGISTER_META(addcmul, meta_addcmul);
KILN_REGISTER_META(addcdiv, meta_addcdiv);

// ---- decompositions (into prims) ----
Scalar negated(const Scalar& a) { return a.is_floating_point() ? Scalar(-a.to_double()) : Scalar(-a.to_long()); }

std::vector<Tensor> decomp_sub(const OpCall& c) {
  meta_sub(c);  // the bool check
  return {call_op1(OpId::add, {c.in(0), c.in(1)}, {negated(c.attrs.s(0))})};
}
// self + value * t1 * t2 (addcdiv: self + value * t1 / t2) in the promoted
// dtype's opmath type, rounded once (as math::Addcmul in the kernels).
std::vector<Tensor> decomp_addc(const OpCall& c) {
  DType out = meta_same(c)[0].dtype, t = opmath(out);
  auto cast = [&](const Tensor& x) { return x.dtype() == t ? x : call_op1(OpId::to, {x}, {t}); };
  Tensor prod = c.op == OpId::addcdiv ? call_op1(OpId::div, {cast(c.in(1)), cast(c.in(2))}, {std::monostate{}})
                                      : call_op1(OpId::mul, {cast(c.in(1)), cast(c.in(2))});
  Tensor r = call_op1(OpId::add, {cast(c.in(0)), prod}, {c.attrs.s(0)});
  return {r.dtype() == out ? r : call_op1(OpId::to, {r}, {out})};
}
// logaddexp(a, b) = max(a, b) + log1p(exp(-|a - b|)), and a itself where a == b is infinite
// (torch's formula; NaN propagates through the maximum).
std::vector<Tensor> decomp_logaddexp(const OpCall& c) {
  DType out = meta_float_only(c)[0].dtype, t = opmath(out);
  auto cast = [&](const Tensor& x) { return x.dtype() == t ? x : call_op1(OpId::to, {x}, {t}); };
  Tensor a = cast(c.in(0)), b = cast(c.in(1));
  Tensor m = call_op1(OpId::maximum, {a, b});
  Tensor r = m + log1p(exp(-abs(a - b)));
  r = where(logical_and(isinf(a), eq(a, b)), a, r);
  return {r.dtype() == out ? r : call_op1(OpId::to, {r}, {out})};
}
// torch's isclose, op for op (so the tolerance is computed in the same dtypes as torch does).
std::vector<Tensor> decomp_isclose(const OpCall& c) {
  const Tensor &a = c.in(0), &b = c.in(1);
  double rtol = c.attrs.f(0), atol = c.attrs.f(1);
  Tensor close = eq(a, b);
  if (c.attrs.b(2) && is_floating_point(a.dtype())) close = logical_or(close, logical_and(isnan(a), isnan(b)));
  if (rtol == 0 && atol == 0) return {close};
  Tensor ca = a.dtype() == DType::Bool ? a.to(default_dtype()) : a;
  Tensor cb = b.dtype() == DType::Bool ? b.to(default_dtype()) : b;
  Tensor allowed = abs(cb * rtol) + atol;
  Tensor actual = abs(ca - cb);
  return {logical_or(close, logical_and(isfinite(actual), le(actual, allowed)))};
}
KILN_REGISTER_DECOMP(logaddexp, decomp_logaddexp);
KILN_REGISTER_DECOMP(isclose, decomp_isclose);
KILN_REGISTER_DECOMP(sub, decomp_sub);
KILN_REGISTER_DECOMP(addcmul, decomp_addc);
KILN_REGISTER_DECOMP(addcdiv, decomp_addc);

Tensor wrap(const Scalar& s) { return wrap_scalar(s); }
Tensor bin(OpId op, const Tensor& a, const Tensor& b) { return call_op1(op, {a, b}); }
Attrs mode_attr(const std::optional<std::string>& m) { return {opt_attr(m)}; }
}  // namespace

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) { return call_op1(OpId::add, {a, b}, {alpha}); }
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha) { return call_op1(OpId::add, {a, wrap(b)}, {alpha}); }
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) { return call_op1(OpId::sub, {a, b}, {alpha}); }
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha) { return call_op1(OpId::sub, {a, wrap(b)}, {alpha}); }
Tensor rsub(const Tensor& a, const Scalar& b, const Scalar& alpha) { return call_op1(OpId::sub, {wrap(b), a}, {alpha}); }
Tensor mul(const Tensor& a, const Tensor& b) { return bin(OpId::mul, a, b); }
Tensor mul(const Tensor& a, const Scalar& b) { return bin(OpId::mul, a, wrap(b)); }
Tensor div(const Tensor& a, const Tensor& b, std::optional<std::string> m) {
  return call_op1(OpId::div, {a, b}, mode_attr(m));
}
Tensor div(const Tensor& a, const Scalar& b, std::optional<std::string> m) {
  return call_op1(OpId::div, {a, wrap(b)}, mode_attr(m));
}
Tensor div(const Scalar& a, const Tensor& b, std::optional<std::string> m) {
  return call_op1(OpId::div, {wrap(a), b}, mode_attr(m));
}
Tensor fmod(const Tensor& a, const Tensor& b) { return bin(OpId::fmod, a, b); }
// fmod/remainder by a Scalar are binary ops with a wrapped operand: an integer one that does not
// fit the tensor's dtype wraps, as torch (fmod(uint8, 300) is fmod by 44; Note [Scalars out of
// range]). pow converts its exponent checked, as torch: pow(int32, 2^40) raises.
namespace {
void check_exponent_fits(const Tensor& a, const Scalar& b, const char* op) {
  if (!a.defined()) return;
  if (is_floating_point(a.dtype()) || !b.is_floating_point()) check_scalar_fits(b, a.dtype(), op);
}
}  // namespace
Tensor fmod(const Tensor& a, const Scalar& b) { return bin(OpId::fmod, a, wrap(b)); }
Tensor remainder(const Tensor& a, const Tensor& b) { return bin(OpId::remainder, a, b); }
Tensor remainder(const Tensor& a, const Scalar& b) { return bin(OpId::remainder, a, wrap(b)); }
Tensor pow(const Tensor& a, const Tensor& b) { return bin(OpId::pow, a, b); }
Tensor pow(const Tensor& a, const Scalar& b) {
  KILN_CHECK(!(b.is_integral() && !b.is_bool() && b.to_long() < 0 && !is_floating_point(a.dtype())),
             "pow: integers to negative integer powers are not allowed (base dtype ", a.dtype(), ", exponent ",
             b.to_long(), ")");
  check_exponent_fits(a, b, "pow");
  return bin(OpId::pow, a, wrap(b));
}
Tensor pow(const Scalar& a, const Tensor& b) { return bin(OpId::pow, wrap(a), b); }
Tensor maximum(const Tensor& a, const Tensor& b) { return bin(OpId::maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return bin(OpId::minimum, a, b); }
Tensor atan2(const Tensor& a, const Tensor& b) { return bin(OpId::atan2, a, b); }
Tensor hypot(const Tensor& a, const Tensor& b) { return bin(OpId::hypot, a, b); }
Tensor xlogy(const Tensor& a, const Tensor& b) { return bin(OpId::xlogy, a, b); }
Tensor xlogy(const Tensor& a, const Scalar& b) { return bin(OpId::xlogy, a, wrap(b)); }
Tensor xlogy(const Scalar& a, const Tensor& b) { return bin(OpId::xlogy, wrap(a), b); }
Tensor fmax(const Tensor& a, const Tensor& b) { return bin(OpId::fmax, a, b); }
Tensor fmin(const Tensor& a, const Tensor& b) { return bin(OpId::fmin, a, b); }
Tensor copysign(const Tensor& a, const Tensor& b) { return bin(OpId::copysign, a, b); }
Tensor copysign(const Tensor& a, const Scalar& b) { return bin(OpId::copysign, a, wrap(b)); }
Tensor logaddexp(const Tensor& a, const Tensor& b) { return bin(OpId::logaddexp, a, b); }
// torch.floor_divide rounds toward negative infinity (since torch 1.13), as div(rounding_mode='floor').
Tensor floor_divide(const Tensor& a, const Tensor& b) { return div(a, b, "floor"); }
Tensor floor_divide(const Tensor& a, const Scalar& b) { return div(a, b, "floor"); }
Tensor isclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  return call_op1(OpId::isclose, {a, b}, {rtol, atol, equal_nan});
}
// A value read (item): inside a compiled function it ends the graph, as torch.allclose does.
bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  return all(isclose(a, b, rtol, atol, equal_nan)).item<bool>();
}
Tensor eq(const Tensor& a, const Tensor& b) { return bin(OpId::eq, a, b); }
Tensor eq(const Tensor& a, const Scalar& b) { return bin(OpId::eq, a, wrap(b)); }
Tensor ne(const Tensor& a, const Tensor& b) { return bin(OpId::ne, a, b); }
Tensor ne(const Tensor& a, const Scalar& b) { return bin(OpId::ne, a, wrap(b)); }
Tensor lt(const Tensor& a, const Tensor& b) { return bin(OpId::lt, a, b); }
Tensor lt(const Tensor& a, const Scalar& b) { return bin(OpId::lt, a, wrap(b)); }
Tensor le(const Tensor& a, const Tensor& b) { return bin(OpId::le, a, b); }
Tensor le(const Tensor& a, const Scalar& b) { return bin(OpId::le, a, wrap(b)); }
Tensor gt(const Tensor& a, const Tensor& b) { return bin(OpId::gt, a, b); }
Tensor gt(const Tensor& a, const Scalar& b) { return bin(OpId::gt, a, wrap(b)); }
Tensor ge(const Tensor& a, const Tensor& b) { return bin(OpId::ge, a, b); }
Tensor ge(const Tensor& a, const Scalar& b) { return bin(OpId::ge, a, wrap(b)); }
Tensor logical_and(const Tensor& a, const Tensor& b) { return bin(OpId::logical_and, a, b); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return bin(OpId::logical_or, a, b); }
Tensor logical_xor(const Tensor& a, const Tensor& b) { return bin(OpId::logical_xor, a, b); }
Tensor bitwise_and(const Tensor& a, const Tensor& b) { return bin(OpId::bitwise_and, a, b); }
Tensor bitwise_or(const Tensor& a, const Tensor& b) { return bin(OpId::bitwise_or, a, b); }
Tensor bitwise_xor(const Tensor& a, const Tensor& b) { return bin(OpId::bitwise_xor, a, b); }
Tensor bitwise_left_shift(const Tensor& a, const Tensor& b) { return bin(OpId::bitwise_left_shift, a, b); }
Tensor bitwise_right_shift(const Tensor& a, const Tensor& b) { return bin(OpId::bitwise_right_shift, a, b); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) { return call_op1(OpId::where, {cond, a, b}); }
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b) { return call_op1(OpId::where, {cond, a, wrap(b)}); }
Tensor where(const Tensor& cond, const Scalar& a, const Tensor& b) { return call_op1(OpId::where, {cond, wrap(a), b}); }
Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight) {
  return call_op1(OpId::lerp, {start, end, weight});
}
Tensor lerp(const Tensor& start, const Tensor& end, const Scalar& weight) {
  return call_op1(OpId::lerp, {start, end, wrap(weight)});
}
Tensor addcmul(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  return call_op1(OpId::addcmul, {self, t1, t2}, {value});
}
Tensor addcdiv(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  return call_op1(OpId::addcdiv, {self, t1, t2}, {value});
}

// ---- operators ----
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator+(const Tensor& a, const Scalar& b) { return add(a, b); }
Tensor operator+(const Scalar& a, const Tensor& b) { return add(b, a); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator-(const Tensor& a, const Scalar& b) { return sub(a, b); }
Tensor operator-(const Scalar& a, const Tensor& b) { return rsub(b, a); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator*(const Tensor& a, const Scalar& b) { return mul(a, b); }
Tensor operator*(const Scalar& a, const Tensor& b) { return mul(b, a); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator/(const Tensor& a, const Scalar& b) { return div(a, b); }
Tensor operator/(const Scalar& a, const Tensor& b) { return div(a, b); }
Tensor& operator+=(Tensor& a, const Tensor& b) { return a.add_(b); }
Tensor& operator+=(Tensor& a, const Scalar& b) { return a.add_(b); }
Tensor& operator-=(Tensor& a, const Tensor& b) { return a.sub_(b); }
Tensor& operator-=(Tensor& a, const Scalar& b) { return a.sub_(b); }
Tensor& operator*=(Tensor& a, const Tensor& b) { return a.mul_(b); }
Tensor& operator*=(Tensor& a, const Scalar& b) { return a.mul_(b); }
Tensor& operator/=(Tensor& a, const Tensor& b) { return a.div_(b); }
Tensor& operator/=(Tensor& a, const Scalar& b) { return a.div_(b); }
Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator==(const Tensor& a, const Scalar& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator!=(const Tensor& a, const Scalar& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<(const Tensor& a, const Scalar& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator<=(const Tensor& a, const Scalar& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>(const Tensor& a, const Scalar& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator>=(const Tensor& a, const Scalar& b) { return ge(a, b); }
Tensor operator&(const Tensor& a, const Tensor& b) { return bitwise_and(a, b); }
Tensor operator|(const Tensor& a, const Tensor& b) { return bitwise_or(a, b); }
Tensor operator^(const Tensor& a, const Tensor& b) { return bitwise_xor(a, b); }

// ---- Tensor methods ----
Tensor Tensor::add(const Tensor& o, const Scalar& alpha) const { return kiln::add(*this, o, alpha); }
Tensor Tensor::add(const Scalar& o, const Scalar& alpha) const { return kiln::add(*this, o, alpha); }
Tensor Tensor::sub(const Tensor& o, const Scalar& alpha) const { return kiln::sub(*this, o, alpha); }
Tensor Tensor::sub(const Scalar& o, const Scalar& alpha) const { return kiln::sub(*this, o, alpha); }
Tensor Tensor::mul(const Tensor& o) const { return kiln::mul(*this, o); }
Tensor Tensor::mul(const Scalar& o) const { return kiln::mul(*this, o); }
Tensor Tensor::div(const Tensor& o, std::optional<std::string> m) const { return kiln::div(*this, o, std::move(m)); }
Tensor Tensor::div(const Scalar& o, std::optional<std::string> m) const { return kiln::div(*this, o, std::move(m)); }
Tensor Tensor::pow(const Tensor& e) const { return kiln::pow(*this, e); }
Tensor Tensor::pow(const Scalar& e) const { return kiln::pow(*this, e); }
Tensor Tensor::eq(const Tensor& o) const { return kiln::eq(*this, o); }
Tensor Tensor::eq(const Scalar& o) const { return kiln::eq(*this, o); }
Tensor Tensor::ne(const Tensor& o) const { return kiln::ne(*this, o); }
Tensor Tensor::ne(const Scalar& o) const { return kiln::ne(*this, o); }
Tensor Tensor::lt(const Tensor& o) const { return kiln::lt(*this, o); }
Tensor Tensor::lt(const Scalar& o) const { return kiln::lt(*this, o); }
Tensor Tensor::le(const Tensor& o) const { return kiln::le(*this, o); }
Tensor Tensor::le(const Scalar& o) const { return kiln::le(*this, o); }
Tensor Tensor::gt(const Tensor& o) const { return kiln::gt(*this, o); }
Tensor Tensor::gt(const Scalar& o) const { return kiln::gt(*this, o); }
Tensor Tensor::ge(const Tensor& o) const { return kiln::ge(*this, o); }
Tensor Tensor::ge(const Scalar& o) const { return kiln::ge(*this, o); }

Tensor& Tensor::add_(const Tensor& o, const Scalar& alpha) { return call_op_inplace(*this, OpId::add, {*this, o}, {alpha}); }
Tensor& Tensor::add_(const Scalar& o, const Scalar& alpha) { return call_op_inplace(*this, OpId::add, {*this, wrap(o)}, {alpha}); }
Tensor& Tensor::sub_(const Tensor& o, const Scalar& alpha) { return call_op_inplace(*this, OpId::sub, {*this, o}, {alpha}); }
Tensor& Tensor::sub_(const Scalar& o, const Scalar& alpha) { return call_op_inplace(*this, OpId::sub, {*this, wrap(o)}, {alpha}); }
Tensor& Tensor::mul_(const Tensor& o) { return call_op_inplace(*this, OpId::mul, {*this, o}); }
Tensor& Tensor::mul_(const Scalar& o) { return call_op_inplace(*this, OpId::mul, {*this, wrap(o)}); }
Tensor& Tensor::div_(const Tensor& o) { return call_op_inplace(*this, OpId::div, {*this, o}, {std::monostate{}}); }
Tensor& Tensor::div_(const Scalar& o) { return call_op_inplace(*this, OpId::div, {*this, wrap(o)}, {std::monostate{}}); }
Tensor& Tensor::lerp_(const Tensor& end, const Scalar& weight) {
  return call_op_inplace(*this, OpId::lerp, {*this, end, wrap(weight)});
}
Tensor& Tensor::addcmul_(const Tensor& t1, const Tensor& t2, const Scalar& value) {
  return call_op_inplace(*this, OpId::addcmul, {*this, t1, t2}, {value});
}
Tensor& Tensor::addcdiv_(const Tensor& t1, const Tensor& t2, const Scalar& value) {
  return call_op_inplace(*this, OpId::addcdiv, {*this, t1, t2}, {value});
}

}  // namespace kiln

// ---- logaddexp2, nextafter, heaviside, float_power, true_divide, equal ----
namespace kiln {
namespace {
std::vector<TensorMeta> meta_heaviside(const OpCall& c) {
  check_defined(c);
  KILN_CHECK(c.in(0).dtype() == c.in(1).dtype(),
             "heaviside: is not yet implemented for tensors with different dtypes (input ", c.in(0).dtype(),
             ", values ", c.in(1).dtype(), ")");
  return meta_same(c);
}
std::vector<TensorMeta> meta_float_power(const OpCall& c) {
  check_defined(c);
  return one_output(broadcast_all(c.inputs, c.name()), kFloat64, output_device(c.inputs));
}

// torch's logaddexp2: max(a, b) + log1p(2^-|a - b|) / ln 2, and a itself where a == b is infinite.
std::vector<Tensor> decomp_logaddexp2(const OpCall& c) {
  DType out = meta_float_only(c)[0].dtype, t = opmath(out);
  auto cast = [&](const Tensor& x) { return x.dtype() == t ? x : call_op1(OpId::to, {x}, {t}); };
  Tensor a = cast(c.in(0)), b = cast(c.in(1));
  Tensor m = call_op1(OpId::maximum, {a, b});
  Tensor r = m + log1p(exp2(-abs(a - b))) * Scalar(1.0 / 0.69314718055994530942);
  r = where(logical_and(isinf(a), eq(a, b)), a, r);
  return {r.dtype() == out ? r : call_op1(OpId::to, {r}, {out})};
}
// torch's kernel: a == 0 ? values : (a > 0), so a NaN input gives 0.
std::vector<Tensor> decomp_heaviside(const OpCall& c) {
  const DType out = meta_heaviside(c)[0].dtype;
  const Tensor &x = c.in(0), &values = c.in(1);
  return {where(eq(x, Scalar(int64_t(0))), values, gt(x, Scalar(int64_t(0))).to(out))};
}
std::vector<Tensor> decomp_float_power(const OpCall& c) {
  meta_float_power(c);
  auto f64 = [](const Tensor& x) { return x.dtype() == kFloat64 ? x : call_op1(OpId::to, {x}, {kFloat64}); };
  return {call_op1(OpId::pow, {f64(c.in(0)), f64(c.in(1))})};
}
KILN_REGISTER_META(logaddexp2, meta_float_only);
KILN_REGISTER_META(nextafter, meta_float_only);
KILN_REGISTER_META(heaviside, meta_heaviside);
KILN_REGISTER_META(float_power, meta_float_power);
KILN_REGISTER_DECOMP(logaddexp2, decomp_logaddexp2);
KILN_REGISTER_DECOMP(heaviside, decomp_heaviside);
KILN_REGISTER_DECOMP(float_power, decomp_float_power);

void check_float_power_self(const Tensor& self) {
  KILN_CHECK(self.dtype() == kFloat64, "float_power_: the base given to float_power_ has dtype ", self.dtype(),
             " but the operation's result requires dtype float64");
}
}  // namespace

Tensor logaddexp2(const Tensor& a, const Tensor& b) { return bin(OpId::logaddexp2, a, b); }
Tensor true_divide(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor true_divide(const Tensor& a, const Scalar& b) { return div(a, b); }
Tensor nextafter(const Tensor& a, const Tensor& b) { return bin(OpId::nextafter, a, b); }
Tensor heaviside(const Tensor& x, const Tensor& values) { return bin(OpId::heaviside, x, values); }
Tensor float_power(const Tensor& a, const Tensor& b) { return bin(OpId::float_power, a, b); }
Tensor float_power(const Tensor& a, const Scalar& b) { return bin(OpId::float_power, a, wrap(b)); }
Tensor float_power(const Scalar& a, const Tensor& b) { return bin(OpId::float_power, wrap(a), b); }
Tensor& Tensor::float_power_(const Tensor& o) {
  check_float_power_self(*this);
  return call_op_inplace(*this, OpId::float_power, {*this, o});
}
Tensor& Tensor::float_power_(const Scalar& o) {
  check_float_power_self(*this);
  return call_op_inplace(*this, OpId::float_power, {*this, wrap(o)});
}

// A value read (item), as allclose. Compared in the promoted dtype, as torch (equal(int64 [1, 2],
// float32 [1., 2.]) is true); tensors on different devices are refused.
bool equal(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.defined() && b.defined(), "equal: expected defined tensors");
  KILN_CHECK(a.device() == b.device(), "equal: cannot compare two tensors on different devices, got ", a.device(),
             " and ", b.device());
  if (a.sizes().vec() != b.sizes().vec()) return false;
  return all(eq(a, b)).item<bool>();
}
Tensor Tensor::true_divide(const Tensor& o) const { return kiln::div(*this, o); }
Tensor Tensor::true_divide(const Scalar& o) const { return kiln::div(*this, o); }
bool Tensor::equal(const Tensor& o) const { return kiln::equal(*this, o); }
}  // namespace kiln
