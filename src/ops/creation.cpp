// Factory ops: empty, full, zeros, ones, the *_like family, arange, linspace,
// eye, tensors from C++ data (tensor<T>, from_blob) and copies between tensors
// (copy_, to(Device), contiguous). Random ops are in random.cpp.
#include <cmath>
#include <cstring>
#include <limits>

#include "core/dtype_dispatch.h"
#include "dispatch/dispatch.h"
#include "kiln/autograd.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/pointwise.h"
#include "kiln/ops/shape.h"
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
  if (c.op == OpId::full) check_scalar_fits(c.attrs.s(1), c.attrs.dtype(2), "full");
  return one_output(checked_size(c.attrs.ints(0), c.name()), c.attrs.dtype(k), c.attrs.device(k + 1));
}
KILN_REGISTER_META(empty, meta_factory);
KILN_REGISTER_META(full, meta_factory);
KILN_REGISTER_META(zeros, meta_factory);
KILN_REGISTER_META(ones, meta_factory);

// *_like: (x; [value,] dtype, device)
std::vector<TensorMeta> meta_like(const OpCall& c) {
  size_t k = c.op == OpId::full_like ? 1 : 0;
  if (c.op == OpId::full_like) check_scalar_fits(c.attrs.s(0), c.attrs.dtype(1), "full_like");
  return one_output(c.in(0).sizes().vec(), c.attrs.dtype(k), c.attrs.device(k + 1));
}
KILN_REGISTER_META(empty_like, meta_like);
KILN_REGISTER_META(zeros_like, meta_like);
KILN_REGISTER_META(ones_like, meta_like);
KILN_REGISTER_META(full_like, meta_like);

// Note [Device moves]
// Tensor::to(device) is one op, _to_copy, rather than an empty tensor on the new device and a
// copy_ into it: under capture a copy_ is a write that functionalization turns into a binding of
// values (Note [Functionalization]), and a value keeps the device it was made on, so the copy would
// leave the result on the source's device. As an op the move stays in the graph (an extern call
// in a compiled one) and has a VJP: the gradient goes back to the source's device and dtype.
std::vector<TensorMeta> meta_to_copy(const OpCall& c) {
  KILN_CHECK(c.in(0).defined(), "_to_copy: undefined tensor");
  return one_output(c.in(0).sizes().vec(), c.attrs.dtype(0), c.attrs.device(1));
}
KILN_REGISTER_META(_to_copy, meta_to_copy);

std::vector<Tensor> decomp_zeros(const OpCall& c) {
  return {call_op1(OpId::full, {}, {c.attrs[0], Scalar(0), c.attrs[1], c.attrs[2]})};
}
std::vector<Tensor> decomp_ones(const OpCall& c) {
  return {call_op1(OpId::full, {}, {c.attrs[0], Scalar(1), c.attrs[1], c.attrs[2]})};
}
std::vector<Tensor> decomp_like(const OpCall& c) {
  AttrValue size = c.in(0).sizes().vec();
  switch (c.op) {
    case OpId::empty_like:
      return {call_op1(OpId::empty, {}, {size, c.attrs[0], c.attrs[1]})};
    case OpId::zeros_like:
      return {call_op1(OpId::full, {}, {size, Scalar(0), c.attrs[0], c.attrs[1]})};
    case OpId::ones_like:
      return {call_op1(OpId::full, {}, {size, Scalar(1), c.attrs[0], c.attrs[1]})};
    default:
      return {call_op1(OpId::full, {}, {size, c.attrs[0], c.attrs[1], c.attrs[2]})};
  }
}
KILN_REGISTER_DECOMP(zeros, decomp_zeros);
KILN_REGISTER_DECOMP(ones, decomp_ones);
KILN_REGISTER_DECOMP(empty_like, decomp_like);
KILN_REGISTER_DECOMP(zeros_like, decomp_like);
KILN_REGISTER_DECOMP(ones_like, decomp_like);
KILN_REGISTER_DECOMP(full_like, decomp_like);

