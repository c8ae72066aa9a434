// The graph interpreter: every node through backend_call, in order.
#include <unordered_map>

#include "compile/backends/backend.h"
#include "core/tensor_impl.h"
#include "dispatch/dispatch.h"
#include "kiln/autograd.h"

namespace kiln::compiler {

namespace {
thread_local const std::vector<int64_t>* tls_random_state = nullptr;
thread_local const std::vector<Tensor>* tls_donated = nullptr;
}
DonateInputsScope::DonateInputsScope(const std::vector<Tensor>* inputs) { tls_donated = inputs; }
DonateInputsScope::~DonateInputsScope() { tls_donated = nullptr; }
bool take_donated_inputs(const std::vector<Tensor>& inputs) {
  if (tls_donated != &inputs) return false;
  tls_donated = nullptr;  // one graph takes them
  return true;
}
const std::vector<int64_t>* current_random_state() { return tls_random_state; }
RandomStateScope::RandomStateScope(const std::vector<int64_t>* state) : prev_(tls_random_state) {
  tls_random_state = state;
}
RandomStateScope::~RandomStateScope() { tls_random_state = prev_; }

std::vector<Tensor> run_node(const Graph& g, const Node& n, std::span<const Tensor> ins,
                             const std::vector<int64_t>* random_state, size_t& random_index,
                             const std::vector<int64_t>& sym_values) {
  const OpInfo& info = op_info(n.op);
  std::vector<Tensor> outs;
  const bool evaluate = g.is_symbolic() && n.attrs.has_symbolic();
  if (info.has(RANDOM) && random_state && !random_state->empty()) {
    int src = g.random_source.empty() ? static_cast<int>(random_index) : g.random_source.at(random_index);
    KILN_CHECK(2 * static_cast<size_t>(src) + 1 < random_state->size(), "internal: random state too short");
    std::vector<AttrValue> a = evaluate ? evaluate_attrs(n.attrs, sym_values).values() : n.attrs.values();
    a[a.size() - 2] = (*random_state)[2 * src];
    a[a.size() - 1] = (*random_state)[2 * src + 1];
    outs = backend_call(n.op, ins, Attrs(std::move(a)));
  } else if (evaluate) {
    outs = backend_call(n.op, ins, evaluate_attrs(n.attrs, sym_values));
  } else {
    outs = backend_call(n.op, ins, n.attrs);
  }
  if (info.has(RANDOM)) ++random_index;
  return outs;
}

bool writes_into_input0(const Node& n) {
  switch (n.op) {
    case OpId::index_add:
    case OpId::index_put:
    case OpId::scatter:
    case OpId::scatter_add:
    case OpId::scatter_reduce:
      break;
    default:
      return false;
  }
  if (n.inputs.empty() || n.inputs[0] < 0 || n.outputs.size() != 1) return false;
  for (size_t k = 1; k < n.inputs.size(); ++k)
    if (n.inputs[k] == n.inputs[0]) return false;
  return true;
}

bool run_into_dead_input(const Graph& g, const Node& n, std::span<const Tensor> ins, std::vector<Tensor>& outs) {
  outs.clear();
  if (!writes_into_input0(n) || (g.is_symbolic() && n.attrs.has_symbolic())) return false;
  const Tensor& x = ins[0];
  if (!x.defined() || !x.has_storage() || !x.is_cpu() || x.impl_ptr().use_count() != 1 ||
      x.unsafe_impl()->storage.use_count() != 1)
    return false;
  outs.push_back(x);
  if (kernel_into(n.op, ins, n.attrs, outs)) return true;
  outs.clear();
  return false;
}

std::vector<Tensor> run_interpreted(const Graph& g, const std::vector<Tensor>& inputs,
                                    const std::vector<int64_t>* random_state) {
  KILN_CHECK(inputs.size() == g.inputs.size(), "internal: graph takes ", g.inputs.size(), " inputs, got ",
             inputs.size());
  PauseRecording pause;
  NoGradGuard no_grad;  // nodes run below autograd; a composite's decomposition must not record either
  std::vector<Tensor> vals(g.values.size());
  const bool donated = take_donated_inputs(inputs);
  for (size_t i = 0; i < inputs.size(); ++i)
    vals[g.inputs[i]] = donated ? std::move(const_cast<Tensor&>(inputs[i])) : inputs[i];
  // Each value is let go after its last use, as eager frees an intermediate when its last
  // consumer ran: memory is reused while it is hot, and peak memory stays eager's.
  std::vector<int> last_use(g.values.size(), -1);
  for (size_t n = 0; n < g.nodes.size(); ++n)
    for (int v : g.nodes[n].inputs)
      if (v >= 0) last_use[static_cast<size_t>(v)] = static_cast<int>(n);
  for (int v : g.outputs) last_use[static_cast<size_t>(v)] = static_cast<int>(g.nodes.size());
  std::vector<Tensor> ins;
  size_t random_index = 0;
  int node_index = 0;
  // A symbolic graph's attrs are evaluated with this call's sizes (Note [Dynamic shapes]).
  std::vector<int64_t> sym_values;
  if (g.is_symbolic()) sym_values = g.sym_values(inputs);
  for (const Node& n : g.nodes) {
    ins.clear();
    for (int v : n.inputs) ins.push_back(v < 0 ? Tensor() : vals[v]);
    const OpInfo& info = op_info(n.op);
    std::vector<Tensor> outs;
    if (writes_into_input0(n) && last_use[static_cast<size_t>(n.inputs[0])] == node_index)
      vals[static_cast<size_t>(n.inputs[0])] = Tensor();  // Note [Externs into dead inputs]
    if (!run_into_dead_input(g, n, ins, outs)) outs = run_node(g, n, ins, random_state, random_index, sym_values);
    KILN_CHECK(outs.size() == n.outputs.size(), "internal: ", info.name, " returned ", outs.size(),
               " outputs, the graph has ", n.outputs.size());
    for (size_t k = 0; k < outs.size(); ++k) vals[n.outputs[k]] = std::move(outs[k]);
    ins.clear();
    for (int v : n.inputs)
      if (v >= 0 && last_use[static_cast<size_t>(v)] == node_index) vals[static_cast<size_t>(v)] = Tensor();
    for (int v : n.outputs)
      if (last_use[static_cast<size_t>(v)] < node_index) vals[static_cast<size_t>(v)] = Tensor();  // never used
    ++node_index;
  }
  std::vector<Tensor> out;
  out.reserve(g.outputs.size());
  std::unordered_map<int, int> seen;
  for (int v : g.outputs) {
    // Each output is its own buffer, as in eager, even where passes merged two values.
    bool dup = !seen.emplace(v, 1).second;
    out.push_back(dup ? vals[v].clone() : vals[v]);
  }
  return out;
}

}  // namespace kiln::compiler
