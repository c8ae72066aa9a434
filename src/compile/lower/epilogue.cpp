// Note [GEMM epilogues] (src/ops/linalg.cpp): the pass over inductor's pure prim graphs.
//
// A chain is  mm -> [view to N-D] -> add(bias [n]) -> [activation] -> [add(residual)],  float32.
// The activation is recognized by its decomposition: each candidate's prims are traced on a
// placeholder of the chain's shape, exactly as the AOT retrace decomposed it, and matched node
// for node, the scalars it made constants by value (Graph::input_constants). So the pass knows
// no formula of its own and follows the decompositions when they change.
// Every value inside the chain must be used only by the chain. The one exception is the
// pre-activation value a training graph saves for the backward (gelu's and silu's VJPs read
// their input): then only the bias is fused, the GEMM's output is that value, and the
// activation stays a generated loop that reads it (the loop no longer writes it).
#include "compile/lower/epilogue.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <sstream>

#include "compile/capture/recording.h"
#include "compile/ir/hash.h"
#include "core/tensor_impl.h"
#include "kiln/autograd.h"
#include "kiln/ops/pointwise.h"

namespace kiln::compiler::lower {
namespace {

std::atomic<int64_t> g_fused{0};

struct Uses {
  std::vector<std::vector<int>> nodes;  // per value: the nodes reading it (once per node)
  std::vector<bool> output;             // per value: a graph output
  explicit Uses(const Graph& g) : nodes(g.values.size()), output(g.values.size(), false) {
    for (size_t n = 0; n < g.nodes.size(); ++n)
      for (int v : g.nodes[n].inputs)
        if (v >= 0 && (nodes[v].empty() || nodes[v].back() != static_cast<int>(n)))
          nodes[v].push_back(static_cast<int>(n));
    for (int v : g.outputs) output[static_cast<size_t>(v)] = true;
  }
  // The one node reading v, where v is no graph output and exactly one node reads it.
  int only(int v) const {
    return !output[static_cast<size_t>(v)] && nodes[static_cast<size_t>(v)].size() == 1
               ? nodes[static_cast<size_t>(v)][0]
               : -1;
  }
};

bool is_f32_cpu(const TensorMeta& m) { return m.dtype == DType::Float32 && m.device.is_cpu(); }
bool alpha_one(const Node& n) { return n.attrs.size() == 1 && n.attrs.s(0) == Scalar(1); }

// One activation's prims, traced on a placeholder of meta `m` (input 0; its constants follow).
struct Pattern {
  Graph g;
  std::vector<Tensor> constants;  // of g's inputs 1..
};
Pattern trace_activation(const std::string& act, const TensorMeta& m) {
  Recording rec(nullptr, /*decompose=*/true);
  NoGradGuard no_grad;
  Tensor x = rec.placeholder(TensorMeta{m.sizes, m.dtype, m.device, {}, 0}, false);
  Tensor y = act == "relu" ? relu(x) : act == "gelu" ? gelu(x) : act == "gelu_tanh" ? gelu(x, "tanh") : silu(x);
  Pattern p;
  p.g = rec.take({y}, &p.constants);
  return p;
}

bool same_constant(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.dtype() == b.dtype() && a.numel() == 1 && b.numel() == 1 &&
         a.to_vector<double>() == b.to_vector<double>();
}

// Matches pattern p at value x of g: the nodes it covers and the value of its output.
struct Match {
  std::vector<int> nodes;
  int out = -1;
};
std::optional<Match> match(const Graph& g, const Uses& uses, const Pattern& p, int x) {
  std::vector<int> map(p.g.values.size(), -1);
  std::vector<int> constant(p.g.values.size(), -1);  // pattern value -> index in p.constants
  map[static_cast<size_t>(p.g.inputs[0])] = x;
  for (size_t i = 1; i < p.g.inputs.size(); ++i) constant[static_cast<size_t>(p.g.inputs[i])] = static_cast<int>(i - 1);
  std::vector<int> input_of(g.values.size(), -1);  // target value -> its graph input position
  for (size_t i = 0; i < g.inputs.size(); ++i) input_of[static_cast<size_t>(g.inputs[i])] = static_cast<int>(i);
  auto constant_matches = [&](int pv, int tv) {
    const int i = input_of[static_cast<size_t>(tv)];
    return i >= 0 && static_cast<size_t>(i) < g.input_constants.size() &&
           same_constant(p.constants[static_cast<size_t>(constant[static_cast<size_t>(pv)])],
                         g.input_constants[static_cast<size_t>(i)]);
  };
  Match m;
  for (const Node& pn : p.g.nodes) {
    int anchor = -1;
    for (int pv : pn.inputs)
      if (pv >= 0 && constant[static_cast<size_t>(pv)] < 0) anchor = map[static_cast<size_t>(pv)];
    if (anchor < 0) return std::nullopt;
    int found = -1;
    for (int tn : uses.nodes[static_cast<size_t>(anchor)]) {
      const Node& t = g.nodes[static_cast<size_t>(tn)];
      if (t.op != pn.op || t.inputs.size() != pn.inputs.size() || t.attrs.size() != pn.attrs.size() ||
          t.outputs.size() != pn.outputs.size())
        continue;
      bool ok = true;
      for (size_t a = 0; a < t.attrs.size() && ok; ++a) ok = attr_equal(t.attrs[a], pn.attrs[a]);
      for (size_t k = 0; k < t.inputs.size() && ok; ++k) {
        const int pv = pn.inputs[k], tv = t.inputs[k];
        if (pv < 0 || tv < 0)
          ok = pv == tv;
        else if (constant[static_cast<size_t>(pv)] >= 0)
          ok = constant_matches(pv, tv);
        else
          ok = map[static_cast<size_t>(pv)] == tv;
      }
      if (ok) {
        found = tn;
        break;
      }
    }
    if (found < 0) return std::nullopt;
    for (size_t k = 0; k < pn.outputs.size(); ++k)
      map[static_cast<size_t>(pn.outputs[k])] = g.nodes[static_cast<size_t>(found)].outputs[k];
    m.nodes.push_back(found);
  }
  m.out = map[static_cast<size_t>(p.g.outputs[0])];
  // Nothing outside reads what the chain computes before its output.
  for (int n : m.nodes)
    for (int v : g.nodes[static_cast<size_t>(n)].outputs) {
      if (v == m.out) continue;
      if (uses.output[static_cast<size_t>(v)]) return std::nullopt;
      for (int r : uses.nodes[static_cast<size_t>(v)])
        if (std::find(m.nodes.begin(), m.nodes.end(), r) == m.nodes.end()) return std::nullopt;
    }
  return m;
}

// One chain to rewrite: the nodes it removes, the new node's inputs and the value it replaces.
struct Rewrite {
  std::vector<int> removed;  // mm, view, bias add, activation, residual add (as present)
  int a = -1, b = -1, bias = -1, residual = -1;
  std::string act = "none";
  int result = -1;         // the value the fused chain produces (N-D where a view was matched)
  int view = -1;           // the mm's view node, or -1
  int at = -1;             // the node where the new ones go: the chain's last
  bool saved_pre = false;  // an activation follows, but its input is read elsewhere too
};

std::optional<Rewrite> find_chain(const Graph& g, const Uses& uses, const Node& mm) {
  Rewrite r;
  const TensorMeta& mm_meta = g.values[static_cast<size_t>(mm.outputs[0])].meta;
  if (!is_f32_cpu(mm_meta) || mm_meta.sizes.size() != 2) return std::nullopt;
  const int64_t n = mm_meta.sizes[1];
  int v = mm.outputs[0], next = uses.only(v);
  if (next < 0) return std::nullopt;
  r.a = mm.inputs[0];
  r.b = mm.inputs[1];
  if (g.nodes[static_cast<size_t>(next)].op == OpId::view) {
    // linear on an N-D input: the GEMM on the rows, viewed back to N-D (the bias add comes after).
    const TensorMeta& vm = g.values[static_cast<size_t>(g.nodes[static_cast<size_t>(next)].outputs[0])].meta;
    if (vm.sizes.empty() || vm.sizes.back() != n) return std::nullopt;
    r.view = next;
    r.removed.push_back(next);
    v = g.nodes[static_cast<size_t>(next)].outputs[0];
    next = uses.only(v);
    if (next < 0) return std::nullopt;
  }
  const Node& add = g.nodes[static_cast<size_t>(next)];
  if (add.op != OpId::add || !alpha_one(add) || add.inputs[0] == add.inputs[1]) return std::nullopt;
  r.bias = add.inputs[0] == v ? add.inputs[1] : add.inputs[0];
  const TensorMeta& bm = g.values[static_cast<size_t>(r.bias)].meta;
  const TensorMeta& xm = g.values[static_cast<size_t>(add.outputs[0])].meta;
  if (!is_f32_cpu(bm) || bm.sizes != Shape{n} || !is_f32_cpu(xm) ||
      xm.sizes != g.values[static_cast<size_t>(v)].meta.sizes)
    return std::nullopt;
  r.removed.push_back(next);
  r.at = next;
  const int x = add.outputs[0];
  r.result = x;
  // The activation, where nothing else reads the pre-activation value.
  bool pre_only_chain = !uses.output[static_cast<size_t>(x)];
  if (pre_only_chain) {
    for (const char* act : {"relu", "gelu", "gelu_tanh", "silu"}) {
      std::optional<Match> m = match(g, uses, trace_activation(act, xm), x);
      if (!m) continue;
      // Every reader of x is in the match.
      bool covered = true;
      for (int rd : uses.nodes[static_cast<size_t>(x)])
        covered = covered && std::find(m->nodes.begin(), m->nodes.end(), rd) != m->nodes.end();
      if (!covered) continue;
      r.act = act;
      r.result = m->out;
      for (int k : m->nodes) r.removed.push_back(k);
      r.at = *std::max_element(m->nodes.begin(), m->nodes.end());
      break;
    }
  }
  r.saved_pre = r.act == "none" && uses.nodes[static_cast<size_t>(x)].size() + uses.output[static_cast<size_t>(x)] > 1;
  // A residual add after it (the pre-activation value, if saved, stops here: its reader is not
  // the add).
  const int radd = uses.only(r.result);
  if (radd >= 0 && (r.act != "none" || pre_only_chain)) {
    const Node& ra = g.nodes[static_cast<size_t>(radd)];
    const int other = ra.op == OpId::add && ra.inputs[0] == r.result ? ra.inputs[1]
                      : ra.op == OpId::add                           ? ra.inputs[0]
                                                                     : -1;
    if (other >= 0 && other != r.result && alpha_one(ra)) {
      const TensorMeta& om = g.values[static_cast<size_t>(other)].meta;
      const Value& ov = g.values[static_cast<size_t>(other)];
      // N-D: the residual is viewed as [m, n], so it must be a buffer of its own (a non-view node's
      // output, contiguous); 2-D: any strides (the kernel reads them).
      const bool own_buffer = ov.node >= 0 && !op_info(g.nodes[static_cast<size_t>(ov.node)].op).has(VIEW);
      if (is_f32_cpu(om) && om.sizes == xm.sizes && (r.view < 0 || own_buffer) &&
          g.values[static_cast<size_t>(ra.outputs[0])].meta.sizes == xm.sizes) {
        r.residual = other;
        r.removed.push_back(radd);
        r.at = radd;
        r.result = ra.outputs[0];
      }
    }
  }
  return r;
}

}  // namespace

int fuse_gemm_epilogues(Graph& g, std::string* report) {
  if (g.is_symbolic()) return 0;
  std::vector<Rewrite> rewrites;
  {
    const Uses uses(g);
    std::vector<bool> taken(g.nodes.size(), false);
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (g.nodes[i].op != OpId::mm) continue;
      std::optional<Rewrite> r = find_chain(g, uses, g.nodes[i]);
      if (!r) continue;
      r->removed.push_back(static_cast<int>(i));
      bool free = true;
      for (int n : r->removed) free = free && !taken[static_cast<size_t>(n)];
      if (!free) continue;
      for (int n : r->removed) taken[static_cast<size_t>(n)] = true;
      rewrites.push_back(std::move(*r));
    }
  }
  if (rewrites.empty()) return 0;
  // Rebuild in order: removed nodes go, and each chain's new nodes take its last node's place.
  std::vector<int> anchor(g.nodes.size(), -1);
  std::vector<bool> removed(g.nodes.size(), false);
  for (size_t k = 0; k < rewrites.size(); ++k) {
    anchor[static_cast<size_t>(rewrites[k].at)] = static_cast<int>(k);
    for (int n : rewrites[k].removed) removed[static_cast<size_t>(n)] = true;
  }
  Graph out;
  std::vector<int> remap(g.values.size(), -1);
  for (int v : g.inputs)
    remap[static_cast<size_t>(v)] =
        out.add_input(g.values[static_cast<size_t>(v)].meta, g.values[static_cast<size_t>(v)].requires_grad,
                      g.values[static_cast<size_t>(v)].wrapped_number);
  auto emit = [&](OpId op, Attrs attrs, std::vector<int> ins, const TensorMeta& m) {
    return out.nodes[static_cast<size_t>(out.add_node(op, std::move(attrs), std::move(ins), {m}))].outputs[0];
  };
  std::ostringstream log;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (anchor[i] >= 0) {
      const Rewrite& r = rewrites[static_cast<size_t>(anchor[i])];
      const TensorMeta& mm_meta =
          g.values[static_cast<size_t>(g.nodes[static_cast<size_t>(r.removed.back())].outputs[0])].meta;
      const TensorMeta flat{mm_meta.sizes, DType::Float32, mm_meta.device, {}, 0};
      int res = -1;
      if (r.residual >= 0) {
        res = remap[static_cast<size_t>(r.residual)];
        if (r.view >= 0)
          res = emit(OpId::view, Attrs{std::vector<int64_t>(flat.sizes.begin(), flat.sizes.end())}, {res},
                     TensorMeta{flat.sizes, DType::Float32, flat.device, contiguous_strides(flat.sizes), 0});
      }
      int y = emit(
          OpId::_addmm_epilogue, Attrs{r.act},
          {remap[static_cast<size_t>(r.bias)], remap[static_cast<size_t>(r.a)], remap[static_cast<size_t>(r.b)], res},
          flat);
      if (r.view >= 0) {
        const Node& vn = g.nodes[static_cast<size_t>(r.view)];
        y = emit(OpId::view, vn.attrs, {y}, g.values[static_cast<size_t>(vn.outputs[0])].meta);
      }
      remap[static_cast<size_t>(r.result)] = y;
      log << "  epilogue: mm " << shape_str(flat.sizes) << " + bias" << (r.act != "none" ? " + " + r.act : "")
          << (r.residual >= 0 ? " + residual" : "") << " -> _addmm_epilogue (" << r.removed.size() << " nodes)"
          << (r.saved_pre
                  ? "; the pre-activation value has other readers (saved for the backward?): activation not fused"
                  : "")
          << "\n";
    }
    if (removed[i]) continue;
    const Node& n = g.nodes[i];
    std::vector<int> ins;
    for (int v : n.inputs) ins.push_back(v < 0 ? -1 : remap[static_cast<size_t>(v)]);
    std::vector<TensorMeta> metas;
    for (int o : n.outputs) metas.push_back(g.values[static_cast<size_t>(o)].meta);
    const int id = out.add_node(n.op, n.attrs, std::move(ins), metas);
    out.nodes[static_cast<size_t>(id)].no_grad = n.no_grad;
    out.nodes[static_cast<size_t>(id)].detached = n.detached;
    for (size_t k = 0; k < n.outputs.size(); ++k)
      remap[static_cast<size_t>(n.outputs[k])] = out.nodes[static_cast<size_t>(id)].outputs[k];
  }
  for (int v : g.outputs) out.outputs.push_back(remap[static_cast<size_t>(v)]);
  out.random_source = std::move(g.random_source);
  out.write_targets = std::move(g.write_targets);
  out.input_constants = std::move(g.input_constants);
  g = std::move(out);
  g.verify();
  if (report) *report += log.str();
  g_fused.fetch_add(static_cast<int64_t>(rewrites.size()), std::memory_order_relaxed);
  return static_cast<int>(rewrites.size());
}

int64_t gemm_epilogues_fused() { return g_fused.load(std::memory_order_relaxed); }

}  // namespace kiln::compiler::lower