// ---- arange / linspace / eye ----
// torch's length rule: ceil((end - start) / step), computed in double unless
// all three are integers (exact int64 arithmetic then). An integral dtype
// computes in int64, torch's accumulate type: start, end and step are truncated
// first (arange(2.5, int64) = [0, 1]; a step of 0.5 becomes 0 and is refused);
// only int64's length uses the truncated values, as in torch.
int64_t arange_length(const Scalar& start, const Scalar& end, const Scalar& step, DType dt) {
  bool integral = !start.is_floating_point() && !end.is_floating_point() && !step.is_floating_point();
  if (is_integral(dt) && !integral) {
    for (const Scalar* v : {&start, &end, &step}) check_scalar_fits(*v, kInt64, "arange");
    Scalar a(start.to_long()), b(end.to_long()), k(step.to_long());
    if (dt == kInt64) return arange_length(a, b, k, dt);
    arange_length(a, b, k, dt);  // the checks, on the truncated values
    double n = std::ceil((end.to_double() - start.to_double()) / step.to_double());
    return n > 0 ? static_cast<int64_t>(n) : 0;
  }
  KILN_CHECK(step.to_double() != 0, "arange: step must be nonzero");
  double s = start.to_double(), e = end.to_double(), st = step.to_double();
  KILN_CHECK(std::isfinite(s) && std::isfinite(e), "arange: unsupported range: ", s, " -> ", e);
  KILN_CHECK((st > 0 && e >= s) || (st < 0 && e <= s),
             "arange: upper bound and larger bound inconsistent with step sign (start=", start, ", end=", end,
             ", step=", step, ")");
  if (integral) {
    int64_t a = start.to_long(), b = end.to_long(), k = step.to_long();
    // ceil division for same-sign operands
    return k > 0 ? (b - a + k - 1) / k : (a - b + (-k) - 1) / (-k);
  }
  double n = std::ceil((e - s) / st);
  KILN_CHECK(n >= 0 && n < static_cast<double>(std::numeric_limits<int64_t>::max()),
             "arange: invalid size, possible overflow? (start=", start, ", end=", end, ", step=", step, ")");
  return static_cast<int64_t>(n);
}

std::vector<TensorMeta> meta_arange(const OpCall& c) {
  DType dt = c.attrs.dtype(3);
  KILN_CHECK(dt != DType::Bool, "arange: not implemented for dtype bool");
  int64_t n = arange_length(c.attrs.s(0), c.attrs.s(1), c.attrs.s(2), dt);
  return one_output({n}, dt, c.attrs.device(4));
}
KILN_REGISTER_META(arange, meta_arange);

std::vector<TensorMeta> meta_linspace(const OpCall& c) {
  int64_t steps = c.attrs.i(2);
  KILN_CHECK(steps >= 0, "linspace: number of steps must be non-negative, got ", steps);
  return one_output({steps}, c.attrs.dtype(3), c.attrs.device(4));
}
KILN_REGISTER_META(linspace, meta_linspace);

// linspace = start + i * step in float64 (the compiler's form; the CPU kernel
// also fills the upper half from `end` downwards, as torch does, so it hits end exactly).
std::vector<Tensor> decomp_linspace(const OpCall& c) {
  int64_t steps = c.attrs.i(2);
  double a = c.attrs.f(0), b = c.attrs.f(1);
  double step = steps > 1 ? (b - a) / static_cast<double>(steps - 1) : 0.0;
  Tensor i = call_op1(OpId::arange, {}, {Scalar(0), Scalar(steps), Scalar(1), kFloat64, c.attrs.device(4)});
  Tensor v = add(mul(i, Scalar(step)), Scalar(a));
  return {to(v, c.attrs.dtype(3))};
}
KILN_REGISTER_DECOMP(linspace, decomp_linspace);

std::vector<TensorMeta> meta_eye(const OpCall& c) {
  int64_t n = c.attrs.i(0), m = c.attrs.i(1);
  KILN_CHECK(n >= 0, "eye: n must be greater or equal to 0, got ", n);
  KILN_CHECK(m >= 0, "eye: m must be greater or equal to 0, got ", m);
  return one_output({n, m}, c.attrs.dtype(2), c.attrs.device(3));
}
KILN_REGISTER_META(eye, meta_eye);

