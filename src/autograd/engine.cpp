// The backward engine: runs the autograd graph from its roots in dependency
// order, summing gradients that meet at a node.
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "autograd/autograd_meta.h"
#include "autograd/engine.h"
#include "dispatch/autocast.h"
#include "kiln/autograd.h"
#include "kiln/ops/creation.h"

namespace kiln::autograd {

namespace {
struct ReadyOrder {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr < b->sequence_nr; }
};

// Note [Gradients of CPU scalars]: a 0-d CPU tensor may be an input of a CUDA op (dispatch's
// common_device), so its VJP's gradient comes out on the GPU; as torch's engine, that gradient
// moves to the CPU before it flows on (a mul's VJP would otherwise meet a CUDA gradient and a CPU
// operand). Only that case: any other device mismatch is a VJP's bug, left for the op to report.
Tensor on_device_of(const Edge& e, Tensor g) {
  if (!g.defined() || e.input_nr >= e.fn->output_meta.size()) return g;
  const TensorMeta& m = e.fn->output_meta[e.input_nr];
  return m.device.is_cpu() && m.sizes.empty() && !g.is_cpu() ? g.to(m.device) : g;
}

void accumulate(std::vector<Tensor>& buf, size_t k, const Tensor& g) {
  if (buf.size() <= k) buf.resize(k + 1);
  if (!g.defined()) return;
  buf[k] = buf[k].defined() ? buf[k] + g : g;
}
}  // namespace

namespace {
thread_local uint64_t tls_backward_runs = 0;
}
uint64_t backward_runs() { return tls_backward_runs; }

std::vector<Tensor> run_backward(const std::vector<Edge>& roots, const std::vector<Tensor>& root_grads, bool keep_graph,
                                 bool create_graph, const std::vector<Edge>& captures) {
  ++tls_backward_runs;
  // Each VJP runs in the dtypes its forward op chose, even when backward() is called inside an
  // autocast region (Note [Autocast]).
  ::kiln::detail::AutocastExcludeGuard no_autocast;
  // 1. Reachable nodes and how many edges lead into each.
  std::unordered_map<Node*, int> deps;
  std::vector<Node*> order;
  {
    std::vector<Node*> stack;
    std::unordered_set<Node*> seen;
    for (const Edge& e : roots)
      if (e.valid() && seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      order.push_back(n);
      for (const Edge& e : n->next_edges) {
        if (!e.valid()) continue;
        deps[e.fn.get()]++;
        if (seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
      }
    }
  }
  // 2. With captures (autograd::grad), run only nodes that lead to a capture.
  bool capture_mode = !captures.empty();
  std::unordered_set<Node*> needed;
  if (capture_mode) {
    std::unordered_set<Node*> targets;
    for (const Edge& c : captures)
      if (c.valid()) targets.insert(c.fn.get());
    // Reverse topological pass: a node is needed when any child is needed or it is a target.
    std::unordered_map<Node*, int> pending = deps;
    std::vector<Node*> topo;
    std::vector<Node*> ready;
    std::unordered_set<Node*> queued;
    // Once per node: two roots of one node (outputs 0 and 1 of a compiled graph) must not
    // release its children twice, or a node is ordered after one it leads to.
    for (const Edge& e : roots)
      if (e.valid() && pending[e.fn.get()] == 0 && queued.insert(e.fn.get()).second) ready.push_back(e.fn.get());
    while (!ready.empty()) {
      Node* n = ready.back();
      ready.pop_back();
      topo.push_back(n);
      for (const Edge& e : n->next_edges)
        if (e.valid() && --pending[e.fn.get()] == 0 && queued.insert(e.fn.get()).second) ready.push_back(e.fn.get());
    }
    for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
      Node* n = *it;
      bool need = targets.count(n) > 0;
      for (const Edge& e : n->next_edges) need = need || (e.valid() && needed.count(e.fn.get()));
      if (need) needed.insert(n);
    }
  }
  std::vector<Tensor> captured(captures.size());

  // 3. Execute.
  GradModeGuard grad_mode(create_graph);
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  std::priority_queue<Node*, std::vector<Node*>, ReadyOrder> ready;
  std::unordered_set<Node*> pushed;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Edge& e = roots[i];
    if (!e.valid()) continue;
    accumulate(buffers[e.fn.get()], e.input_nr, root_grads[i]);
  }
  for (const Edge& e : roots)
    if (e.valid() && deps[e.fn.get()] == 0 && pushed.insert(e.fn.get()).second) ready.push(e.fn.get());

  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    std::vector<Tensor> grads = std::move(buffers[n]);
    buffers.erase(n);
    grads.resize(std::max(grads.size(), n->output_meta.size()));
    for (auto& [k, hooks] : n->pre_hooks) {
      if (k >= grads.size() || !grads[k].defined()) continue;
      for (auto& [id, hook] : hooks) {
        Tensor r = hook(grads[k]);
        if (r.defined()) grads[k] = r;
      }
    }
    for (auto& [k, weak] : n->retained) {
      if (auto impl = weak.lock(); impl && k < grads.size() && grads[k].defined()) {
        Tensor t(impl);
        auto& m = autograd_meta(t);
        Tensor g = create_graph ? grads[k] : grads[k].detach();
        m.grad = m.grad.defined() ? m.grad + g : g.clone();
      }
    }
    if (capture_mode) {
      for (size_t c = 0; c < captures.size(); ++c)
        if (captures[c].fn.get() == n && captures[c].input_nr < grads.size()) {
          const Tensor& g = grads[captures[c].input_nr];
          if (g.defined()) captured[c] = captured[c].defined() ? captured[c] + g : g;
        }
    }
    bool run = !capture_mode || (needed.count(n) && dynamic_cast<AccumulateGrad*>(n) == nullptr);
    std::vector<Tensor> outs;
    if (run) {
      n->releases_after_apply = !keep_graph;
      outs = n->apply(std::move(grads));
      if (!keep_graph) n->release_saved();
    }
    for (size_t i = 0; i < n->next_edges.size(); ++i) {
      const Edge& e = n->next_edges[i];
      if (!e.valid()) continue;
      if (i < outs.size()) accumulate(buffers[e.fn.get()], e.input_nr, on_device_of(e, std::move(outs[i])));
      if (--deps[e.fn.get()] == 0 && pushed.insert(e.fn.get()).second) ready.push(e.fn.get());
    }
  }
  return captured;
}

}  // namespace kiln::autograd
