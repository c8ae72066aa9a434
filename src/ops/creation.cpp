// Factory ops: empty, full, zeros, ones and the *_like family.
#include "dispatch/dispatch.h"
#include "kiln/ops/creation.h"
#include "ops/meta_util.h"

namespace kiln {

namespace {
Shape checked_size(SymIntArrayRef size, const char* op) {
  Shape s = size.to_ints();
  for (int64_t v : s)
    KILN_CHECK(v >= 0, op, ": trying to create tensor with negative dimension ", v, ": ", shape_str(s));
  return s;
}

// Attrs (size, [value,] dtype, device): the common factory meta.
std::vector<TensorMeta> meta_factory(const OpCall& c) {
  size_t k = c.op == OpId::full ? 2 : 1;
  return one_output(checked_size(c.attrs.ints(0), c.name()), c.attrs.dtype(k), c.attrs.device(k + 1));
}
KILN_REGISTER_META(empty, meta_factory);
KILN_REGISTER_META(full, meta_factory);
KILN_REGISTER_META(zeros, meta_factory);
KILN_REGISTER_META(ones, meta_factory);

// *_like: (x; [value,] dtype, device)
std::vector<TensorMeta> meta_like(const OpCall& c) {
  size_t k = c.op == OpId::full_like ? 1 : 0;
  return one_output(c.in(0).sizes().vec(), c.attrs.dtype(k), c.attrs.device(k + 1));
}
KILN_REGISTER_META(empty_like, meta_like);
KILN_REGISTER_META(zeros_like, meta_like);
KILN_REGISTER_META(ones_like, meta_like);
KILN_REGISTER_META(full_like, meta_like);

std::vector<Tensor> decomp_zeros(const OpCall& c) {
  return {call_op1(OpId::full, {}, {c.attrs[0], Scalar(0), c.attrs[1], c.attrs[2]})};
}
std::vector<Tensor> decomp_ones(const OpCall& c) {
  return {call_op1(OpId::full, {}, {c.attrs[0], Scalar(1), c.attrs[1], c.attrs[2]})};
}
std::vector<Tensor> decomp_like(const OpCall& c) {
  AttrValue size = c.in(0).sizes().vec();
  switch (c.op) {
    case OpId::empty_like: return {call_op1(OpId::empty, {}, {size, c.attrs[0], c.attrs[1]})};
    case OpId::zeros_like: return {call_op1(OpId::full, {}, {size, Scalar(0), c.attrs[0], c.attrs[1]})};
    case OpId::ones_like: return {call_op1(OpId::full, {}, {size, Scalar(1), c.attrs[0], c.attrs[1]})};
    default: return {call_op1(OpId::full, {}, {size, c.attrs[0], c.attrs[1], c.attrs[2]})};
  }
}
KILN_REGISTER_DECOMP(zeros, decomp_zeros);
KILN_REGISTER_DECOMP(ones, decomp_ones);
KILN_REGISTER_DECOMP(empty_like, decomp_like);
KILN_REGISTER_DECOMP(zeros_like, decomp_like);
KILN_REGISTER_DECOMP(ones_like, decomp_like);
KILN_REGISTER_DECOMP(full_like, decomp_like);

Tensor finish(Tensor t, const TensorOptions& o) {
  if (o.requires_grad_) t.requires_grad_(true);
  return t;
}

Attrs like_attrs(const Tensor& t, const std::optional<TensorOptions>& o) {
  DType dt = o && o->dtype_ ? *o->dtype_ : t.dtype();
  Device dev = o && o->device_ ? *o->device_ : t.device();
  return {dt, dev};
}
}  // namespace

Tensor empty(SymIntArrayRef size, const TensorOptions& o) {
  return finish(call_op1(OpId::empty, {}, {size.to_ints(), o.dtype_or_default(), o.device_or_default()}), o);
}
Tensor zeros(SymIntArrayRef size, const TensorOptions& o) {
  return finish(call_op1(OpId::zeros, {}, {size.to_ints(), o.dtype_or_default(), o.device_or_default()}), o);
}
Tensor ones(SymIntArrayRef size, const TensorOptions& o) {
  return finish(call_op1(OpId::ones, {}, {size.to_ints(), o.dtype_or_default(), o.device_or_default()}), o);
}
Tensor full(SymIntArrayRef size, const Scalar& value, const TensorOptions& o) {
  DType dt = o.dtype_ ? *o.dtype_ : (value.is_floating_point() ? default_dtype() : value.dtype());
  return finish(call_op1(OpId::full, {}, {size.to_ints(), value, dt, o.device_or_default()}), o);
}
Tensor scalar_tensor(const Scalar& value, const TensorOptions& o) { return full({}, value, o); }
Tensor tensor(const Scalar& value, const TensorOptions& o) { return full({}, value, o); }

Tensor empty_like(const Tensor& t, std::optional<TensorOptions> o) {
  return finish(call_op1(OpId::empty_like, {t}, like_attrs(t, o)), o.value_or(TensorOptions()));
}
Tensor zeros_like(const Tensor& t, std::optional<TensorOptions> o) {
  return finish(call_op1(OpId::zeros_like, {t}, like_attrs(t, o)), o.value_or(TensorOptions()));
}
Tensor ones_like(const Tensor& t, std::optional<TensorOptions> o) {
  return finish(call_op1(OpId::ones_like, {t}, like_attrs(t, o)), o.value_or(TensorOptions()));
}
Tensor full_like(const Tensor& t, const Scalar& value, std::optional<TensorOptions> o) {
  Attrs a = like_attrs(t, o);
  return finish(call_op1(OpId::full_like, {t}, {value, a[0], a[1]}), o.value_or(TensorOptions()));
}

}  // namespace kiln