// eye = (arange(n)[:, None] == arange(m)) in the requested dtype.
std::vector<Tensor> decomp_eye(const OpCall& c) {
  Device d = c.attrs.device(3);
  Tensor r = call_op1(OpId::arange, {}, {Scalar(0), Scalar(c.attrs.i(0)), Scalar(1), kInt64, d});
  Tensor col = call_op1(OpId::arange, {}, {Scalar(0), Scalar(c.attrs.i(1)), Scalar(1), kInt64, d});
  return {to(eq(unsqueeze(r, 1), col), c.attrs.dtype(2))};
}
KILN_REGISTER_DECOMP(eye, decomp_eye);

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
  return finish(call_op1(OpId::empty, {}, {size.raw(), o.dtype_or_default(), o.device_or_default()}), o);
}
Tensor zeros(SymIntArrayRef size, const TensorOptions& o) {
  return finish(call_op1(OpId::zeros, {}, {size.raw(), o.dtype_or_default(), o.device_or_default()}), o);
}
Tensor ones(SymIntArrayRef size, const TensorOptions& o) {
  return finish(call_op1(OpId::ones, {}, {size.raw(), o.dtype_or_default(), o.device_or_default()}), o);
}
Tensor full(SymIntArrayRef size, const Scalar& value, const TensorOptions& o) {
  DType dt = o.dtype_ ? *o.dtype_ : (value.is_floating_point() ? default_dtype() : value.dtype());
  return finish(call_op1(OpId::full, {}, {size.raw(), value, dt, o.device_or_default()}), o);
}
// torch.scalar_tensor is always of the default dtype unless told (unlike tensor(3), an int64).
Tensor scalar_tensor(const Scalar& value, const TensorOptions& o) {
  TensorOptions d = o;
  if (!d.dtype_) d.dtype_ = default_dtype();
  return full({}, value, d);
}
// torch.tensor(value, dtype): a number out of a float dtype's range converts (1e10 in float16 is
// inf, 65519 rounds to 65504) where full and scalar_tensor raise (Note [Scalars out of range]).
Tensor tensor(const Scalar& value, const TensorOptions& o) {
  if (o.dtype_ && is_floating_point(*o.dtype_) && !value.is_bool() && !scalar_fits(value, *o.dtype_)) {
    Tensor wide = full({}, value, TensorOptions(kFloat64).device(o.device_or_default())).to(*o.dtype_);
    return o.requires_grad_ ? wide.requires_grad_(true) : wide;
  }
  return full({}, value, o);
}

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

Tensor empty_strided(SymIntArrayRef size, SymIntArrayRef stride, const TensorOptions& o) {
  Shape sz = checked_size(size, "empty_strided");
  Shape st = stride.to_ints();
  KILN_CHECK(sz.size() == st.size(), "empty_strided: mismatch in length of strides and shape (", shape_str(sz), " vs ",
             shape_str(st), ")");
  for (int64_t v : st) KILN_CHECK(v >= 0, "empty_strided: strides must be non-negative, got ", shape_str(st));
  return finish(make_tensor_strided(sz, st, o.dtype_or_default(), o.device_or_default()), o);
}

Tensor arange(const Scalar& end, const TensorOptions& o) { return arange(Scalar(0), end, Scalar(1), o); }
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, const TensorOptions& o) {
  bool integral = !start.is_floating_point() && !end.is_floating_point() && !step.is_floating_point();
  DType dt = o.dtype_ ? *o.dtype_ : (integral ? kInt64 : default_dtype());
  return finish(call_op1(OpId::arange, {}, {start, end, step, dt, o.device_or_default()}), o);
}
Tensor linspace(const Scalar& start, const Scalar& end, int64_t steps, const TensorOptions& o) {
  return finish(call_op1(OpId::linspace, {}, {start, end, steps, o.dtype_or_default(), o.device_or_default()}), o);
}
Tensor eye(int64_t n, std::optional<int64_t> m, const TensorOptions& o) {
  return finish(call_op1(OpId::eye, {}, {n, m.value_or(n), o.dtype_or_default(), o.device_or_default()}), o);
}

// ---- tensors from C++ data ----
template <class T>
Tensor tensor(const std::vector<T>& data, SymIntArrayRef size, const TensorOptions& o) {
  Shape sz = checked_size(size, "tensor");
  KILN_CHECK(compute_numel(sz) == static_cast<int64_t>(data.size()), "tensor: shape ", shape_str(sz),
             " is invalid for ", data.size(), " values");
  constexpr DType native = dtype_of<T>();
  Tensor t = make_tensor(sz, native, kCPU);
  if constexpr (std::is_same_v<T, bool>) {
    bool* p = static_cast<bool*>(t.data_ptr());  // std::vector<bool> is packed
    for (size_t i = 0; i < data.size(); ++i) p[i] = data[i];
  } else if (!data.empty()) {
    std::memcpy(t.data_ptr(), data.data(), data.size() * sizeof(T));
  }
  DType dt = o.dtype_ ? *o.dtype_ : native;
  Device dev = o.device_or_default();
  if (dt != native || dev != kCPU) t = t.to(dev, dt);
  return finish(t, o);
}
#define KILN_INSTANTIATE_TENSOR(T) \
  template Tensor tensor<T>(const std::vector<T>&, SymIntArrayRef, const TensorOptions&);
