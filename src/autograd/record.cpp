// The autograd layer of the op call path: runs an op below autograd and
// records an OpNode whose VJP is the op's rule (Note [Op call path]).
#include "autograd/autograd_meta.h"
#include "autograd/node.h"
#include "dispatch/dispatch.h"
#include "kiln/autograd.h"

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
    outs = backend_call(op, inputs, attrs);
  }
  auto node = std::make_shared<OpNode>();
  node->op = op;
  node->attrs = std::move(attrs);  // the op has run; nothing below reads them again
  node->next_edges.reserve(inputs.size());
  node->input_meta.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    node->next_edges.push_back(t.defined() ? gradient_edge(t) : Edge{});
    node->input_meta.push_back(t.defined() ? meta_of(t) : TensorMeta{});
  }
  node->output_meta.reserve(outs.size());  // each list allocated once (Note [Cheap dispatch])
  for (const Tensor& t : outs) node->output_meta.push_back(meta_of(t));
  auto save = static_cast<uint8_t>(info.save);
  if (save & static_cast<uint8_t>(SaveMask::SaveIn)) {
    node->saved_inputs.reserve(inputs.size());
    for (const Tensor& t : inputs) node->saved_inputs.emplace_back(t, false, node);
  }
  set_history(outs, node);
  if (save & static_cast<uint8_t>(SaveMask::SaveOut)) {
    node->saved_outputs.reserve(outs.size());
    for (const Tensor& t : outs) node->saved_outputs.emplace_back(t, true, node);
  }
  return outs;
}

void rebase_history(Tensor& self, const Tensor& result) {
  auto& m = autograd_meta(self);
  auto* rm = autograd_meta_or_null(result);
  m.grad_fn = rm ? rm->grad_fn : nullptr;
  m.output_nr = rm ? rm->output_nr : 0;
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
