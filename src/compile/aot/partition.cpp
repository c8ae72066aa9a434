#include "compile/aot/partition.h"

#include <algorithm>
#include <limits>
#include <queue>

namespace kiln::compiler {

namespace {
constexpr int64_t kInf = std::numeric_limits<int64_t>::max() / 4;

// Dinic's max-flow on a small graph.
struct MaxFlow {
  struct Edge {
    int to;
    int64_t cap;
  };
  std::vector<Edge> edges;
  std::vector<std::vector<int>> adj;
  std::vector<int> level, next;
  explicit MaxFlow(int n) : adj(n), level(n), next(n) {}
  void add(int a, int b, int64_t cap) {
    adj[a].push_back(static_cast<int>(edges.size()));
    edges.push_back({b, cap});
    adj[b].push_back(static_cast<int>(edges.size()));
    edges.push_back({a, 0});
  }
  bool bfs(int s, int t) {
    std::fill(level.begin(), level.end(), -1);
    std::queue<int> q;
    level[s] = 0;
    q.push(s);
    while (!q.empty()) {
      int u = q.front();
      q.pop();
      for (int e : adj[u])
        if (edges[e].cap > 0 && level[edges[e].to] < 0) {
          level[edges[e].to] = level[u] + 1;
          q.push(edges[e].to);
        }
    }
    return level[t] >= 0;
  }
  int64_t dfs(int u, int t, int64_t f) {
    if (u == t) return f;
    for (int& i = next[u]; i < static_cast<int>(adj[u].size()); ++i) {
      Edge& e = edges[adj[u][i]];
      if (e.cap <= 0 || level[e.to] != level[u] + 1) continue;
      int64_t d = dfs(e.to, t, std::min(f, e.cap));
      if (d > 0) {
        e.cap -= d;
        edges[adj[u][i] ^ 1].cap += d;
        return d;
      }
    }
    return 0;
  }
  void run(int s, int t) {
    while (bfs(s, t)) {
      std::fill(next.begin(), next.end(), 0);
      while (dfs(s, t, kInf) > 0) {
      }
    }
  }
  // After run(): what the source still reaches in the residual graph.
  std::vector<bool> source_side(int s) {
    std::vector<bool> seen(adj.size(), false);
    std::vector<int> stack{s};
    seen[s] = true;
    while (!stack.empty()) {
      int u = stack.back();
      stack.pop_back();
      for (int e : adj[u])
        if (edges[e].cap > 0 && !seen[edges[e].to]) {
          seen[edges[e].to] = true;
          stack.push_back(edges[e].to);
        }
    }
    return seen;
  }
};

size_t bytes_of(const TensorMeta& m) {
  int64_t n = 1;
  for (int64_t s : m.sizes) n *= s;
  return static_cast<size_t>(n) * itemsize(m.dtype);
}

// Cheap to recompute in the backward: elementwise math, views and fills.
// Matmuls, convolutions, reductions, gathers and sorts are saved instead.
bool recomputable(OpId op) {
  const OpInfo& info = op_info(op);
  return info.has(POINTWISE) || info.has(VIEW) || info.has(FACTORY);
}
}  // namespace

// Note [Recompute where used]
// The backward graph recomputes cheap forward values (batch norm's normalized input, an
// activation's input) from what the forward saved. In the joint's order those nodes come first,
// so run in that order every recomputed tensor of every layer would be live at once, from the
// backward's start to the layer that reads it (mobilenet_v2: 40 MB above the saved tensors, the
// compiled step's peak 30% above eager's). Placed just before their first consumer instead, as
// AOTAutograd reorders its backward to mimic the autograd engine, each lives only across its
// own layer's gradient. The graph is functional, so any topological order computes the same.
Graph extract(const Graph& g, const std::vector<int>& inputs, const std::vector<int>& outputs, size_t sink_before) {
  std::vector<int> input_pos(g.values.size(), -1);
  for (size_t i = 0; i < inputs.size(); ++i) input_pos[inputs[i]] = static_cast<int>(i);
  std::vector<bool> need_node(g.nodes.size(), false);
  std::vector<bool> seen(g.values.size(), false);
  std::vector<int> stack(outputs.begin(), outputs.end());
  while (!stack.empty()) {
    int v = stack.back();
    stack.pop_back();
    if (v < 0 || seen[v]) continue;
    seen[v] = true;
    if (input_pos[v] >= 0) continue;
    int n = g.values[v].node;
    KILN_CHECK(n >= 0, "internal: partition: %", v, " is needed but is neither computed nor an input");
    if (need_node[n]) continue;
    need_node[n] = true;
    for (int in : g.nodes[n].inputs) stack.push_back(in);
  }
  // The order: g's, except that a node below sink_before is emitted when a later one (or an
  // output) first needs it, its own producers first (an explicit stack: chains can be long).
  std::vector<size_t> order;
  order.reserve(g.nodes.size());
  {
    std::vector<bool> emitted(g.nodes.size(), false);
    auto producer = [&](int v) -> int {
      if (v < 0 || input_pos[v] >= 0) return -1;
      const int n = g.values[v].node;
      return n >= 0 && need_node[static_cast<size_t>(n)] ? n : -1;
    };
    auto emit = [&](size_t root) {  // root is marked emitted by the caller
      std::vector<std::pair<size_t, size_t>> stack{{root, 0}};  // node, next input to look at
      while (!stack.empty()) {
        auto& [i, k] = stack.back();
        const Node& n = g.nodes[i];
        if (k < n.inputs.size()) {
          const int p = producer(n.inputs[k++]);
          if (p >= 0 && !emitted[static_cast<size_t>(p)]) {
            emitted[static_cast<size_t>(p)] = true;
            stack.push_back({static_cast<size_t>(p), 0});
          }
          continue;
        }
        order.push_back(i);
        stack.pop_back();
      }
    };
    for (size_t i = 0; i < g.nodes.size(); ++i)
      if (need_node[i] && i >= sink_before && !emitted[i]) {
        emitted[i] = true;
        emit(i);
      }
    for (size_t i = 0; i < g.nodes.size(); ++i)  // what only the outputs read
      if (need_node[i] && !emitted[i]) {
        emitted[i] = true;
        emit(i);
      }
  }
  Graph out;
  std::vector<int> remap(g.values.size(), -1);
  for (int v : inputs)
    remap[v] = out.add_input(g.values[v].meta, g.values[v].requires_grad, g.values[v].wrapped_number);
  std::vector<int> source = g.random_source;
  if (source.empty())
    for (const Node& n : g.nodes)
      if (op_info(n.op).has(RANDOM)) source.push_back(static_cast<int>(source.size()));
  // Each random node keeps its own draw (its index among g's random nodes), whatever the order.
  std::vector<int> random_rank(g.nodes.size(), -1);
  for (size_t i = 0, r = 0; i < g.nodes.size(); ++i)
    if (op_info(g.nodes[i].op).has(RANDOM)) random_rank[i] = static_cast<int>(r++);
  for (size_t i : order) {
    const Node& n = g.nodes[i];
    bool random = random_rank[i] >= 0;
    {
      std::vector<int> ins;
      for (int in : n.inputs) {
        KILN_CHECK(in < 0 || remap[in] >= 0, "internal: partition: %", in, " used before it is available");
        ins.push_back(in < 0 ? -1 : remap[in]);
      }
      std::vector<TensorMeta> metas;
      for (int o : n.outputs) metas.push_back(g.values[o].meta);
      int id = out.add_node(n.op, n.attrs, std::move(ins), metas);
      for (size_t k = 0; k < n.outputs.size(); ++k) remap[n.outputs[k]] = out.nodes[id].outputs[k];
      if (random) out.random_source.push_back(source[static_cast<size_t>(random_rank[i])]);
    }
  }
  for (int v : outputs) out.outputs.push_back(remap[v]);
  return out;
}

Partition min_cut_partition(const Graph& joint, size_t n_primals, size_t n_tangents, size_t n_forward_nodes,
                            size_t n_forward_outputs, bool recompute, const std::vector<bool>& pinned_primals) {
  const int V = static_cast<int>(joint.values.size());
  const size_t n_inputs = joint.inputs.size();
  // Each joint input: 0 primal, 1 tangent, 2 constant.
  std::vector<int> input_kind(V, -1);
  for (size_t i = 0; i < n_inputs; ++i)
    input_kind[joint.inputs[i]] = i < n_primals ? 0 : i < n_primals + n_tangents ? 1 : 2;
  auto non_tangent_index = [&](size_t i) { return static_cast<int>(i < n_primals ? i : i - n_tangents); };
  std::vector<bool> forward_value(V, false);
  for (int v = 0; v < V; ++v) {
    int n = joint.values[v].node;
    forward_value[v] = n >= 0 ? static_cast<size_t>(n) < n_forward_nodes : input_kind[v] == 0;
  }

  // Flow network: v_in = 2v, v_out = 2v + 1. Cutting v_in → v_out saves v.
  const int S = 2 * V, T = 2 * V + 1;
  MaxFlow flow(2 * V + 2);
  std::vector<bool> used_by_backward(V, false);
  for (size_t n = n_forward_nodes; n < joint.nodes.size(); ++n)
    for (int in : joint.nodes[n].inputs)
      if (in >= 0 && forward_value[in]) used_by_backward[in] = true;
  for (size_t k = n_forward_outputs; k < joint.outputs.size(); ++k)
    if (forward_value[joint.outputs[k]]) used_by_backward[joint.outputs[k]] = true;
  // Note [Saved versions]: a pinned primal is saved only where the backward reads it itself,
  // never to recompute from it; so is a view of it (expand(w) of matmul's broadcast), which is its
  // storage and version counter too (eager saved a copy).
  std::vector<bool> pinned(V, false);
  for (int v = 0; v < V; ++v)
    if (forward_value[v] && joint.values[v].node < 0) {
      const size_t i = static_cast<size_t>(joint.values[v].index);
      pinned[v] = i < pinned_primals.size() && pinned_primals[i];
    }
  for (size_t n = 0; n < n_forward_nodes; ++n) {
    const Node& node = joint.nodes[n];
    if (op_info(node.op).has(VIEW) && !node.inputs.empty() && node.inputs[0] >= 0 && pinned[node.inputs[0]])
      for (int o : node.outputs) pinned[o] = true;
  }
  for (int v = 0; v < V; ++v) {
    if (!forward_value[v]) continue;
    int n = joint.values[v].node;
    if (n < 0) {
      flow.add(S, 2 * v, kInf);  // a primal: the caller holds it, saving it is free
      flow.add(2 * v, 2 * v + 1, pinned[v] ? kInf / 1024 : 0);  // unless it is pinned
    } else {
      if (!recompute || !recomputable(joint.nodes[n].op)) flow.add(S, 2 * v, kInf);
      flow.add(2 * v, 2 * v + 1, pinned[v] ? kInf / 1024 : static_cast<int64_t>(bytes_of(joint.values[v].meta)) + 1);
    }
    if (used_by_backward[v]) flow.add(2 * v + 1, T, kInf);
  }
  for (size_t n = 0; n < n_forward_nodes; ++n)
    for (int in : joint.nodes[n].inputs)
      if (in >= 0 && forward_value[in])
        for (int o : joint.nodes[n].outputs) flow.add(2 * in + 1, 2 * o, kInf);
  flow.run(S, T);
  std::vector<bool> reach = flow.source_side(S);
  std::vector<bool> cut(V, false);
  for (int v = 0; v < V; ++v) cut[v] = forward_value[v] && reach[2 * v] && !reach[2 * v + 1];

  Partition p;
  // Backward: from the gradients, stopping at cut values, tangents and constants.
  std::vector<int> grad_values(joint.outputs.begin() + static_cast<long>(n_forward_outputs), joint.outputs.end());
  std::vector<int> candidates;
  for (int v = 0; v < V; ++v)
    if (cut[v]) candidates.push_back(v);
  // Which candidates the backward reaches (a cut value may be unneeded, e.g. a primal).
  std::vector<bool> reached(V, false);
  {
    std::vector<bool> stop(V, false);
    for (int v : candidates) stop[v] = true;
    for (size_t i = n_primals; i < n_inputs; ++i) stop[joint.inputs[i]] = true;
    std::vector<bool> seen(V, false);
    std::vector<int> stack = grad_values;
    while (!stack.empty()) {
      int v = stack.back();
      stack.pop_back();
      if (v < 0 || seen[v]) continue;
      seen[v] = true;
      if (stop[v]) {
        reached[v] = true;
        continue;
      }
      int n = joint.values[v].node;
      KILN_CHECK(n >= 0, "internal: partition: the backward needs primal %", v, " that the cut did not save");
      for (int in : joint.nodes[n].inputs) stack.push_back(in);
    }
  }
  std::vector<int> saved_values;
  for (int v : candidates)
    if (reached[v]) saved_values.push_back(v);
  std::vector<int> bwd_inputs = saved_values;
  for (size_t i = n_primals; i < n_primals + n_tangents; ++i) bwd_inputs.push_back(joint.inputs[i]);
  for (size_t i = n_primals + n_tangents; i < n_inputs; ++i)
    if (reached[joint.inputs[i]]) {
      bwd_inputs.push_back(joint.inputs[i]);
      p.backward_constants.push_back(non_tangent_index(i));
    }
  p.backward = extract(joint, bwd_inputs, grad_values, n_forward_nodes);  // Note [Recompute where used]
  for (size_t j = 0; j < grad_values.size(); ++j) p.backward_outputs.push_back(static_cast<int>(n_forward_outputs + j));

  // Forward: the joint's forward outputs, then the saved intermediates.
  std::vector<int> fwd_inputs;
  for (size_t i = 0; i < n_inputs; ++i)
    if (input_kind[joint.inputs[i]] != 1) {
      fwd_inputs.push_back(joint.inputs[i]);
      p.forward_inputs.push_back(non_tangent_index(i));
    }
  std::vector<int> fwd_outputs(joint.outputs.begin(), joint.outputs.begin() + static_cast<long>(n_forward_outputs));
  for (int v : saved_values) {
    if (joint.values[v].node < 0) {
      size_t i = static_cast<size_t>(joint.values[v].index);
      p.saved.push_back(SavedSource{true, non_tangent_index(i)});
    } else {
      p.saved.push_back(SavedSource{false, static_cast<int>(fwd_outputs.size())});
      fwd_outputs.push_back(v);
    }
  }
  // Bytes the saved tensors keep alive: a view keeps its base, and a view of a primal (a
  // parameter's transpose) keeps nothing the caller does not hold anyway.
  {
    std::vector<int> root(V);
    for (int v = 0; v < V; ++v) root[v] = v;
    for (size_t n = 0; n < n_forward_nodes; ++n) {
      const Node& node = joint.nodes[n];
      if (op_info(node.op).has(VIEW) && !node.inputs.empty() && node.inputs[0] >= 0)
        for (int o : node.outputs) root[o] = root[node.inputs[0]];
    }
    std::vector<bool> counted(V, false);
    for (int v : saved_values) {
      int r = root[v];
      if (joint.values[r].node < 0 || counted[r]) continue;
      counted[r] = true;
      p.saved_bytes += bytes_of(joint.values[r].meta);
    }
  }
  p.forward = extract(joint, fwd_inputs, fwd_outputs);
  for (size_t n = 0; n < n_forward_nodes; ++n)
    if (!op_info(joint.nodes[n].op).has(VIEW))
      for (int o : joint.nodes[n].outputs) p.saveall_bytes += bytes_of(joint.values[o].meta);
  return p;
}

}  // namespace kiln::compiler
