#include "compile/lower/schedule.h"

#include <algorithm>
#include <functional>
#include <sstream>
#include <string_view>

#include "compile/codegen/pointwise_ops.h"
#include "ops/meta_util.h"

namespace kiln::compiler::lower {

// Note [Loop kernels]
// The scheduler walks the graph in order and keeps one kernel open: a group of
// nodes over one iteration space, the output shape of its pointwise nodes (and
// the input shape of its reductions). A pointwise prim of that shape joins it
// (vertically when it reads a member, horizontally when not), as does a
// reduction of an input of that shape over the group's reduced dims (so
// sum(x) and sum(x * x) share one pass). A member's value that a later node
// outside the kernel reads, or the graph returns, is stored; the others live in
// registers. The kernel closes when a node of another shape arrives, when an
// extern call reads one of its values, or when a node reads one of its
// reductions (a reduction's value is complete only after the loop). An extern
// that reads nothing of the open kernel runs before it, so siblings on either
// side of a matmul still fuse. Each kernel step runs where it closed: every value
// it reads was produced earlier, every consumer of its stores comes later.

int64_t Kernel::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

std::vector<int64_t> value_strides(const Value& v) {
  if (!v.meta.strides.empty()) return std::vector<int64_t>(v.meta.strides.begin(), v.meta.strides.end());
  std::vector<int64_t> st(v.meta.sizes.size());
  int64_t s = 1;
  for (size_t d = st.size(); d-- > 0;) {
    st[d] = s;
    s *= v.meta.sizes[d];
  }
  return st;
}

namespace {

bool is_reduction(const Graph& g, const Node& n) {
  std::string_view name = op_info(n.op).name;
  if (name != "sum" && name != "prod" && name != "amax" && name != "amin") return false;
  if (n.inputs.size() != 1 || n.inputs[0] < 0 || n.outputs.size() != 1) return false;
  const Value& x = g.values[static_cast<size_t>(n.inputs[0])];
  return x.meta.device.type == DeviceType::CPU;
}

struct Group {
  Shape shape;
  std::vector<bool> mask;  // reduced dims of `shape`; empty while the group has no reduction
  bool keepdim = false;
  std::vector<int> nodes;
  std::vector<int> reduction_outputs;
};

std::vector<bool> reduce_mask(const Graph& g, const Node& n) {
  const Value& x = g.values[static_cast<size_t>(n.inputs[0])];
  return dim_mask(n.attrs.ints(0), static_cast<int64_t>(x.meta.sizes.size()), op_info(n.op).name);
}

// The strides of value v read at every point of `shape` (v broadcasts to it).
std::vector<int64_t> broadcast_strides(const Value& v, const Shape& shape) {
  std::vector<int64_t> vs = value_strides(v), out(shape.size(), 0);
  const size_t r = shape.size(), q = v.meta.sizes.size();
  for (size_t d = 0; d < r; ++d) {
    if (d + q < r) continue;
    const size_t k = d + q - r;
    out[d] = v.meta.sizes[k] == 1 ? 0 : vs[k];
  }
  return out;
}

// A reduction output's strides over its input's dims: 0 along reduced dims.
std::vector<int64_t> reduced_strides(const Value& out, const std::vector<bool>& mask) {
  std::vector<int64_t> os = value_strides(out), st(mask.size(), 0);
  const bool keepdim = out.meta.sizes.size() == mask.size();
  size_t k = 0;
  for (size_t d = 0; d < mask.size(); ++d) {
    if (keepdim) {
      st[d] = mask[d] ? 0 : os[d];
    } else if (!mask[d]) {
      st[d] = os[k++];
    }
  }
  return st;
}

// Where each node runs: node_group[n] (-1: extern or inlined), and for an inlined node the
// groups that recompute it.
struct Placement {
  std::vector<int> node_group;
  std::vector<bool> inlined;
  std::vector<std::vector<int>> inline_groups;
  bool runs_outside(int consumer, int gi) const {
    const auto c = static_cast<size_t>(consumer);
    if (!inlined[c]) return node_group[c] != gi;
    for (int other : inline_groups[c])
      if (other != gi) return true;
    return false;
  }
};

Kernel build_kernel(const Graph& g, const Group& grp, const Placement& place, int gi,
                    const std::vector<std::vector<int>>& consumers, const std::vector<bool>& is_output) {
  Kernel k;
  k.nodes = grp.nodes;
  std::vector<bool> mask = grp.mask.empty() ? std::vector<bool>(grp.shape.size(), false) : grp.mask;
  std::vector<bool> produced(g.values.size(), false);
  for (int n : grp.nodes)
    for (int v : g.nodes[static_cast<size_t>(n)].outputs) produced[static_cast<size_t>(v)] = true;
  std::vector<std::vector<int64_t>> load_st, store_st;
  std::vector<bool> loaded(g.values.size(), false);
  for (int n : grp.nodes) {
    const Node& node = g.nodes[static_cast<size_t>(n)];
    for (int v : node.inputs) {
      if (produced[static_cast<size_t>(v)] || loaded[static_cast<size_t>(v)]) continue;
      loaded[static_cast<size_t>(v)] = true;
      const Value& val = g.values[static_cast<size_t>(v)];
      k.loads.push_back({v, {}});
      load_st.push_back(broadcast_strides(val, grp.shape));
      TensorMeta m = val.meta;
      m.strides = value_strides(val);
      k.load_metas.push_back(m);
    }
  }
  const bool reduction_group = !grp.mask.empty();
  for (int n : grp.nodes) {
    const Node& node = g.nodes[static_cast<size_t>(n)];
    const int v = node.outputs[0];
    if (place.inlined[static_cast<size_t>(n)]) continue;  // recomputed where it is read, never stored
    bool used_outside = is_output[static_cast<size_t>(v)];
    for (int c : consumers[static_cast<size_t>(v)]) used_outside = used_outside || place.runs_outside(c, gi);
    if (!used_outside) continue;
    const bool red = reduction_group && is_reduction(g, node);
    k.stores.push_back({v, {}});
    store_st.push_back(red ? reduced_strides(g.values[static_cast<size_t>(v)], mask)
                           : broadcast_strides(g.values[static_cast<size_t>(v)], grp.shape));
  }
  // Kept dims outside, reduced dims inside; size-1 dims dropped; neighbours of one class merged
  // where every operand steps through them as through one dim.
  std::vector<size_t> order;
  for (size_t d = 0; d < mask.size(); ++d)
    if (!mask[d] && grp.shape[d] != 1) order.push_back(d);
  const size_t kept = order.size();
  for (size_t d = 0; d < mask.size(); ++d)
    if (mask[d] && grp.shape[d] != 1) order.push_back(d);
  std::vector<int64_t> sizes;
  std::vector<bool> cls;
  std::vector<std::vector<int64_t>*> all;
  for (auto& s : load_st) all.push_back(&s);
  for (auto& s : store_st) all.push_back(&s);
  std::vector<std::vector<int64_t>> perm(all.size());
  for (size_t i = 0; i < order.size(); ++i) {
    const size_t d = order[i];
    const bool c = i >= kept;
    bool merge = !sizes.empty() && cls.back() == c;
    for (size_t o = 0; merge && o < all.size(); ++o)
      merge = perm[o].back() == (*all[o])[d] * grp.shape[d];
    if (merge) {
      sizes.back() *= grp.shape[d];
      for (size_t o = 0; o < all.size(); ++o) perm[o].back() = (*all[o])[d];
    } else {
      sizes.push_back(grp.shape[d]);
      cls.push_back(c);
      for (size_t o = 0; o < all.size(); ++o) perm[o].push_back((*all[o])[d]);
    }
  }
  k.sizes = sizes;
  k.num_reduced = static_cast<int>(std::count(cls.begin(), cls.end(), true));
  for (size_t i = 0; i < k.loads.size(); ++i) k.loads[i].strides = perm[i];
  for (size_t i = 0; i < k.stores.size(); ++i) k.stores[i].strides = perm[k.loads.size() + i];
  return k;
}

}  // namespace

Schedule schedule(const Graph& g) {
  Schedule s;
  const size_t nv = g.values.size();
  std::vector<std::vector<int>> consumers(nv);
  for (size_t n = 0; n < g.nodes.size(); ++n)
    for (int v : g.nodes[n].inputs)
      if (v >= 0) consumers[static_cast<size_t>(v)].push_back(static_cast<int>(n));
  std::vector<bool> is_output(nv, false);
  for (int v : g.outputs) is_output[static_cast<size_t>(v)] = true;

  // Note [Inlined producers]: a pointwise node whose every reader is a loop node over a larger
  // iteration space (a normalization's per-row scale read by the whole row), directly or through
  // such nodes of its own shape, is not a loop of its own: each reading kernel recomputes it at
  // the broadcast index, as Inductor inlines cheap pointwise producers.
  auto iteration_numel = [&](const Node& n) {
    const bool red = is_reduction(g, n);
    const Shape& sz = g.values[static_cast<size_t>(red ? n.inputs[0] : n.outputs[0])].meta.sizes;
    int64_t k = 1;
    for (int64_t d : sz) k *= d;
    return k;
  };
  std::vector<bool> kernelizable(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    kernelizable[i] = codegen::is_codegen_pointwise(g, g.nodes[i]) || is_reduction(g, g.nodes[i]);
  Placement place;
  place.node_group.assign(g.nodes.size(), -1);
  place.inlined.assign(g.nodes.size(), false);
  place.inline_groups.resize(g.nodes.size());
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    if (!codegen::is_codegen_pointwise(g, n) || is_output[static_cast<size_t>(n.outputs[0])]) continue;
    const auto& cs = consumers[static_cast<size_t>(n.outputs[0])];
    bool ok = !cs.empty();
    const int64_t mine = iteration_numel(n);
    for (int c : cs) {
      const Node& cn = g.nodes[static_cast<size_t>(c)];
      ok = ok && kernelizable[static_cast<size_t>(c)] &&
           ((place.inlined[static_cast<size_t>(c)] && iteration_numel(cn) == mine) || iteration_numel(cn) > mine);
    }
    place.inlined[i] = ok;
  }
  // The inlined nodes node n reads, transitively, inputs first.
  auto closure = [&](int n) {
    std::vector<int> out;
    std::function<void(int)> visit = [&](int m) {
      for (int v : g.nodes[static_cast<size_t>(m)].inputs) {
        if (v < 0) continue;
        const int p = g.values[static_cast<size_t>(v)].node;
        if (p < 0 || !place.inlined[static_cast<size_t>(p)]) continue;
        if (std::find(out.begin(), out.end(), p) != out.end()) continue;
        visit(p);
        if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
      }
    };
    visit(n);
    return out;
  };

  std::vector<Group> groups;
  std::vector<int>& node_group = place.node_group;
  std::vector<int> value_group(nv, -1);
  std::vector<bool> reduction_value(nv, false);
  int open = -1;
  std::vector<Step> steps;  // kernel steps hold group indices until kernels are built
  auto close = [&] {
    if (open >= 0) steps.push_back({true, open});
    open = -1;
  };
  auto reads = [&](const Node& n, int gi, bool reductions_only) {
    for (int v : n.inputs)
      if (v >= 0 && value_group[static_cast<size_t>(v)] == gi && (!reductions_only || reduction_value[static_cast<size_t>(v)]))
        return true;
    return false;
  };
  // Whether node n, or a producer it inlines, reads a reduction of group gi (not complete inside its loop).
  auto reads_reduction = [&](int n, const std::vector<int>& pulls, int gi) {
    if (gi < 0) return false;
    if (reads(g.nodes[static_cast<size_t>(n)], gi, true)) return true;
    for (int p : pulls)
      if (reads(g.nodes[static_cast<size_t>(p)], gi, true)) return true;
    return false;
  };
  auto join = [&](int gi, int n, const std::vector<int>& pulls) {
    Group& grp = groups[static_cast<size_t>(gi)];
    for (int p : pulls) {
      if (std::find(grp.nodes.begin(), grp.nodes.end(), p) != grp.nodes.end()) continue;
      grp.nodes.push_back(p);
      place.inline_groups[static_cast<size_t>(p)].push_back(gi);
    }
    grp.nodes.push_back(n);
    node_group[static_cast<size_t>(n)] = gi;
    for (int v : g.nodes[static_cast<size_t>(n)].outputs) value_group[static_cast<size_t>(v)] = gi;
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    const int ni = static_cast<int>(i);
    if (place.inlined[i]) continue;  // placed by its readers
    if (codegen::is_codegen_pointwise(g, n)) {
      const Shape& shape = g.values[static_cast<size_t>(n.outputs[0])].meta.sizes;
      std::vector<int> pulls = closure(ni);
      if (open < 0 || groups[static_cast<size_t>(open)].shape != shape || reads_reduction(ni, pulls, open)) {
        close();
        groups.push_back({shape, {}, false, {}, {}});
        open = static_cast<int>(groups.size()) - 1;
      }
      join(open, ni, pulls);
    } else if (is_reduction(g, n)) {
      const Shape& shape = g.values[static_cast<size_t>(n.inputs[0])].meta.sizes;
      std::vector<bool> mask = reduce_mask(g, n);
      std::vector<int> pulls = closure(ni);
      bool fits = open >= 0 && groups[static_cast<size_t>(open)].shape == shape && !reads_reduction(ni, pulls, open) &&
                  (groups[static_cast<size_t>(open)].mask.empty() || groups[static_cast<size_t>(open)].mask == mask);
      if (!fits) {
        close();
        groups.push_back({shape, {}, false, {}, {}});
        open = static_cast<int>(groups.size()) - 1;
      }
      groups[static_cast<size_t>(open)].mask = mask;
      join(open, ni, pulls);
      reduction_value[static_cast<size_t>(n.outputs[0])] = true;
    } else {
      if (open >= 0 && (reads(n, open, false) || op_info(n.op).has(MUTATES))) close();
      steps.push_back({false, ni});
      ++s.extern_nodes;
    }
  }
  close();
  std::vector<int> kernel_of(groups.size(), -1);
  for (Step& st : steps) {
    if (!st.is_kernel) {
      s.steps.push_back(st);
      continue;
    }
    const Group& grp = groups[static_cast<size_t>(st.index)];
    s.kernels.push_back(build_kernel(g, grp, place, st.index, consumers, is_output));
    s.fused_nodes += static_cast<int>(grp.nodes.size());
    s.steps.push_back({true, static_cast<int>(s.kernels.size()) - 1});
  }
  return s;
}

std::string Schedule::str(const Graph& g) const {
  std::ostringstream os;
  os << "schedule: " << kernels.size() << " kernels (" << fused_nodes << " nodes), " << extern_nodes
     << " extern calls\n";
  for (const Step& st : steps) {
    if (!st.is_kernel) {
      os << "  extern " << op_info(g.nodes[static_cast<size_t>(st.index)].op).name << "\n";
      continue;
    }
    const Kernel& k = kernels[static_cast<size_t>(st.index)];
    os << "  kernel " << st.index << " [";
    for (size_t d = 0; d < k.sizes.size(); ++d) os << (d ? ", " : "") << k.sizes[d];
    os << "]" << (k.num_reduced ? " reduces " + std::to_string(k.num_reduced) + " dims" : "") << ":";
    for (int n : k.nodes) os << " " << op_info(g.nodes[static_cast<size_t>(n)].op).name;
    os << " (" << k.loads.size() << " loads, " << k.stores.size() << " stores)\n";
  }
  return os.str();
}

}  // namespace kiln::compiler::lower