KILN_INSTANTIATE_TENSOR(bool)
KILN_INSTANTIATE_TENSOR(uint8_t)
KILN_INSTANTIATE_TENSOR(int8_t)
KILN_INSTANTIATE_TENSOR(int16_t)
KILN_INSTANTIATE_TENSOR(int32_t)
KILN_INSTANTIATE_TENSOR(int64_t)
KILN_INSTANTIATE_TENSOR(float)
KILN_INSTANTIATE_TENSOR(double)
#undef KILN_INSTANTIATE_TENSOR

Tensor from_blob(void* data, SymIntArrayRef size, const TensorOptions& o, std::function<void(void*)> deleter) {
  Shape sz = checked_size(size, "from_blob");
  return from_blob(data, size, SymIntArrayRef(contiguous_strides(sz)), o, std::move(deleter));
}
Tensor from_blob(void* data, SymIntArrayRef size, SymIntArrayRef strides, const TensorOptions& o,
                 std::function<void(void*)> deleter) {
  Shape sz = checked_size(size, "from_blob");
  Shape st = strides.to_ints();
  KILN_CHECK(sz.size() == st.size(), "from_blob: mismatch in length of strides and shape (", shape_str(sz), " vs ",
             shape_str(st), ")");
  for (int64_t v : st) KILN_CHECK(v >= 0, "from_blob: strides must be non-negative, got ", shape_str(st));
  KILN_CHECK(data != nullptr || compute_numel(sz) == 0, "from_blob: data is null");
  DType dt = o.dtype_or_default();
  Device dev = o.device_or_default();
  int64_t extent = compute_numel(sz) == 0 ? 0 : 1;
  if (extent)
    for (size_t i = 0; i < sz.size(); ++i) extent += (sz[i] - 1) * st[i];
  auto impl = std::make_shared<TensorImpl>();
  // An empty deleter leaves the memory to its owner (Storage frees only through it).
  impl->storage = std::make_shared<Storage>(data, static_cast<size_t>(extent) * itemsize(dt), dev, std::move(deleter));
  impl->sizes = sz;
  impl->strides = st;
  impl->dtype = dt;
  impl->device = dev;
  impl->refresh_metadata();
  return finish(Tensor(std::move(impl)), o);
}

// ---- copies ----
// Note [Writes are ops]: every write that does not go through an op's own
// in-place form is `copy_` (copy_into), so a recording sees it as a node that
// writes its first input, and replaying the graph makes the same write.
std::vector<TensorMeta> meta_copy_(const OpCall& c) {
  const Tensor& self = c.in(0);
  const Tensor& src = c.in(1);
  KILN_CHECK(self.defined() && src.defined(), "copy_: undefined tensor");
  int64_t nd = self.dim(), ns = src.dim();
  bool ok = ns <= nd;
  for (int64_t i = 0; ok && i < ns; ++i) {
    int64_t sz = src.sizes()[i];
    ok = sz == 1 || sz == self.sizes()[nd - ns + i];
  }
  KILN_CHECK(ok, "copy_: source of shape ", shape_str(src.sizes()), " can't be broadcast to ", shape_str(self.sizes()));
  return {};
}
KILN_REGISTER_META(copy_, meta_copy_);

// Note [copy_ and autograd]: self = src (broadcast, converted to self's dtype)
// is the in-place form of `to` applied to src expanded to self's shape, so
// call_op_inplace records the gradient to src and self takes over its history.
Tensor& Tensor::copy_(const Tensor& src, bool non_blocking) {
  KILN_CHECK(defined() && src.defined(), "copy_: undefined tensor");
  bool grad = is_grad_enabled() && (src.requires_grad() || requires_grad());
  if (grad)
    KILN_CHECK(!(is_leaf() && requires_grad()),
               "copy_: a leaf tensor that requires grad is being used in an "
               "in-place operation; wrap it in kiln::NoGradGuard or clone() it first");
  if (!grad) {
    // Through call_op like every op, so modes and the op-call counts see it (copy_into below autograd doesn't).
    NonBlockingCopyGuard nb(non_blocking);
    (void)call_op(OpId::copy_, {*this, src});
    unsafe_impl()->bump_version();
    return *this;
  }
  Tensor s = src;
  if (s.sizes() != sizes()) {
    KILN_CHECK(s.dim() <= dim(), "copy_: source of shape ", shape_str(s.sizes()), " can't be broadcast to ",
               shape_str(sizes()));
    s = kiln::expand(s, sizes().vec());
  }
  // Across devices the value moves with _to_copy (Note [Device moves]), whose gradient goes back
  // to src's device, as torch's copy_ between devices.
  const bool move = src.device() != device();
  const OpId op = move ? OpId::_to_copy : OpId::to;
  const Attrs attrs = move ? Attrs{dtype(), device()} : Attrs{dtype()};
  if (!src.requires_grad()) {
    // self's old value is overwritten by a constant: its history ends here.
    NoGradGuard no_grad;
    call_op_inplace(*this, op, {s}, attrs);
    detach_();
    return *this;
  }
  return call_op_inplace(*this, op, {s}, attrs);
}

