// The autograd layer of the op call path: runs an op below autograd and
// records an OpNode whose VJP is the op's rule (Note [Op call path]).
#include <algorithm>

#include "autograd/autograd_meta.h"
#include "autograd/deferred.h"
#include "autograd/node.h"
#include "dispatch/dispatch.h"
#include "kiln/autograd.h"
#include "kiln/ops/shape.h"

namespace kiln::autograd {
namespace {

bool needs_autograd(std::span<const Tensor> inputs) {
  if (!is_grad_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

std::vector<Tensor> record(OpId op, std::vector<Tensor>& inputs, Attrs& attrs) {
  const OpInfo& info = op_info(op);
  if (info.has(NONDIFF)) {
    NoGradGuard no_grad;
    return backend_call(op, inputs, attrs);
  }
  if (!info.vjp) {
    // A composite without its own rule is differentiated through its decomposition.
    KILN_CHECK(info.decomp, info.name, ": not supported yet: the derivative of this op");
    OpCall call{op, inputs, attrs};
    if (info.meta && !info.has(DATA_DEPENDENT)) (void)info.meta(call);
    return info.decomp(call);
  }
  std::vector<Tensor> outs;
  {
    NoGradGuard no_grad;
    DifferentiableScope differentiable(true);  // Note [No-grad nodes]
    outs = backend_call(op, inputs, attrs);
    // A composite may hand back an input untouched (logcumsumexp over a dim of size 1). Its
    // output must be a tensor of its own: recording history on the input would take a leaf's
    // place and make the node, which saves that input, own itself.
    for (Tensor& o : outs)
      for (const Tensor& in : inputs)
        if (o.defined() && o.unsafe_impl() == in.unsafe_impl()) {
          o = clone(o);
          break;
        }
    // Likewise a view its decomposition made of an intermediate (median's reshape of a gather) is
    // the op's own tensor: as a view of a base without history, an in-place op on it would be
    // refused (Note [In-place on a view]) where PyTorch's is not. A view of an input is a copy.
    // Tracers too: a captured graph runs what eager's autograd recorded for them (backend "eager").
    std::vector<const TensorImpl*> roots;  // two outputs viewing one intermediate: copies too
    if (!info.has(VIEW))
      for (Tensor& o : outs) {
        if (!o.defined() || !o.is_view()) continue;
        const TensorImpl* root = o.unsafe_impl()->view_base.get();
        bool copy = std::find(roots.begin(), roots.end(), root) != roots.end();
        roots.push_back(root);
        for (const Tensor& in : inputs)
          if (in.defined()) {
            const TensorImpl* i = in.unsafe_impl();
            copy = copy || root == (i->view_base ? i->view_base.get() : i);
          }
        if (copy)
          o = clone(o);
        else
          o.unsafe_impl()->view_base = nullptr;
      }
  }
  if (RecordLayer* rec = current_record_layer())
    if (DeferredGraph* deferred = rec->deferred_autograd()) {
      bool tracers = !outs.empty();
      for (const Tensor& t : outs) tracers = tracers && t.defined() && t.unsafe_impl()->is_tracer();
      if (tracers) {
        deferred->add(op, std::move(inputs), std::move(attrs), outs);  // Note [Deferred tracer autograd]
        return outs;
      }
    }
  (void)make_op_node(op, inputs, std::move(attrs), outs);  // the op has run; nothing below reads attrs again
  return outs;
}

void rebase_history(Tensor& self, const Tensor& result) {
  auto& m = autograd_meta(self);
  auto* rm = autograd_meta_or_null(result);
  // Note [Deferred tracer autograd]: a deferred node takes its edges when it is built. self's
  // history changes here, and the nodes noted before that read self (tanh's output, then
  // `v * 2`, then `v.zero_()`) must get the history self had when they ran: build them now,
  // whatever the result's history is (a zero_ or a no-grad result has none), and before self
  // takes the new one. self takes over a real history when the result's node is deferred too.
  materialize_deferred();
  m.grad_fn = rm ? rm->grad_fn : nullptr;
  m.output_nr = rm ? rm->output_nr : 0;
  if (self.unsafe_impl()->view_base) {  // Note [View rebase]: its history is current
    m.view_of_base = true;
    m.view_version = self._version();
  }
  if (m.grad_fn) {
    // The node saved `result` if it saves outputs; self now stands for it.
    m.requires_grad = false;
  }
}

[[maybe_unused]] const bool installed = [] {
  set_autograd_layer(&record, &needs_autograd, &rebase_history);
  return true;
}();

}  // namespace
}  // namespace kiln::autograd
