// Multi-tensor (foreach) ops and _fused_adam_: public functions, meta functions and
// decompositions into single-tensor ops. CPU kernels are in
// backend/cpu/foreach.cpp.
#include "kiln/ops/foreach.h"

#include "core/tensor_impl.h"
#include "dispatch/dispatch.h"
#include "kiln/autograd.h"
#include "kiln/ops/pointwise.h"
#include "ops/registry.h"

namespace kiln {

// Note [Foreach ops]
// A foreach op takes k tensor lists of one length n, passed to call_op as one
// input vector (list 0, then list 1, ...); k is fixed per op (foreach_sig).
// The public functions check the list lengths (the dispatcher only sees the
// joined vector); the meta function checks everything else. In-place forms
// have no outputs: their kernel writes into list 0 and the public function
// bumps its versions. They are NONDIFF and refuse tensors that require grad
// while grad mode is on, rather than silently dropping the gradient.

namespace {

struct ForeachSig {
  size_t lists;
  const char* names[3];
  bool inplace;
};

ForeachSig foreach_sig(OpId op) {
  switch (op) {
    case OpId::_foreach_neg:
    case OpId::_foreach_sqrt:
      return {1, {"self"}, false};
    case OpId::_foreach_add:
      return {2, {"self", "other"}, false};
    case OpId::_foreach_addcmul:
      return {3, {"self", "tensor1", "tensor2"}, false};
    case OpId::_foreach_add_:
      return {2, {"self", "other"}, true};
    case OpId::_foreach_add_scalar_:
    case OpId::_foreach_mul_scalar_:
    case OpId::_foreach_div_scalar_:
      return {1, {"self"}, true};
    case OpId::_foreach_addcmul_:
    case OpId::_foreach_addcdiv_:
      return {3, {"self", "tensor1", "tensor2"}, true};
    case OpId::_foreach_lerp_:
      return {2, {"self", "end"}, true};
    case OpId::_foreach_maximum_:
      return {2, {"self", "other"}, true};
    default:
      KILN_FAIL("internal: ", op_name(op), " is not a foreach op");
  }
}

// The index of the `doubles` attr, or -1 for ops without one.
int scalars_attr(OpId op) {
  switch (op) {
    case OpId::_foreach_addcmul:
    case OpId::_foreach_add_scalar_:
    case OpId::_foreach_mul_scalar_:
    case OpId::_foreach_div_scalar_:
    case OpId::_foreach_addcmul_:
    case OpId::_foreach_addcdiv_:
    case OpId::_foreach_lerp_:
      return 0;
    default:
      return -1;
  }
}

// True when `a` and `b` share memory without being the same view: an
// elementwise in-place update would then read values it already overwrote.
bool partial_overlap(const Tensor& a, const Tensor& b) {
  if (a.is_same(b) || !a.has_storage() || !b.has_storage() || !a.is_alias_of(b)) return false;
  return !(a.sizes() == b.sizes() && a.strides() == b.strides() && a.storage_offset() == b.storage_offset());
}

std::vector<TensorMeta> meta_foreach(const OpCall& c) {
  const ForeachSig sig = foreach_sig(c.op);
  const char* name = c.name();
  KILN_CHECK(!c.inputs.empty(), name, ": Tensor list must have at least one tensor");
  KILN_CHECK(c.inputs.size() % sig.lists == 0, "internal: ", name, " got ", c.inputs.size(), " tensors for ", sig.lists,
             " lists");
  const size_t n = c.inputs.size() / sig.lists;
  for (size_t l = 0; l < sig.lists; ++l)
    for (size_t i = 0; i < n; ++i)
      KILN_CHECK(c.in(l * n + i).defined(), name, ": ", sig.names[l], "[", i, "] is undefined");
  const Device dev = c.in(0).device();
  std::vector<TensorMeta> out;
  for (size_t i = 0; i < n; ++i) {
    const Tensor& s = c.in(i);
    KILN_CHECK(is_floating_point(s.dtype()), name, ": expected floating-point tensors, got dtype ", s.dtype(),
               " for self[", i, "]");
    KILN_CHECK(s.device() == dev, name, ": expected all tensors on one device, got ", dev, " for self[0] and ",
               s.device(), " for self[", i, "]");
    for (size_t l = 1; l < sig.lists; ++l) {
      const Tensor& t = c.in(l * n + i);
      KILN_CHECK(t.sizes() == s.sizes(), name, ": expected ", sig.names[l], "[", i, "] to have the shape of self[", i,
                 "], ", shape_str(s.sizes()), ", but got ", shape_str(t.sizes()));
      KILN_CHECK(t.dtype() == s.dtype(), name, ": expected ", sig.names[l], "[", i, "] to have the dtype of self[", i,
                 "], ", s.dtype(), ", but got ", t.dtype());
      KILN_CHECK(t.device() == s.device(), name, ": expected ", sig.names[l], "[", i, "] on ", s.device(),
                 " (the device of self[", i, "]), but got ", t.device());
      if (sig.inplace)
        KILN_CHECK(!partial_overlap(s, t), name, ": unsupported operation: ", sig.names[l], "[", i,
                   "] partly overlaps self[", i, "], which is written in place; clone() it first");
    }
    if (sig.inplace) {
      for (int64_t d = 0; d < s.dim(); ++d)
        KILN_CHECK(s.strides()[d] != 0 || s.sizes()[d] <= 1, name,
                   ": unsupported operation: more than one element of self[", i, "] (shape ", shape_str(s.sizes()),
                   ", strides ", shape_str(s.strides()), ") refers to a single memory location; clone() it first");
    } else {
      TensorMeta m;
      m.sizes = s.sizes().vec();
      m.dtype = s.dtype();
      m.device = s.device();
      out.push_back(std::move(m));
    }
  }
  if (int k = scalars_attr(c.op); k >= 0) {
    size_t ns = c.attrs.doubles(k).size();
    KILN_CHECK(ns == 1 || ns == n, name, ": expected 1 scalar or one per tensor (", n, "), got ", ns);
  }
  return out;
}
KILN_REGISTER_META(_foreach_neg, meta_foreach);
KILN_REGISTER_META(_foreach_sqrt, meta_foreach);
KILN_REGISTER_META(_foreach_add, meta_foreach);
KILN_REGISTER_META(_foreach_addcmul, meta_foreach);
KILN_REGISTER_META(_foreach_add_, meta_foreach);
KILN_REGISTER_META(_foreach_add_scalar_, meta_foreach);
KILN_REGISTER_META(_foreach_mul_scalar_, meta_foreach);
KILN_REGISTER_META(_foreach_div_scalar_, meta_foreach);
KILN_REGISTER_META(_foreach_addcmul_, meta_foreach);
KILN_REGISTER_META(_foreach_addcdiv_, meta_foreach);
KILN_REGISTER_META(_foreach_lerp_, meta_foreach);
KILN_REGISTER_META(_foreach_maximum_, meta_foreach);

// ---- decomposition: one single-tensor op per tensor (devices without a foreach kernel) ----
std::vector<Tensor> decomp_foreach(const OpCall& c) {
  const ForeachSig sig = foreach_sig(c.op);
  meta_foreach(c);  // errors name the foreach op
  const size_t n = c.inputs.size() / sig.lists;
  auto in = [&](size_t l, size_t i) { return c.in(l * n + i); };
  auto scalar = [&](size_t i) {
    const auto& s = c.attrs.doubles(0);
    return Scalar(s.size() == 1 ? s[0] : s[i]);
  };
  std::vector<Tensor> out;
  for (size_t i = 0; i < n; ++i) {
    Tensor self = in(0, i);
    switch (c.op) {
      case OpId::_foreach_neg:
        out.push_back(neg(self));
        break;
      case OpId::_foreach_sqrt:
        out.push_back(sqrt(self));
        break;
      case OpId::_foreach_add:
        out.push_back(add(self, in(1, i), c.attrs.s(0)));
        break;
      case OpId::_foreach_addcmul:
        out.push_back(addcmul(self, in(1, i), in(2, i), scalar(i)));
        break;
      case OpId::_foreach_add_:
        self.add_(in(1, i), c.attrs.s(0));
        break;
      case OpId::_foreach_add_scalar_:
        self.add_(scalar(i));
        break;
      case OpId::_foreach_mul_scalar_:
        self.mul_(scalar(i));
        break;
      case OpId::_foreach_div_scalar_:
        self.div_(scalar(i));
        break;
      case OpId::_foreach_addcmul_:
        self.addcmul_(in(1, i), in(2, i), scalar(i));
        break;
      case OpId::_foreach_addcdiv_:
        self.addcdiv_(in(1, i), in(2, i), scalar(i));
        break;
      case OpId::_foreach_lerp_:
        self.lerp_(in(1, i), scalar(i));
        break;
      case OpId::_foreach_maximum_:
        self.copy_(maximum(self, in(1, i)));
        break;
      default:
        KILN_FAIL("internal: no decomposition for ", c.name());
    }
  }
  return out;
}
KILN_REGISTER_DECOMP(_foreach_neg, decomp_foreach);
KILN_REGISTER_DECOMP(_foreach_sqrt, decomp_foreach);
KILN_REGISTER_DECOMP(_foreach_add, decomp_foreach);
KILN_REGISTER_DECOMP(_foreach_addcmul, decomp_foreach);
KILN_REGISTER_DECOMP(_foreach_add_, decomp_foreach);
KILN_REGISTER_DECOMP(_foreach_add_scalar_, decomp_foreach);
KILN_REGISTER_DECOMP(_foreach_mul_scalar_, decomp_foreach);
KILN_REGISTER_DECOMP(_foreach_div_scalar_, decomp_foreach);
KILN_REGISTER_DECOMP(_foreach_addcmul_, decomp_foreach);
KILN_REGISTER_DECOMP(_foreach_addcdiv_, decomp_foreach);
KILN_REGISTER_DECOMP(_foreach_lerp_, decomp_foreach);
KILN_REGISTER_DECOMP(_foreach_maximum_, decomp_foreach);

// ---- _fused_adam_ (Note [Fused Adam]): lists params, grads, exp_avgs, exp_avg_sqs and, with
// amsgrad (attr 7), max_exp_avg_sqs; attrs step_sizes, bias_correction2_sqrts, lr, beta1, beta2,
// eps, weight_decay, amsgrad, maximize, decoupled ----
constexpr const char* kAdamLists[5] = {"params", "grads", "exp_avgs", "exp_avg_sqs", "max_exp_avg_sqs"};
size_t adam_lists(const OpCall& c) { return c.attrs.b(7) ? 5 : 4; }

std::vector<TensorMeta> meta_fused_adam(const OpCall& c) {
  const char* name = c.name();
  const size_t lists = adam_lists(c);
  KILN_CHECK(!c.inputs.empty(), name, ": Tensor list must have at least one tensor");
  KILN_CHECK(c.inputs.size() % lists == 0, "internal: ", name, " got ", c.inputs.size(), " tensors for ", lists,
             " lists");
  const size_t n = c.inputs.size() / lists;
  for (size_t l = 0; l < lists; ++l)
    for (size_t i = 0; i < n; ++i)
      KILN_CHECK(c.in(l * n + i).defined(), name, ": ", kAdamLists[l], "[", i, "] is undefined");
  for (size_t k = 0; k < 2; ++k)
    KILN_CHECK(c.attrs.doubles(k).size() == n, name, ": expected one ", k == 0 ? "step size" : "bias correction",
               " per tensor (", n, "), got ", c.attrs.doubles(k).size());
  const Device dev = c.in(0).device();
  for (size_t i = 0; i < n; ++i) {
    const Tensor& p = c.in(i);
    KILN_CHECK(is_floating_point(p.dtype()), name, ": expected floating-point tensors, got dtype ", p.dtype(),
               " for params[", i, "]");
    KILN_CHECK(p.device() == dev, name, ": expected all tensors on one device, got ", dev, " for params[0] and ",
               p.device(), " for params[", i, "]");
    for (size_t l = 1; l < lists; ++l) {
      const Tensor& t = c.in(l * n + i);
      KILN_CHECK(t.sizes() == p.sizes(), name, ": expected ", kAdamLists[l], "[", i, "] to have the shape of params[",
                 i, "], ", shape_str(p.sizes()), ", but got ", shape_str(t.sizes()));
      KILN_CHECK(t.dtype() == p.dtype(), name, ": expected ", kAdamLists[l], "[", i, "] to have the dtype of params[",
                 i, "], ", p.dtype(), ", but got ", t.dtype());
      KILN_CHECK(t.device() == p.device(), name, ": expected ", kAdamLists[l], "[", i, "] on ", p.device(),
                 " (the device of params[", i, "]), but got ", t.device());
    }
    // Every written tensor is one memory location per element, shared with no other operand.
    for (size_t l = 0; l < lists; ++l) {
      if (l == 1) continue;  // grads are only read
      const Tensor& w = c.in(l * n + i);
      for (int64_t d = 0; d < w.dim(); ++d)
        KILN_CHECK(w.strides()[d] != 0 || w.sizes()[d] <= 1, name, ": unsupported operation: more than one element of ",
                   kAdamLists[l], "[", i, "] refers to a single memory location; clone() it first");
      for (size_t o = 0; o < lists; ++o)
        KILN_CHECK(o == l || !w.has_storage() || !c.in(o * n + i).has_storage() || !w.is_alias_of(c.in(o * n + i)),
                   name, ": unsupported operation: ", kAdamLists[l], "[", i, "] shares memory with ", kAdamLists[o],
                   "[", i, "]");
    }
  }
  return {};
}
KILN_REGISTER_META(_fused_adam_, meta_fused_adam);

// Position by position with single-tensor ops, as adam.cpp's per-tensor loop (Note [Fused Adam]).
std::vector<Tensor> decomp_fused_adam(const OpCall& c) {
  meta_fused_adam(c);
  const size_t n = c.inputs.size() / adam_lists(c);
  const double lr = c.attrs.f(2), beta1 = c.attrs.f(3), beta2 = c.attrs.f(4), eps = c.attrs.f(5), wd = c.attrs.f(6);
  const bool amsgrad = c.attrs.b(7), maximize = c.attrs.b(8), decoupled = c.attrs.b(9);
  for (size_t i = 0; i < n; ++i) {
    Tensor p = c.in(i), m = c.in(2 * n + i), v = c.in(3 * n + i);
    Tensor g = maximize ? c.in(n + i).neg() : c.in(n + i);
    if (wd != 0) {
      if (decoupled)
        p.mul_(1 - lr * wd);
      else
        g = g.add(p, wd);
    }
    m.lerp_(g, 1 - beta1);
    v.mul_(beta2).addcmul_(g, g, 1 - beta2);
    Tensor d;
    if (amsgrad) {
      Tensor vmax = c.in(4 * n + i);
      vmax.copy_(maximum(vmax, v));
      d = vmax.sqrt();
    } else {
      d = v.sqrt();
    }
    d.div_(c.attrs.doubles(1)[i]).add_(eps);
    p.addcdiv_(m, d, -c.attrs.doubles(0)[i]);
  }
  return {};
}
KILN_REGISTER_DECOMP(_fused_adam_, decomp_fused_adam);

// ---- public functions ----
using List = std::vector<Tensor>;

// Joins the lists into one input vector after checking their lengths and grad mode.
std::vector<Tensor> join(OpId op, std::initializer_list<const List*> lists) {
  const ForeachSig sig = foreach_sig(op);
  const List& self = **lists.begin();
  std::vector<Tensor> in;
  in.reserve(self.size() * lists.size());
  size_t l = 0;
  for (const List* list : lists) {
    KILN_CHECK(list->size() == self.size(), op_name(op), ": expected all tensor lists to have the same length, got ",
               self.size(), " (self) and ", list->size(), " (", sig.names[l], ")");
    for (const Tensor& t : *list) {
      KILN_CHECK(!is_grad_enabled() || !t.defined() || !t.requires_grad(), op_name(op),
                 ": foreach ops are not differentiable, but ", sig.names[l],
                 " holds a tensor that requires grad while grad mode is on; call it under kiln::NoGradGuard");
      in.push_back(t);
    }
    ++l;
  }
  return in;
}

List run(OpId op, std::initializer_list<const List*> lists, Attrs attrs = {}) {
  return call_op(op, join(op, lists), std::move(attrs));
}
void run_(OpId op, std::initializer_list<const List*> lists, Attrs attrs = {}) {
  (void)call_op(op, join(op, lists), std::move(attrs));
  for (const Tensor& t : **lists.begin()) t.unsafe_impl()->bump_version();
}
Attrs scalars(const Scalar& s) { return {std::vector<double>{s.to_double()}}; }
Attrs scalars(const std::vector<double>& s) { return {s}; }
}  // namespace

List _foreach_neg(const List& self) { return run(OpId::_foreach_neg, {&self}); }
List _foreach_sqrt(const List& self) { return run(OpId::_foreach_sqrt, {&self}); }
List _foreach_add(const List& self, const List& other, const Scalar& alpha) {
  return run(OpId::_foreach_add, {&self, &other}, {alpha});
}
List _foreach_addcmul(const List& self, const List& t1, const List& t2, const Scalar& value) {
  return run(OpId::_foreach_addcmul, {&self, &t1, &t2}, scalars(value));
}
List _foreach_addcmul(const List& self, const List& t1, const List& t2, const std::vector<double>& values) {
  return run(OpId::_foreach_addcmul, {&self, &t1, &t2}, scalars(values));
}

void _foreach_add_(const List& self, const List& other, const Scalar& alpha) {
  run_(OpId::_foreach_add_, {&self, &other}, {alpha});
}
void _foreach_add_(const List& self, const Scalar& s) { run_(OpId::_foreach_add_scalar_, {&self}, scalars(s)); }
void _foreach_add_(const List& self, const std::vector<double>& s) {
  run_(OpId::_foreach_add_scalar_, {&self}, scalars(s));
}
void _foreach_mul_(const List& self, const Scalar& s) { run_(OpId::_foreach_mul_scalar_, {&self}, scalars(s)); }
void _foreach_mul_(const List& self, const std::vector<double>& s) {
  run_(OpId::_foreach_mul_scalar_, {&self}, scalars(s));
}
void _foreach_div_(const List& self, const Scalar& s) { run_(OpId::_foreach_div_scalar_, {&self}, scalars(s)); }
void _foreach_div_(const List& self, const std::vector<double>& s) {
  run_(OpId::_foreach_div_scalar_, {&self}, scalars(s));
}
void _foreach_addcmul_(const List& self, const List& t1, const List& t2, const Scalar& value) {
  run_(OpId::_foreach_addcmul_, {&self, &t1, &t2}, scalars(value));
}
void _foreach_addcmul_(const List& self, const List& t1, const List& t2, const std::vector<double>& values) {
  run_(OpId::_foreach_addcmul_, {&self, &t1, &t2}, scalars(values));
}
void _foreach_addcdiv_(const List& self, const List& t1, const List& t2, const Scalar& value) {
  run_(OpId::_foreach_addcdiv_, {&self, &t1, &t2}, scalars(value));
}
void _foreach_addcdiv_(const List& self, const List& t1, const List& t2, const std::vector<double>& values) {
  run_(OpId::_foreach_addcdiv_, {&self, &t1, &t2}, scalars(values));
}
void _foreach_lerp_(const List& self, const List& end, const Scalar& weight) {
  run_(OpId::_foreach_lerp_, {&self, &end}, scalars(weight));
}
void _foreach_lerp_(const List& self, const List& end, const std::vector<double>& weights) {
  run_(OpId::_foreach_lerp_, {&self, &end}, scalars(weights));
}
void _foreach_maximum_(const List& self, const List& other) { run_(OpId::_foreach_maximum_, {&self, &other}); }

void _fused_adam_(const List& params, const List& grads, const List& exp_avgs, const List& exp_avg_sqs,
                  const List& max_exp_avg_sqs, const std::vector<double>& step_sizes,
                  const std::vector<double>& bias_correction2_sqrts, double lr, double beta1, double beta2, double eps,
                  double weight_decay, bool amsgrad, bool maximize, bool decoupled) {
  const OpId op = OpId::_fused_adam_;
  std::vector<const List*> lists{&params, &grads, &exp_avgs, &exp_avg_sqs};
  if (amsgrad)
    lists.push_back(&max_exp_avg_sqs);
  else
    KILN_CHECK(max_exp_avg_sqs.empty(), op_name(op), ": max_exp_avg_sqs must be empty without amsgrad");
  std::vector<Tensor> in;
  in.reserve(params.size() * lists.size());
  for (size_t l = 0; l < lists.size(); ++l) {
    KILN_CHECK(lists[l]->size() == params.size(), op_name(op),
               ": expected all tensor lists to have the same length, got ", params.size(), " (params) and ",
               lists[l]->size(), " (", kAdamLists[l], ")");
    for (const Tensor& t : *lists[l]) {
      KILN_CHECK(!is_grad_enabled() || !t.defined() || !t.requires_grad(), op_name(op), ": not differentiable, but ",
                 kAdamLists[l],
                 " holds a tensor that requires grad while grad mode is on; call it under kiln::NoGradGuard");
      in.push_back(t);
    }
  }
  (void)call_op(
      op, std::move(in),
      {step_sizes, bias_correction2_sqrts, lr, beta1, beta2, eps, weight_decay, amsgrad, maximize, decoupled});
  for (size_t l = 0; l < lists.size(); ++l)
    if (l != 1)
      for (const Tensor& t : *lists[l]) t.unsafe_impl()->bump_version();
}

}  // namespace kiln
