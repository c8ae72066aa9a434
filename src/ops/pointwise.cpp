// Pointwise ops: public functions, meta functions and decompositions.
// VJP rules are in grad_pointwise.cpp, CPU kernels in backend/cpu/pointwise.cpp.
#include "kiln/ops/pointwise.h"

#include "dispatch/dispatch.h"
#include "kiln/ops/creation.h"
#include "ops/meta_util.h"

namespace kiln {

namespace {
// ---- meta ----
std::vector<TensorMeta> meta_same(const OpCall& c) {  // output like the promoted inputs
  return one_output(broadcast_all(c.inputs, c.name()), result_type(c.inputs), output_device(c.inputs));
}
[[maybe_unused]] std::vector<TensorMeta> meta_floating(const OpCall& c) {  // int → default float (exp, div, ...)
  return one_output(broadcast_all(c.inputs, c.name()), to_floating(result_type(c.inputs)), output_device(c.inputs));
}
std::vector<TensorMeta> meta_to(const OpCall& c) {
  return one_output(c.in(0).sizes().vec(), c.attrs.dtype(0), c.in(0).device());
}

std::vector<TensorMeta> meta_add(const OpCall& c) {
  DType t = result_type(c.inputs);
  const Scalar& alpha = c.attrs.s(0);
  KILN_CHECK(!(alpha.is_floating_point() && !is_floating_point(t)), c.name(),
             ": for integral input tensors, argument alpha must not be a floating point number");
  KILN_CHECK(!(alpha.is_integral() && t == DType::Bool) || alpha.to_long() == 0 || alpha.to_long() == 1, c.name(),
             ": boolean alpha only supports values 0 and 1");
  return one_output(broadcast_all(c.inputs, c.name()), t, output_device(c.inputs));
}
KILN_REGISTER_META(add, meta_add);
KILN_REGISTER_META(sub, meta_add);
KILN_REGISTER_META(mul, meta_same);
KILN_REGISTER_META(to, meta_to);
KILN_REGISTER_META(clone, meta_same);

// ---- decompositions ----
std::vector<Tensor> decomp_sub(const OpCall& c) {
  KILN_CHECK(c.in(0).dtype() != DType::Bool && c.in(1).dtype() != DType::Bool,
             "sub: subtraction with two bool tensors is not supported; use logical_xor() instead");
  const Scalar& a = c.attrs.s(0);
  Scalar neg = a.is_floating_point() ? Scalar(-a.to_double()) : Scalar(-a.to_long());
  return {call_op1(OpId::add, {c.in(0), c.in(1)}, {neg})};
}
std::vector<Tensor> decomp_clone(const OpCall& c) { return {call_op1(OpId::to, {c.in(0)}, {c.in(0).dtype()})}; }
KILN_REGISTER_DECOMP(sub, decomp_sub);
KILN_REGISTER_DECOMP(clone, decomp_clone);

Tensor wrap(const Scalar& s) { return wrap_scalar(s); }
}  // namespace

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) { return call_op1(OpId::add, {a, b}, {alpha}); }
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha) { return call_op1(OpId::add, {a, wrap(b)}, {alpha}); }
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) { return call_op1(OpId::sub, {a, b}, {alpha}); }
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha) { return call_op1(OpId::sub, {a, wrap(b)}, {alpha}); }
Tensor rsub(const Tensor& a, const Scalar& b, const Scalar& alpha) { return call_op1(OpId::sub, {wrap(b), a}, {alpha}); }
Tensor mul(const Tensor& a, const Tensor& b) { return call_op1(OpId::mul, {a, b}); }
Tensor mul(const Tensor& a, const Scalar& b) { return call_op1(OpId::mul, {a, wrap(b)}); }

Tensor to(const Tensor& x, DType t, bool copy) {
  if (x.dtype() == t && !copy) return x;
  return call_op1(OpId::to, {x}, {t});
}
Tensor clone(const Tensor& x) { return call_op1(OpId::clone, {x}); }

// ---- operators ----
Tensor operator-(const Tensor& a) { return neg(a); }
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

// ---- Tensor methods ----
Tensor Tensor::add(const Tensor& o, const Scalar& alpha) const { return kiln::add(*this, o, alpha); }
Tensor Tensor::add(const Scalar& o, const Scalar& alpha) const { return kiln::add(*this, o, alpha); }
Tensor Tensor::sub(const Tensor& o, const Scalar& alpha) const { return kiln::sub(*this, o, alpha); }
Tensor Tensor::sub(const Scalar& o, const Scalar& alpha) const { return kiln::sub(*this, o, alpha); }
Tensor Tensor::mul(const Tensor& o) const { return kiln::mul(*this, o); }
Tensor Tensor::mul(const Scalar& o) const { return kiln::mul(*this, o); }
Tensor& Tensor::add_(const Tensor& o, const Scalar& alpha) { return call_op_inplace(*this, OpId::add, {*this, o}, {alpha}); }
Tensor& Tensor::add_(const Scalar& o, const Scalar& alpha) { return call_op_inplace(*this, OpId::add, {*this, wrap(o)}, {alpha}); }
Tensor& Tensor::sub_(const Tensor& o, const Scalar& alpha) { return call_op_inplace(*this, OpId::sub, {*this, o}, {alpha}); }
Tensor& Tensor::sub_(const Scalar& o, const Scalar& alpha) { return call_op_inplace(*this, OpId::sub, {*this, wrap(o)}, {alpha}); }
Tensor& Tensor::mul_(const Tensor& o) { return call_op_inplace(*this, OpId::mul, {*this, o}); }
Tensor& Tensor::mul_(const Scalar& o) { return call_op_inplace(*this, OpId::mul, {*this, wrap(o)}); }
Tensor Tensor::to(DType t, bool copy) const { return kiln::to(*this, t, copy); }
Tensor Tensor::clone() const { return kiln::clone(*this); }

}  // namespace kiln
