#include "compile/ir/passes.h"

#include <unordered_map>

#include "compile/ir/hash.h"

namespace kiln::compiler {

void compact(Graph& g) {
  std::vector<int> remap(g.values.size(), -1);
  Graph out;
  for (int v : g.inputs)
    remap[v] = out.add_input(g.values[v].meta, g.values[v].requires_grad, g.values[v].wrapped_number);
  for (const Node& n : g.nodes) {
    std::vector<int> ins;
    ins.reserve(n.inputs.size());
    for (int in : n.inputs) ins.push_back(in < 0 ? -1 : remap[in]);
    std::vector<TensorMeta> metas;
    for (int o : n.outputs) metas.push_back(g.values[o].meta);
    int id = out.add_node(n.op, n.attrs, std::move(ins), metas);
    out.nodes[id].no_grad = n.no_grad;
    out.nodes[id].detached = n.detached;
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      int nv = out.nodes[id].outputs[k];
      remap[n.outputs[k]] = nv;
      out.values[nv].requires_grad = g.values[n.outputs[k]].requires_grad;
    }
  }
  for (int v : g.outputs) out.outputs.push_back(remap[v]);
  out.random_source = std::move(g.random_source);
  g = std::move(out);
}

int dead_code_elimination(Graph& g) {
  std::vector<bool> live_value(g.values.size(), false);
  for (int v : g.outputs) live_value[v] = true;
  std::vector<bool> keep(g.nodes.size(), false);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    bool live = op_info(n.op).has(MUTATES);
    for (int o : n.outputs) live = live || live_value[o];
    if (!live) continue;
    keep[i] = true;
    for (int in : n.inputs)
      if (in >= 0) live_value[in] = true;
  }
  // Random nodes draw from the pairs random_source names (identity when empty): keep that for the survivors.
  std::vector<int> source = g.random_source;
  if (source.empty())
    for (const Node& n : g.nodes)
      if (op_info(n.op).has(RANDOM)) source.push_back(static_cast<int>(source.size()));
  int removed = 0;
  std::vector<Node> nodes;
  std::vector<int> random_source;
  size_t r = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    bool random = op_info(g.nodes[i].op).has(RANDOM);
    if (random && keep[i]) random_source.push_back(source[r]);
    if (random) ++r;
    if (keep[i])
      nodes.push_back(std::move(g.nodes[i]));
    else
      ++removed;
  }
  g.random_source = std::move(random_source);
  if (removed == 0) {
    g.nodes = std::move(nodes);
    return 0;
  }
  g.nodes = std::move(nodes);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (int o : g.nodes[i].outputs) g.values[o].node = static_cast<int>(i);
  compact(g);
  return removed;
}

std::vector<int> view_roots(const Graph& g) {
  std::vector<int> root(g.values.size());
  for (size_t v = 0; v < root.size(); ++v) root[v] = static_cast<int>(v);
  for (const Node& n : g.nodes)
    if (op_info(n.op).has(VIEW) && !n.inputs.empty() && n.inputs[0] >= 0)
      for (int o : n.outputs) root[o] = root[n.inputs[0]];
  return root;
}

namespace {
// Values that a write may change: every buffer written by a MUTATES node and
// every view taken of it, transitively.
std::vector<bool> mutable_values(const Graph& g) {
  const std::vector<int> root = view_roots(g);
  std::vector<bool> written_root(g.values.size(), false);
  for (const Node& n : g.nodes) {
    if (!op_info(n.op).has(MUTATES)) continue;
    // A foreach update writes its whole first list: every input up to the list's length.
    for (int in : n.inputs)
      if (in >= 0) written_root[root[in]] = true;
  }
  std::vector<bool> m(g.values.size());
  for (size_t v = 0; v < m.size(); ++v) m[v] = written_root[root[v]];
  return m;
}
}  // namespace

