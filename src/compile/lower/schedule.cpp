#include "compile/lower/schedule.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string_view>

#include "compile/lower/pointwise.h"
#include "ops/meta_util.h"

namespace kiln::compiler::lower {

// Note [Loop kernels]
// The scheduler walks the graph in order and keeps one kernel open: a group of
// nodes over one iteration space, the output shape of its pointwise nodes (and
// the input shape of its reductions). A pointwise prim of that shape joins it
// (vertically when it reads a member, horizontally when not), as does a
// reduction of an input of that shape over the group's reduced dims (so
// sum(x) and sum(x * x) share one pass), and, once the group reduces, a
// pointwise prim of the kept shape (the reduced dims of size 1: a row's mean or
// scale). A member's value that a later node outside the kernel reads, or the
// graph returns, is stored; the others live in registers. The kernel closes
// when a node of another shape arrives, when an extern call reads one of its
// values, or when a reduction over other dims arrives. An extern that reads
// nothing of the open kernel runs before it, so siblings on either side of a
// matmul still fuse. Each kernel step runs where it closed: every value it
// reads was produced earlier, every consumer of its stores comes later.
//
// Note [Reduction phases]
// A member may read a reduction of its own kernel (softmax's max, layer norm's
// mean): it then runs in a later pass over the reduced dims, inside the same
// loop over the kept dims, so a row is read from memory once per pass while it
// is still in cache, and softmax or layer norm is one kernel, not three. An
// expression's phase is the latest phase at which one of its arguments becomes
// available (a reduction's value: the phase after the one that accumulates
// it); a pass recomputes the register values it needs from earlier passes.
//
// Note [Loop order]
// The loop order follows the memory layout of the kernel's largest input (or
// its first output, without inputs): dims by decreasing stride, so the
// innermost loop walks contiguous memory. A reduction whose contiguous dim is
// reduced runs kept dims outside and reduced dims inside (one accumulator per
// point); one whose contiguous dim is kept (a bias gradient, sum over dim 0)
// runs that dim innermost, under the reduced loops, with a row of
// accumulators, so neither walks memory with a stride. Neighbouring dims of one
// class that every operand steps through as through one dim are merged.

std::vector<size_t> loop_order(std::vector<size_t> kept, std::vector<size_t> red, const std::vector<int64_t>* strides,
                               bool column) {
  auto by_stride = [&](std::vector<size_t>& dims) {
    if (strides)
      std::stable_sort(dims.begin(), dims.end(),
                       [&](size_t a, size_t b) { return std::abs((*strides)[a]) > std::abs((*strides)[b]); });
  };
  by_stride(kept);
  by_stride(red);
  std::vector<size_t> order(kept.begin(), kept.end());
  order.insert(order.end(), red.begin(), red.end());
  // Column form: the primary's contiguous dim is kept.
  if (strides && column && !kept.empty() && !red.empty()) {
    const size_t inner = kept.back();
    int64_t min_red = INT64_MAX;
    for (size_t d : red) min_red = std::min(min_red, std::abs((*strides)[d]));
    if (std::abs((*strides)[inner]) < min_red) {
      order.erase(std::find(order.begin(), order.end(), inner));
      order.push_back(inner);
    }
  }
  return order;
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
  const Device d = g.values[static_cast<size_t>(n.inputs[0])].meta.device;
  return (d.is_cpu() || d.is_cuda()) && g.values[static_cast<size_t>(n.outputs[0])].meta.device == d;
}

// Where node n computes: its output's device.
Device node_device(const Graph& g, const Node& n) { return g.values[static_cast<size_t>(n.outputs[0])].meta.device; }

struct Group {
  Device device;  // one kernel runs on one device (Note [Kernel devices])
  Shape shape;
  std::vector<bool> mask;  // reduced dims of `shape`; empty while the group has no reduction
  std::vector<int> nodes;
  std::vector<int> streams;  // values from outside the group read at every point (Note [Horizontal streams])
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

ReduceOp reduce_op(std::string_view name) {
  if (name == "sum") return ReduceOp::Sum;
  if (name == "prod") return ReduceOp::Prod;
  return name == "amax" ? ReduceOp::Max : ReduceOp::Min;
}

// The accumulator dtype of a reduction: floating sums and products accumulate in double, as
// eager's reducers do, in blocks (the emitter's); integers in 64 bits (wrapping); max/min in the
// input's dtype (float for half and bfloat16). Float accumulation was tried (twice the vector
// width): batch norm's gradients over mobilenet_v2's 2x2 feature maps, sums with heavy
// cancellation, then differed from eager's beyond the accuracy rule's 1e-3 in 550 elements of a
// training step, with double in none.
DType accumulator(ReduceOp r, DType in, DType out) {
  if (r == ReduceOp::Sum || r == ReduceOp::Prod) {
    if (!is_floating_point(out)) return DType::Int64;
    return DType::Float64;
  }
  return in == DType::Float16 || in == DType::BFloat16 ? DType::Float32 : in;
}

LoopKernel build_kernel(const Graph& g, const Group& grp, const Placement& place, int gi,
                        const std::vector<std::vector<int>>& consumers, const std::vector<bool>& is_output) {
  const std::vector<bool> mask = grp.mask.empty() ? std::vector<bool>(grp.shape.size(), false) : grp.mask;
  std::vector<bool> produced(g.values.size(), false);
  for (int n : grp.nodes)
    for (int v : g.nodes[static_cast<size_t>(n)].outputs) produced[static_cast<size_t>(v)] = true;
  // Operands over the group's logical dims: loads first, then stores.
  std::vector<int> load_values, store_values;
  std::vector<std::vector<int64_t>> load_st, store_st;
  std::vector<bool> loaded(g.values.size(), false);
  for (int n : grp.nodes)
    for (int v : g.nodes[static_cast<size_t>(n)].inputs) {
      if (produced[static_cast<size_t>(v)] || loaded[static_cast<size_t>(v)]) continue;
      loaded[static_cast<size_t>(v)] = true;
      load_values.push_back(v);
      load_st.push_back(broadcast_strides(g.values[static_cast<size_t>(v)], grp.shape));
    }
  for (int n : grp.nodes) {
    const Node& node = g.nodes[static_cast<size_t>(n)];
    const int v = node.outputs[0];
    if (place.inlined[static_cast<size_t>(n)]) continue;  // recomputed where it is read, never stored
    bool used_outside = is_output[static_cast<size_t>(v)];
    for (int c : consumers[static_cast<size_t>(v)]) used_outside = used_outside || place.runs_outside(c, gi);
    if (!used_outside) continue;
    const bool red = is_reduction(g, node);  // a 0-d input reduces over no dim (an empty mask)
    store_values.push_back(v);
    store_st.push_back(red ? reduced_strides(g.values[static_cast<size_t>(v)], mask)
                           : broadcast_strides(g.values[static_cast<size_t>(v)], grp.shape));
  }
  std::vector<std::vector<int64_t>*> all;
  for (auto& st : load_st) all.push_back(&st);
  for (auto& st : store_st) all.push_back(&st);

  // Note [Loop order]: the primary operand is the input with the most elements (the first
  // output without inputs); dims by decreasing stride in it, kept before reduced.
  const std::vector<int64_t>* primary = store_st.empty() ? nullptr : &store_st[0];
  int64_t best = -1;
  for (size_t l = 0; l < load_values.size(); ++l) {
    int64_t n = 1;
    for (int64_t d : g.values[static_cast<size_t>(load_values[l])].meta.sizes) n *= d;
    if (n > best) best = n, primary = &load_st[l];
  }
  std::vector<size_t> kept, red;
  for (size_t d = 0; d < mask.size(); ++d)
    if (grp.shape[d] != 1) (mask[d] ? red : kept).push_back(d);
  // Column form only where the kernel has one pass.
  bool phased = false;
  for (int n : grp.nodes)
    for (int v : g.nodes[static_cast<size_t>(n)].inputs)
      if (produced[static_cast<size_t>(v)] && is_reduction(g, g.nodes[static_cast<size_t>(g.values[static_cast<size_t>(v)].node)]))
        phased = true;
  const std::vector<size_t> order = loop_order(std::move(kept), std::move(red), primary, !phased);
  // Merge neighbours of one class that every operand steps through as through one dim.
  LoopKernel k;
  std::vector<std::vector<int64_t>> coeffs(all.size());
  for (size_t d : order) {
    bool merge = !k.sizes.empty() && k.reduced.back() == mask[d];
    for (size_t o = 0; merge && o < all.size(); ++o) merge = coeffs[o].back() == (*all[o])[d] * grp.shape[d];
    if (merge) {
      k.sizes.back() *= grp.shape[d];
      for (size_t o = 0; o < all.size(); ++o) coeffs[o].back() = (*all[o])[d];
    } else {
      k.sizes.push_back(grp.shape[d]);
      k.reduced.push_back(mask[d]);
      for (size_t o = 0; o < all.size(); ++o) coeffs[o].push_back((*all[o])[d]);
    }
  }

  // Buffers and expressions.
  std::vector<int> expr_of(g.values.size(), -1);
  std::vector<int> avail;  // per expr: the first phase that can read it
  for (size_t l = 0; l < load_values.size(); ++l) {
    const Value& val = g.values[static_cast<size_t>(load_values[l])];
    k.buffers.push_back({load_values[l], val.meta.dtype, false});
    TensorMeta m = val.meta;
    m.strides = value_strides(val);
    k.input_metas.push_back(m);
  }
  for (int v : store_values) k.buffers.push_back({v, g.values[static_cast<size_t>(v)].meta.dtype, true});
  auto add = [&](Expr e, int available) {
    k.exprs.push_back(std::move(e));
    avail.push_back(available);
    return static_cast<int>(k.exprs.size()) - 1;
  };
  auto operand = [&](int v) {
    if (expr_of[static_cast<size_t>(v)] >= 0) return expr_of[static_cast<size_t>(v)];
    const size_t l = static_cast<size_t>(std::find(load_values.begin(), load_values.end(), v) - load_values.begin());
    Expr e{};
    e.kind = ExprKind::Load;
    e.dtype = g.values[static_cast<size_t>(v)].meta.dtype;
    e.buffer = static_cast<int>(l);
    e.index.coeffs = coeffs[l];
    e.index.offset = 0;
    return expr_of[static_cast<size_t>(v)] = add(std::move(e), 0);
  };
  for (int n : grp.nodes) {
    const Node& node = g.nodes[static_cast<size_t>(n)];
    k.nodes.push_back(n);
    std::vector<int> args;
    int phase = 0;
    for (int v : node.inputs) {
      args.push_back(operand(v));
      phase = std::max(phase, avail[static_cast<size_t>(args.back())]);
    }
    Expr e{};
    if (is_reduction(g, node)) {
      e.kind = ExprKind::Reduce;
      e.dtype = g.values[static_cast<size_t>(node.outputs[0])].meta.dtype;
      e.reduce = reduce_op(op_info(node.op).name);
      e.acc = accumulator(e.reduce, k.exprs[static_cast<size_t>(args[0])].dtype, e.dtype);
    } else {
      e = pointwise_expr(g, node);
    }
    e.args = std::move(args);
    e.phase = phase;
    const bool is_red = e.kind == ExprKind::Reduce;
    expr_of[static_cast<size_t>(node.outputs[0])] = add(std::move(e), is_red ? phase + 1 : phase);
  }
  for (size_t s = 0; s < store_values.size(); ++s) {
    Index ix;
    ix.coeffs = coeffs[load_values.size() + s];
    k.stores.push_back({static_cast<int>(load_values.size() + s), ix, expr_of[static_cast<size_t>(store_values[s])]});
  }
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
    kernelizable[i] = is_loop_pointwise(g, g.nodes[i]) || is_reduction(g, g.nodes[i]);
  Placement place;
  place.node_group.assign(g.nodes.size(), -1);
  place.inlined.assign(g.nodes.size(), false);
  place.inline_groups.resize(g.nodes.size());
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    if (!is_loop_pointwise(g, n) || is_output[static_cast<size_t>(n.outputs[0])]) continue;
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
  int open = -1;
  std::vector<Step> steps;  // kernel steps hold group indices until kernels are built
  // KILN_LOGS=fusion says why each kernel ended where it did.
  std::vector<std::string> why(groups.capacity());
  auto close = [&](const std::string& reason) {
    if (open >= 0) {
      steps.push_back({true, open});
      if (why.size() <= static_cast<size_t>(open)) why.resize(static_cast<size_t>(open) + 1);
      why[static_cast<size_t>(open)] = reason;
    }
    open = -1;
  };
  auto reads = [&](const Node& n, int gi) {
    for (int v : n.inputs)
      if (v >= 0 && value_group[static_cast<size_t>(v)] == gi)
        return true;
    return false;
  };
  // The shape of a per-point value of reducing group gi: its shape with the reduced dims 1
  // (Note [Loop kernels]); empty for a group that does not reduce.
  auto kept_shape = [&](int gi) {
    const Group& grp = groups[static_cast<size_t>(gi)];
    if (grp.mask.empty()) return Shape{};
    Shape k = grp.shape;
    for (size_t d = 0; d < k.size(); ++d)
      if (grp.mask[d]) k[d] = 1;
    return k;
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
  // Note [Deferred side work]
  // Small work beside a big kernel waits for it: a node that does not fit the open kernel, over
  // at most 1/8 of its points (batch norm's running-statistic update, [C], between its output's
  // [N, C, H, W] loop and the ReLU that reads it), or a view of one of its values such work
  // reads, is set aside while the kernel stays open, so that later nodes of its shape still join
  // it (the ReLU fuses into the normalisation's last pass instead of re-reading its output).
  // Whatever reads a deferred value, and every close, first places the deferred nodes in order;
  // a deferred node reads only values that exist when the kernel closes, so order holds.
  std::vector<int> pending;
  std::vector<bool> pending_value(nv, false);
  auto numel_of = [](const Shape& sz) {
    int64_t k = 1;
    for (int64_t d : sz) k *= d;
    return k;
  };
  // Whether node ni, or an inlined producer it pulls in, reads a deferred value.
  auto reads_pending = [&](int ni) {
    if (pending.empty()) return false;
    std::vector<int> nodes = closure(ni);
    nodes.push_back(ni);
    for (int m : nodes)
      for (int v : g.nodes[static_cast<size_t>(m)].inputs)
        if (v >= 0 && pending_value[static_cast<size_t>(v)]) return true;
    return false;
  };
  bool flushing = false;  // deferred nodes being placed are not deferred again
  auto side_work = [&](const Shape& shape) {
    return !flushing && open >= 0 && numel_of(shape) * 8 <= numel_of(groups[static_cast<size_t>(open)].shape);
  };
  auto defer = [&](int ni) {
    pending.push_back(ni);
    for (int v : g.nodes[static_cast<size_t>(ni)].outputs) pending_value[static_cast<size_t>(v)] = true;
  };
  std::function<void(int)> place_node;
  auto flush = [&] {
    std::vector<int> p;
    p.swap(pending);
    for (int ni : p)
      for (int v : g.nodes[static_cast<size_t>(ni)].outputs) pending_value[static_cast<size_t>(v)] = false;
    flushing = true;
    for (int ni : p) place_node(ni);
    flushing = false;
  };
  // Closes the open kernel, then places the deferred nodes and closes what they opened, so that
  // nothing is deferred afterwards.
  auto close_and_flush = [&](const std::string& reason) {
    close(reason);
    if (pending.empty()) return;
    flush();
    close("deferred side work placed");
  };
  // Deferred work that reads nothing the open kernel computes can run before it instead: an
  // optimizer's step count, incremented beside a parameter's update whose next node (the bias
  // correction) reads the new count, is placed as its own kernel ahead of the update, which
  // stays open. Deferred nodes are pure loops and views, so only their inputs order them.
  // Whether node ni, with the producers it inlines (pulls), reads nothing group gi computes.
  auto side_by_side = [&](int gi, int ni, const std::vector<int>& pulls) {
    std::vector<int> nodes = pulls;
    nodes.push_back(ni);
    for (int m : nodes)
      for (int v : g.nodes[static_cast<size_t>(m)].inputs)
        if (v >= 0 && value_group[static_cast<size_t>(v)] == gi) return false;
    return true;
  };
  auto independent_of_open = [&] {
    for (int ni : pending)
      if (!side_by_side(open, ni, closure(ni))) return false;
    return true;
  };
  auto hoist = [&] {
    const int kept = open;
    open = -1;
    flush();
    close("deferred side work placed before the open kernel");
    open = kept;
  };
  // Note [Horizontal streams]
  // A node that reads nothing of the open kernel joins it side by side (horizontal fusion):
  // one loop instead of two, which pays where loops are short. Over large iteration spaces it
  // only adds streams to one loop: a compiled AdamW step over DLRM's eight 6.4M-element tables
  // became one loop reading 32 and writing 24 arrays at once, 1.9x the time of updating the
  // tables one after another (2-core AVX2 EPYC; the hardware prefetchers track a few dozen
  // streams). So a large kernel takes side-by-side work only while it reads at most
  // kMaxStreams full-size arrays from outside: 8, two AdamW updates (16 took that step from
  // 155 to 109 ms, 8 to 85-98 ms, 4 no better; eager 104-118 ms in the same runs).
  // KILN_MAX_STREAMS overrides it (for measuring); read once.
  constexpr int64_t kStreamingPoints = int64_t{1} << 16;
  static const size_t kMaxStreams = [] {
    const char* e = std::getenv("KILN_MAX_STREAMS");
    return e ? static_cast<size_t>(std::atoi(e)) : size_t{8};
  }();
  // The full-size values node ni (with the producers it inlines) reads from outside group gi.
  auto new_streams = [&](int gi, int ni, const std::vector<int>& pulls) {
    const Group& grp = groups[static_cast<size_t>(gi)];
    const int64_t points = numel_of(grp.shape);
    std::vector<int> out;
    std::vector<int> nodes = pulls;
    nodes.push_back(ni);
    for (int m : nodes)
      for (int v : g.nodes[static_cast<size_t>(m)].inputs) {
        if (v < 0 || value_group[static_cast<size_t>(v)] == gi) continue;
        const int p = g.values[static_cast<size_t>(v)].node;
        if (p >= 0 && place.inlined[static_cast<size_t>(p)]) continue;  // read through its own inputs
        if (numel_of(g.values[static_cast<size_t>(v)].meta.sizes) != points) continue;
        if (std::find(grp.streams.begin(), grp.streams.end(), v) == grp.streams.end() &&
            std::find(out.begin(), out.end(), v) == out.end())
          out.push_back(v);
      }
    return out;
  };
  auto too_many_streams = [&](int gi, int ni, const std::vector<int>& pulls) {
    const Group& grp = groups[static_cast<size_t>(gi)];
    if (numel_of(grp.shape) < kStreamingPoints || !side_by_side(gi, ni, pulls)) return false;
    return grp.streams.size() + new_streams(gi, ni, pulls).size() > kMaxStreams;
  };
  place_node = [&](int ni) {
    const size_t i = static_cast<size_t>(ni);
    const Node& n = g.nodes[i];
    if (reads_pending(ni)) {
      const bool loop = is_loop_pointwise(g, n) || is_reduction(g, n);
      const Shape& sz = g.values[static_cast<size_t>(is_reduction(g, n) ? n.inputs[0] : n.outputs[0])].meta.sizes;
      if ((loop || op_info(n.op).has(VIEW)) && side_work(sz)) return defer(ni);  // side work of side work
      if (open >= 0 && independent_of_open())
        hoist();
      else
        close_and_flush(std::string(op_info(n.op).name) + " reads deferred side work");
    }
    if (is_loop_pointwise(g, n)) {
      const Shape& shape = g.values[static_cast<size_t>(n.outputs[0])].meta.sizes;
      std::vector<int> pulls = closure(ni);
      const Device dev = node_device(g, n);
      const bool here = open >= 0 && groups[static_cast<size_t>(open)].device == dev;
      const bool fits = here && (groups[static_cast<size_t>(open)].shape == shape ||
                                 (!groups[static_cast<size_t>(open)].mask.empty() && kept_shape(open) == shape));
      if (!fits && here && numel_of(shape) == 1 && side_by_side(open, ni, pulls)) {
        // A single value that reads nothing of the open kernel (an optimizer's step count) is
        // computed ahead of it by a kernel of its own, at any depth of deferral: deferring it
        // would split the small side-by-side updates that a flush places (Note [Deferred side work]).
        const int kept = open;
        groups.push_back({dev, shape, {}, {}, {}});
        open = static_cast<int>(groups.size()) - 1;
        join(open, ni, pulls);
        close("a single value placed before the open kernel");
        open = kept;
        return;
      }
      if (!fits && here && side_work(shape)) return defer(ni);
      if (fits && too_many_streams(open, ni, pulls)) {
        close_and_flush(std::string(op_info(n.op).name) + " side by side would stream over " +
                        std::to_string(kMaxStreams) + " arrays (Note [Horizontal streams])");
      } else if (!fits) {
        close_and_flush(std::string(op_info(n.op).name) + " over " + shape_str(shape) + (open >= 0 && !here ? " on " + dev.str() : ", another shape"));
      }
      if (open < 0) {
        groups.push_back({dev, shape, {}, {}, {}});
        open = static_cast<int>(groups.size()) - 1;
      }
      for (int v : new_streams(open, ni, pulls)) groups[static_cast<size_t>(open)].streams.push_back(v);
      join(open, ni, pulls);
    } else if (is_reduction(g, n)) {
      const Shape& shape = g.values[static_cast<size_t>(n.inputs[0])].meta.sizes;
      std::vector<bool> mask = reduce_mask(g, n);
      std::vector<int> pulls = closure(ni);
      const Device dev = node_device(g, n);
      const bool here = open >= 0 && groups[static_cast<size_t>(open)].device == dev;
      bool fits = here && groups[static_cast<size_t>(open)].shape == shape &&
                  (groups[static_cast<size_t>(open)].mask.empty() || groups[static_cast<size_t>(open)].mask == mask);
      if (!fits && here && side_work(shape)) return defer(ni);
      if (!fits) {
        const bool same_shape = here && groups[static_cast<size_t>(open)].shape == shape;
        close_and_flush(std::string(op_info(n.op).name) +
              (open >= 0 && !here ? " on " + dev.str()
                                  : same_shape ? " over other dims" : " of " + shape_str(shape) + ", another shape"));
        groups.push_back({dev, shape, {}, {}, {}});
        open = static_cast<int>(groups.size()) - 1;
      }
      for (int v : new_streams(open, ni, pulls)) groups[static_cast<size_t>(open)].streams.push_back(v);
      groups[static_cast<size_t>(open)].mask = mask;
      join(open, ni, pulls);
    } else {
      if (open >= 0 && reads(n, open) && op_info(n.op).has(VIEW) &&
          side_work(g.values[static_cast<size_t>(n.outputs[0])].meta.sizes))
        return defer(ni);
      if (open >= 0 && reads(n, open))
        close_and_flush(std::string("extern ") + op_info(n.op).name + " reads it");
      else if (open >= 0 && op_info(n.op).has(MUTATES))
        close_and_flush(std::string("extern ") + op_info(n.op).name + " writes");
      steps.push_back({false, ni});
      ++s.extern_nodes;
    }
  };
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!place.inlined[i]) place_node(static_cast<int>(i));  // inlined nodes are placed by their readers
  close_and_flush("end of graph");
  close("end of graph");
  why.resize(groups.size());
  for (Step& st : steps) {
    if (!st.is_kernel) {
      s.steps.push_back(st);
      continue;
    }
    const Group& grp = groups[static_cast<size_t>(st.index)];
    s.kernels.push_back(build_kernel(g, grp, place, st.index, consumers, is_output));
    s.closed_by.push_back(why[static_cast<size_t>(st.index)]);
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
    const LoopKernel& k = kernels[static_cast<size_t>(st.index)];
    os << "  kernel " << st.index << " [";
    for (size_t d = 0; d < k.sizes.size(); ++d) os << (d ? ", " : "") << k.sizes[d] << (k.reduced[d] ? "r" : "");
    os << "]";
    if (k.num_phases() > 1) os << " " << k.num_phases() << " passes";
    os << ":";
    for (int n : k.nodes) os << " " << op_info(g.nodes[static_cast<size_t>(n)].op).name;
    os << " (" << k.num_inputs() << " loads, " << k.stores.size() << " stores)";
    if (static_cast<size_t>(st.index) < closed_by.size()) os << "; ended by " << closed_by[static_cast<size_t>(st.index)];
    os << "\n";
  }
  return os.str();
}

}  // namespace kiln::compiler::lower