Tensor Tensor::to(Device d, std::optional<DType> t, bool non_blocking, bool copy) const {
  DType dt = t.value_or(dtype());
  if (d == device()) return kiln::to(*this, dt, copy);
  // Note [Device moves]. A non-blocking copy keeps its own path below: the op's copy waits.
  if (!non_blocking) return call_op1(OpId::_to_copy, {*this}, {dt, d});
  auto move = [d, dt, non_blocking](const Tensor& x) {
    // A non-blocking copy to the host lands in pinned memory, as torch's, so it can be asynchronous.
    Tensor out = non_blocking && d.is_cpu() && !x.is_cpu() && x.has_storage() && pinned_allocator()
                     ? make_tensor_pinned(x.sizes(), dt)
                     : empty(x.sizes(), TensorOptions(dt).device(d));
    out.copy_(x, non_blocking);
    return out;
  };
  if (!(is_grad_enabled() && requires_grad())) return move(*this);
  // A copy to another device is differentiable, as torch's _to_copy: the gradient goes back to
  // the source's device and dtype (and is itself differentiable, for double backward).
  const Device from = device();
  const DType from_dtype = dtype();
  return autograd::apply_custom_function(
      "to_device", {*this},
      [move](autograd::AutogradContext*, const std::vector<Tensor>& in) { return std::vector<Tensor>{move(in[0])}; },
      [from, from_dtype](autograd::AutogradContext*, const std::vector<Tensor>& g) {
        return std::vector<Tensor>{g[0].defined() ? g[0].to(from, from_dtype) : Tensor()};
      })[0];
}
bool Tensor::is_pinned() const {
  return defined() && has_storage() && unsafe_impl()->storage->pinned;
}
Tensor Tensor::pin_memory() const {
  KILN_CHECK(defined(), "pin_memory: undefined tensor");
  KILN_CHECK(is_cpu(), "pin_memory: expected a CPU tensor, got one on ", device());
  KILN_CHECK(has_storage(), "pin_memory: not supported on a tensor without storage (a tracer or meta tensor)");
  if (is_pinned()) return *this;
  Tensor out = make_tensor_pinned(sizes(), dtype());
  {
    NoGradGuard no_grad;
    out.copy_(*this);
  }
  // Differentiable as a copy (torch's pin_memory is): the gradient flows to self unchanged.
  if (is_grad_enabled() && requires_grad()) return autograd::apply_custom_function(
      "pin_memory", {*this}, [out](autograd::AutogradContext*, const std::vector<Tensor>&) {
        return std::vector<Tensor>{out};
      },
      [](autograd::AutogradContext*, const std::vector<Tensor>& g) { return std::vector<Tensor>{g[0]}; })[0];
  return out;
}

Tensor Tensor::to(const TensorOptions& o, bool copy) const {
  Tensor r = to(o.device_ ? *o.device_ : device(), o.dtype_, /*non_blocking=*/false, copy);
  if (o.requires_grad_ && !r.requires_grad()) r.requires_grad_(true);
  return r;
}

namespace {
TensorOptions like_self(const Tensor& self, const TensorOptions& o) {
  KILN_CHECK(self.defined(), "new_*: undefined tensor");
  TensorOptions r = o;
  if (!r.dtype_) r.dtype_ = self.dtype();
  if (!r.device_) r.device_ = self.device();
  return r;
}
}  // namespace

Tensor Tensor::new_empty(SymIntArrayRef size, const TensorOptions& o) const { return empty(size, like_self(*this, o)); }
Tensor Tensor::new_zeros(SymIntArrayRef size, const TensorOptions& o) const { return zeros(size, like_self(*this, o)); }
Tensor Tensor::new_ones(SymIntArrayRef size, const TensorOptions& o) const { return ones(size, like_self(*this, o)); }
Tensor Tensor::new_full(SymIntArrayRef size, const Scalar& value, const TensorOptions& o) const {
  return full(size, value, like_self(*this, o));
}

}  // namespace kiln