int common_subexpression_elimination(Graph& g) {
  std::vector<bool> mut = mutable_values(g);
  // Graph outputs stay distinct buffers: the caller may write one of them.
  std::vector<bool> is_output(g.values.size(), false);
  for (int v : g.outputs) is_output[v] = true;
  std::vector<int> replace(g.values.size());
  for (size_t v = 0; v < replace.size(); ++v) replace[v] = static_cast<int>(v);
  std::unordered_multimap<uint64_t, size_t> seen;
  std::vector<bool> drop(g.nodes.size(), false);
  int merged = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    for (int& in : n.inputs)
      if (in >= 0) in = replace[in];
    const OpInfo& info = op_info(n.op);
    if (info.has(MUTATES) || info.has(RANDOM) || n.outputs.empty()) continue;
    bool touches_mutable = false;
    for (int in : n.inputs) touches_mutable = touches_mutable || (in >= 0 && mut[in]);
    for (int o : n.outputs) touches_mutable = touches_mutable || mut[o] || is_output[o];
    if (touches_mutable) continue;
    Hasher h;
    h.mix(static_cast<uint64_t>(n.op));
    for (int in : n.inputs) h.mix(static_cast<uint64_t>(in));
    for (const AttrValue& a : n.attrs.values()) h.mix_attr(a);
    auto [lo, hi] = seen.equal_range(h.h);
    bool found = false;
    for (auto it = lo; it != hi && !found; ++it) {
      const Node& m = g.nodes[it->second];
      if (m.op != n.op || m.no_grad != n.no_grad || m.detached != n.detached || m.inputs != n.inputs ||
          m.attrs.size() != n.attrs.size())
        continue;
      bool same = true;
      for (size_t a = 0; a < n.attrs.size() && same; ++a) same = attr_equal(m.attrs[a], n.attrs[a]);
      // Outputs laid out otherwise (Note [Channels-last graphs]: a channels-last copy beside a
      // contiguous one) are not interchangeable: a view's meta depends on its base's strides.
      for (size_t k = 0; k < n.outputs.size() && same; ++k)
        same = g.values[m.outputs[k]].meta.strides == g.values[n.outputs[k]].meta.strides;
      if (!same) continue;
      for (size_t k = 0; k < n.outputs.size(); ++k) replace[n.outputs[k]] = m.outputs[k];
      found = true;
    }
    if (found) {
      drop[i] = true;
      ++merged;
    } else {
      seen.emplace(h.h, i);
    }
  }
  if (merged == 0) return 0;
  for (int& v : g.outputs) v = replace[v];
  std::vector<Node> nodes;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!drop[i]) nodes.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(nodes);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (int o : g.nodes[i].outputs) g.values[o].node = static_cast<int>(i);
  compact(g);
  return merged;
}

// Note [Copy elision]
// A same-dtype `to` (what clone decomposes to) whose input already has the copy's layout only
// duplicates a buffer in a graph where no value changes. Eager makes such copies to keep
// aliases apart: AccumulateGrad clones a gradient it cannot prove unshared (a tracer has no
// storage to prove it with), so a compiled training step copied every weight's gradient before
// the optimizer read it. The copy's readers read its input instead when nothing can tell them
// apart: neither is written, the copy reaches no graph output (outputs stay distinct buffers),
// and the input is not a graph input or a view of one (an output made from it would alias the
// caller's tensor). Only for graphs that are not differentiated again: a detach()ed copy would
// pass gradient.
int elide_copies(Graph& g) {
  std::vector<bool> mut = mutable_values(g);
  const std::vector<int> root = view_roots(g);
  std::vector<bool> is_input(g.values.size(), false), reaches_output(g.values.size(), false);
  for (int v : g.inputs) is_input[v] = true;
  for (int v : g.outputs) reaches_output[root[v]] = true;
  std::vector<int> replace(g.values.size());
  for (size_t v = 0; v < replace.size(); ++v) replace[v] = static_cast<int>(v);
  int elided = 0;
  for (Node& n : g.nodes) {
    for (int& in : n.inputs)
      if (in >= 0) in = replace[in];
    if ((n.op != OpId::to && n.op != OpId::clone) || n.inputs.size() != 1 || n.outputs.size() != 1 || n.inputs[0] < 0)
      continue;
    const int x = n.inputs[0], y = n.outputs[0];
    const TensorMeta &mx = g.values[x].meta, &my = g.values[y].meta;
    if (mx.dtype != my.dtype || mx.device != my.device || mx.sizes != my.sizes || mx.strides != my.strides) continue;
    if (mut[x] || mut[y] || reaches_output[y] || is_input[root[x]]) continue;
    replace[y] = x;
    ++elided;
  }
  if (elided == 0) return 0;
  for (int& v : g.outputs) v = replace[v];
  dead_code_elimination(g);
  return elided;
}

}  // namespace kiln::compiler
