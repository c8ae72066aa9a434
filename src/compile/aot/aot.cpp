// The AOT pipeline (the AOTAutograd role): functionalize the captured graph,
// build the joint forward+backward graph by running the op table's VJP rules
// on tracers, split it with a min-cut partitioner, and decompose to prims.
#include <algorithm>
#include <optional>
#include <unordered_set>
#include <sstream>

#include "autograd/node.h"
#include "compile/aot/partition.h"
#include "compile/lower/layout.h"
#include "compile/backends/backend.h"
#include "compile/ir/passes.h"
#include "compile/logs.h"
#include "kiln/autograd.h"

namespace kiln::compiler {

namespace {

// Replays g's nodes on tracers under the active recording; returns each value's tracer.
std::vector<Tensor> replay(const Graph& g, const std::vector<Tensor>& inputs, bool through_autograd) {
  std::vector<Tensor> vals(g.values.size());
  for (size_t i = 0; i < inputs.size(); ++i) vals[g.inputs[i]] = inputs[i];
  std::vector<Tensor> ins;
  for (const Node& n : g.nodes) {
    ins.clear();
    for (int v : n.inputs) ins.push_back(v < 0 ? Tensor() : vals[v]);
    // Note [No-grad nodes]: the flag carries over into retraced graphs, and the joint graph's
    // autograd treats such a node as eager's did (a constant).
    DifferentiableScope scope(!n.no_grad);
    std::optional<NoGradGuard> no_grad;
    if (through_autograd && n.no_grad) no_grad.emplace();
    // Note [Detached inputs]: eager's autograd sent nothing back through these.
    if (through_autograd)
      for (size_t k = 0; k < ins.size() && k < 32; ++k)
        if ((n.detached >> k & 1u) && ins[k].defined()) ins[k] = ins[k].detach();
    const DetachedInputs detached{n.op, n.detached, ins};
    DetachedInputsScope detached_scope(n.detached ? &detached : nullptr);
    std::vector<Tensor> outs = through_autograd ? call_op(n.op, ins, n.attrs) : backend_call(n.op, ins, n.attrs);
    for (size_t k = 0; k < n.outputs.size() && k < outs.size(); ++k) vals[n.outputs[k]] = outs[k];
  }
  return vals;
}

std::vector<Tensor> placeholders(Recording& rec, const Graph& g, size_t count, bool with_grad) {
  std::vector<Tensor> ph;
  for (size_t i = 0; i < count; ++i) {
    const Value& v = g.values[g.inputs[i]];
    ph.push_back(rec.placeholder(v.meta, with_grad && v.requires_grad, v.wrapped_number));
  }
  return ph;
}

// Note [Aliased inputs]
// Inputs that share one storage (a tensor and its view, two overlapping views, a parameter
// passed as an argument) are one buffer in eager: a write through one is read through the
// other. When the graph writes any of them, functionalization traces over a synthetic base
// instead, as AOTAutograd does: one extra input spanning the storage they view (per group the
// graph writes: a group only read stays separate inputs), each of them an as_strided view of it, so writes scatter into the base and later reads are remade from
// it; the base is written back. The pattern is part of the graph's hash, so a call with other
// aliasing compiles its own graph. Where a member requires grad, the graph keeps eager's
// autograd (Recording::flush: its view rebase, CopySlices, is eager's answer) and only computes
// values here (seeds 3001989, 1016588, 1007182); a differentiable graph never has such a group,
// and the check in functionalize() stays as a guard (never a wrong gradient).
struct SyntheticBase {
  int input;     // the group's first input: the base views its storage
  int64_t span;  // elements from storage offset 0 to the end of the furthest member
};

// Note [Output requires_grad by position]
// Functionalization can make two captured outputs one value: `y.copy_(x.detach())` rebinds y
// to x's value, so `{x, y}` returns one value twice. Whether an output requires grad belongs to
// its position (x does, y does not, as in eager), not to the value: a per-value flag took the
// last output's, and x lost its gradient (fuzzer seed 170323). The graph still returns each
// position as its own buffer (the backends clone a repeated output).

// The captured graph without writes: outputs are the captured outputs, then
// the final value of every written input (Note [Functionalization]).
struct Functional {
  Graph graph;
  std::vector<Tensor> constants;  // graph inputs after the captured graph's own (and the bases)
  size_t num_outputs = 0;         // the captured outputs; write-backs follow
  std::vector<bool> output_grad;  // per captured output: it requires grad (Note [Output requires_grad by position])
  std::vector<int> writeback;     // per write-back output: the input it updates (bases after the inputs)
  std::vector<SyntheticBase> bases;
};

Functional functionalize_once(const Graph& g, const std::vector<int>& alias, bool with_bases) {
  Functional f;
  Recording rec(nullptr, /*decompose=*/false, /*functionalize=*/true);
  NoGradGuard no_grad;
  std::vector<Tensor> ph = placeholders(rec, g, g.inputs.size(), false);
  std::vector<Tensor> in = ph;
  std::vector<Tensor> all_ph = ph;  // the inputs' placeholders, then the bases'
  for (size_t r = 0; with_bases && r < alias.size(); ++r) {
    std::vector<size_t> members;
    for (size_t i = r; i < alias.size(); ++i)
      if (alias[i] == static_cast<int>(r)) members.push_back(i);
    if (members.size() < 2) continue;
    const TensorMeta& first = g.values[g.inputs[r]].meta;
    int64_t span = 0;
    for (size_t i : members) {
      const TensorMeta& m = g.values[g.inputs[i]].meta;
      KILN_CHECK(m.dtype == first.dtype, "compile: not supported yet: inputs of different dtypes (", first.dtype, ", ",
                 m.dtype, ") that share one storage, where the graph writes one of them");
      int64_t end = m.storage_offset + 1;
      for (size_t d = 0; d < m.sizes.size(); ++d) {
        KILN_CHECK(m.strides[d] >= 0,
                   "compile: not supported yet: an input with negative strides that shares its "
                   "storage with another input the graph writes");
        end += m.sizes[d] == 0 ? 0 : (m.sizes[d] - 1) * m.strides[d];
      }
      span = std::max(span, end);
    }
    TensorMeta bm{Shape{span}, first.dtype, first.device, Shape{1}, 0};
    Tensor base = rec.placeholder(bm, false);
    all_ph.push_back(base);
    f.bases.push_back(SyntheticBase{static_cast<int>(r), span});
    for (size_t i : members) {
      const TensorMeta& m = g.values[g.inputs[i]].meta;
      in[i] = backend_call(OpId::as_strided, std::vector<Tensor>{base},
                           Attrs{std::vector<int64_t>(m.sizes.begin(), m.sizes.end()),
                                 std::vector<int64_t>(m.strides.begin(), m.strides.end()), m.storage_offset})[0];
    }
  }
  std::vector<Tensor> vals = replay(g, in, false);
  std::vector<Tensor> outs;
  for (int v : g.outputs) outs.push_back(vals[v]);
  f.num_outputs = outs.size();
  for (int i : rec.written_placeholders()) {
    outs.push_back(all_ph[static_cast<size_t>(i)]);  // rebound to its final value by the writes
    f.writeback.push_back(i);
  }
  f.graph = rec.take(outs, &f.constants);
  for (size_t i = 0; i < g.inputs.size(); ++i)
    f.graph.values[f.graph.inputs[i]].requires_grad = g.values[g.inputs[i]].requires_grad;
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    const bool rg = g.values[g.outputs[k]].requires_grad;
    f.output_grad.push_back(rg);
    if (rg) f.graph.values[f.graph.outputs[k]].requires_grad = true;  // shown in the graph's text
  }
  map_random_source(f.graph, g);
  return f;
}

Functional functionalize(const Graph& g, const std::vector<int>& alias, bool differentiable) {
  Functional f = functionalize_once(g, alias, false);
  // Only a group the graph writes needs a synthetic base; the others (a detach()ed alias of an
  // input that requires grad, read by batch_norm's decomposition) stay separate inputs, as
  // Recording::written_aliased_grad_input decides which graphs keep eager's autograd.
  std::vector<bool> written(alias.size(), false);
  for (int i : f.writeback) written[static_cast<size_t>(alias[static_cast<size_t>(i)])] = true;
  std::vector<int> written_alias(alias.size());
  bool aliased_write = false;
  for (size_t j = 0; j < alias.size(); ++j) {
    const size_t r = static_cast<size_t>(alias[j]);
    written_alias[j] = written[r] ? alias[j] : static_cast<int>(j);
    aliased_write = aliased_write || (written[r] && r != j);
  }
  if (!aliased_write) return f;
  // A graph that keeps eager's autograd only computes values here.
  for (size_t j = 0; differentiable && j < alias.size(); ++j)
    for (size_t i = 0; i < alias.size(); ++i)
      KILN_CHECK(i == j || written_alias[i] != written_alias[j] || !g.values[g.inputs[j]].requires_grad,
                 "compile: not supported yet: an input that requires grad shares its storage with another input, "
                 "and the graph writes one of them (Note [Aliased inputs]); pass a clone, or use backend \"eager\"");
  return functionalize_once(g, written_alias, true);
}

// The real tensors a graph's synthetic bases stand for: 1-d views of their group's storage.
std::vector<Tensor> make_bases(const std::vector<Tensor>& inputs, const std::vector<SyntheticBase>& bases) {
  std::vector<Tensor> r;
  PauseRecording pause;
  NoGradGuard no_grad;
  for (const SyntheticBase& b : bases)
    r.push_back(backend_call(OpId::as_strided, std::vector<Tensor>{inputs[static_cast<size_t>(b.input)]},
                             Attrs{std::vector<int64_t>{b.span}, std::vector<int64_t>{1}, int64_t{0}})[0]);
  return r;
}

// Lowers every composite of a pure graph to prims (a retrace with the op table's decompositions).
Graph decompose_graph(const Graph& g, std::vector<Tensor>& constants) {
  Recording rec(nullptr, /*decompose=*/true);
  NoGradGuard no_grad;
  std::vector<Tensor> ph = placeholders(rec, g, g.inputs.size(), false);
  std::vector<Tensor> vals = replay(g, ph, false);
  std::vector<Tensor> outs;
  for (int v : g.outputs) outs.push_back(vals[v]);
  std::vector<Tensor> extra;
  Graph d = rec.take(outs, &extra);
  for (Tensor& t : extra) constants.push_back(std::move(t));
  map_random_source(d, g);
  return d;
}

// Ops after lowering to prims (the stats' prim_ops), for a graph that runs undecomposed.
size_t prim_count(const Graph& g) {
  std::vector<Tensor> constants;
  Graph d = decompose_graph(g, constants);
  dead_code_elimination(d);
  return d.num_ops();
}

void tidy(Graph& g) {
  common_subexpression_elimination(g);
  dead_code_elimination(g);
  g.verify();
}
// The graphs that run: nothing differentiates them again (Note [Copy elision]).
void tidy_final(Graph& g) {
  elide_copies(g);
  tidy(g);
}

// Applies the functional graph's write-backs to the real inputs (their
// versions were bumped when the writes were recorded).
void write_back(const std::vector<Tensor>& inputs, const std::vector<int>& writeback, const std::vector<Tensor>& outs,
                size_t first) {
  PauseRecording pause;
  NoGradGuard no_grad;
  for (size_t w = 0; w < writeback.size(); ++w) {
    // An expanded input written through a view without overlap (one row of it: eager allows
    // the write) has a stride-0 dim, along which its new value repeats one storage element:
    // the write-back writes each storage element once, as eager did.
    Tensor dst = inputs[writeback[w]], src = outs[first + w];
    // The backend stored the new value into the input's own elements (Note [Writing into inputs]).
    if (src.is_same(dst) || (src.has_storage() && dst.has_storage() && src.unsafe_impl()->data() == dst.unsafe_impl()->data() &&
                             src.sizes() == dst.sizes() && src.strides() == dst.strides() && src.dtype() == dst.dtype()))
      continue;
    Shape sizes(dst.sizes());
    bool expanded = false;
    for (size_t d = 0; d < sizes.size(); ++d)
      if (dst.strides()[d] == 0 && sizes[d] > 1) {
        sizes[d] = 1;
        expanded = true;
      }
    if (expanded) {
      dst = make_view(dst, sizes, dst.strides(), dst.storage_offset());
      src = make_view(src, sizes, src.strides(), src.storage_offset());
    }
    copy_into(dst, src);
  }
}

// Records what autograd nodes save while it lives (Note [Saved versions]).
struct SavedLogScope {
  autograd::SavedTracerLog* prev;
  explicit SavedLogScope(autograd::SavedTracerLog* log) : prev(autograd::set_saved_tracer_log(log)) {}
  ~SavedLogScope() { autograd::set_saved_tracer_log(prev); }
  SavedLogScope(const SavedLogScope&) = delete;
  SavedLogScope& operator=(const SavedLogScope&) = delete;
};

// The compiled forward as one node of the eager autograd graph.
struct CompiledBackward : autograd::Node {
  GraphFn backward;
  std::vector<Tensor> saved;  // the backward graph's first inputs
  std::vector<uint32_t> saved_version;
  // Note [Versions eager would check]: what eager's nodes would have saved, with its version.
  std::vector<EagerSaved> eager_saved;
  std::vector<Tensor> constants;      // its last inputs
  std::vector<int> grad_of_edge;      // per next edge: which backward output is its gradient (-1: none)
  // Note [Outputs an input reaches]: per next edge, the outputs whose gradient reaches it. Eager's
  // per-op graph gives an input no gradient when no output that depends on it got one (the others
  // lost their history to a later in-place op, or were not differentiated); the compiled backward
  // computes one gradient for all, which would give it zeros.
  std::vector<std::vector<int>> outputs_of_edge;
  std::vector<int64_t> random_state;  // the forward's: recomputed random ops draw the same numbers
  bool released = false;

  std::string name() const override { return "CompiledFunctionBackward"; }
  void release_saved() override {
    saved.clear();
    eager_saved.clear();
    released = true;
  }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    KILN_CHECK(!released,
               "Trying to backward through the graph a second time (or directly access saved tensors "
               "after they have already been freed) in CompiledFunctionBackward. Saved intermediate values of the "
               "graph are freed when you call backward(); pass retain_graph=true if you need to backward through "
               "the graph a second time.");
    KILN_CHECK(!is_grad_enabled(),
               "compile: not supported yet: double backward (create_graph=true) through a "
               "compiled region; compile it with backend=\"eager\"");
    for (const EagerSaved& e : eager_saved) {
      bool runs = e.always;
      for (int k : e.slots) runs = runs || (static_cast<size_t>(k) < grads.size() && grads[k].defined());
      KILN_CHECK(!runs || e.counter->version.load() == e.version,
                 "one of the tensors needed for gradient computation has been modified by an in-place operation: "
                 "a tensor eager's autograd saves for this compiled graph is at version ", e.counter->version.load(),
                 "; expected version ", e.version);
    }
    for (size_t i = 0; i < saved.size(); ++i)
      KILN_CHECK(saved[i]._version() == saved_version[i],
                 "one of the tensors needed for gradient computation has been modified by an in-place operation: "
                 "a tensor of shape ",
                 shape_str(saved[i].sizes()), " saved by a compiled graph is at version ", saved[i]._version(),
                 "; expected version ", saved_version[i]);
    // Without retain_graph the saved tensors are handed to the backward graph, which frees each
    // after its last use, as eager's nodes free theirs one by one.
    const bool hand_over = releases_after_apply;
    std::vector<Tensor> in = hand_over ? std::move(saved) : saved;
    if (hand_over) {
      saved.clear();
      released = true;
    }
    for (size_t k = 0; k < output_meta.size(); ++k) {
      const TensorMeta& m = output_meta[k];
      Tensor g = k < grads.size() ? grads[k] : Tensor();
      if (!g.defined()) g = autograd::zeros_for(m);
      if (g.dtype() != m.dtype) g = g.to(m.dtype);
      in.push_back(g.contiguous());  // the backward graph was traced with contiguous cotangents
    }
    for (const Tensor& c : constants) in.push_back(c);
    std::vector<Tensor> outs;
    {
      RandomStateScope scope(&random_state);
      std::optional<DonateInputsScope> donate;
      if (hand_over) donate.emplace(&in);
      outs = backward(in);
    }
    std::vector<Tensor> result(next_edges.size());
    for (size_t e = 0; e < next_edges.size(); ++e) {
      if (grad_of_edge[e] < 0) continue;
      bool reached = e >= outputs_of_edge.size();
      if (!reached)
        for (int k : outputs_of_edge[e]) reached = reached || (static_cast<size_t>(k) < grads.size() && grads[k].defined());
      if (reached) result[e] = outs[grad_of_edge[e]];
    }
    return result;
  }
};

}  // namespace

Runnable aot_compile(const Graph& captured, CompileContext& ctx, bool decompose, const LowerFn& lower) {
  Functional f = functionalize(captured, ctx.input_alias, ctx.differentiable);
  tidy(f.graph);
  std::string text = f.graph.str("functional");
  log(Log::Aot, "functionalized:\n" + text);
  const size_t n_out = f.num_outputs;

  bool differentiable = false;
  if (ctx.differentiable)
    for (size_t k = 0; k < n_out; ++k) differentiable = differentiable || f.output_grad[k];

  if (!differentiable) {
    std::vector<Tensor> constants = f.constants;
    Graph g = decompose ? decompose_graph(f.graph, constants) : f.graph;
    if (decompose) lower::channels_last_convolutions(g);
    tidy_final(g);
    ctx.stats.prim_ops_per_graph.push_back(decompose ? g.num_ops() : prim_count(g));
    ctx.stats.saved_bytes.push_back(0);
    ctx.stats.saveall_bytes.push_back(0);
    if (ctx.stats.aot_graphs.size() < 64) ctx.stats.aot_graphs.push_back(text);
    if (!f.writeback.empty()) {
      g.write_targets.assign(g.outputs.size(), -1);
      for (size_t w = 0; w < f.writeback.size(); ++w) g.write_targets[n_out + w] = f.writeback[w];
    }
    // The last inputs are the constants (the runnable below appends them to each call's).
    g.input_constants.resize(g.inputs.size());
    for (size_t c = 0; c < constants.size() && c < g.inputs.size(); ++c)
      g.input_constants[g.inputs.size() - constants.size() + c] = constants[c];
    GraphFn run = lower(g);
    std::vector<int> writeback = f.writeback;
    std::vector<SyntheticBase> bases = f.bases;
    return shared_runnable(
        [run, constants, writeback, bases, n_out](const std::vector<Tensor>& inputs, const std::vector<int64_t>& rs) {
          std::vector<Tensor> in = inputs;
          for (Tensor& b : make_bases(inputs, bases)) in.push_back(std::move(b));
          in.insert(in.end(), constants.begin(), constants.end());
          std::vector<Tensor> outs;
          {
            RandomStateScope scope(&rs);
            outs = run(in);
          }
          write_back(in, writeback, outs, n_out);
          outs.resize(n_out);
          return GraphResult{std::move(outs), nullptr, {}, {}, {}};
        });
  }

  // ---- the joint graph: forward on tracers with autograd, then backward on tracer cotangents ----
  Recording rec(nullptr, decompose);
  std::vector<Tensor> primals = placeholders(rec, f.graph, f.graph.inputs.size(), true);
  std::vector<Tensor> fwd;
  std::vector<int> diff;  // forward outputs that get a cotangent
  std::vector<Tensor> tangents;
  std::vector<int> rg_primals;
  std::vector<Tensor> grads;
  std::vector<std::vector<int>> reaches;  // per primal needing grad: the forward outputs reaching it
  size_t n_forward_nodes = 0;
  std::vector<bool> eager_saves_primal;  // per primal: eager's autograd saves it (or a view of it)
  {
    EnableGradGuard grad_on;
    // Note [Saved versions]: the tensors the forward's autograd nodes save, as eager's would.
    autograd::SavedTracerLog saved_log;
    std::vector<Tensor> vals;
    {
      SavedLogScope log_saves(&saved_log);
      vals = replay(f.graph, primals, true);
    }
    // A view of a captured input shares its version counter: eager saving it checks the input.
    eager_saves_primal.assign(primals.size(), false);
    for (size_t i = 0; i < captured.inputs.size() && i < primals.size(); ++i)
      for (const auto& [counter, version] : saved_log)
        if (counter == primals[i].unsafe_impl()->version) eager_saves_primal[i] = true;
    for (int v : f.graph.outputs) fwd.push_back(vals[v]);
    n_forward_nodes = rec.num_nodes();
    std::vector<Tensor> roots;
    for (size_t k = 0; k < n_out; ++k)
      if (f.output_grad[k] && fwd[k].requires_grad()) {
        diff.push_back(static_cast<int>(k));
        roots.push_back(fwd[k]);
        TensorMeta m{fwd[k].sizes().vec(), fwd[k].dtype(), fwd[k].device(), contiguous_strides(fwd[k].sizes()), 0};
        tangents.push_back(rec.placeholder(m, false));
      }
    std::vector<Tensor> wrt;
    for (size_t i = 0; i < primals.size(); ++i)
      if (primals[i].requires_grad()) {
        rg_primals.push_back(static_cast<int>(i));
        wrt.push_back(primals[i]);
      }
    // Note [Outputs an input reaches]: which differentiable outputs reach each input needing grad.
    reaches.assign(wrt.size(), {});
    for (size_t d = 0; d < roots.size(); ++d) {
      std::vector<autograd::Node*> stack;
      std::unordered_set<autograd::Node*> seen;
      if (autograd::Edge e = autograd::gradient_edge(roots[d]); e.valid()) stack.push_back(e.fn.get());
      while (!stack.empty()) {
        autograd::Node* n = stack.back();
        stack.pop_back();
        if (!seen.insert(n).second) continue;
        if (auto* acc = dynamic_cast<autograd::AccumulateGrad*>(n)) {
          for (size_t j = 0; j < wrt.size(); ++j)
            if (wrt[j].unsafe_impl() == acc->variable.get()) reaches[j].push_back(static_cast<int>(d));
          continue;
        }
        for (const autograd::Edge& e : n->next_edges)
          if (e.valid()) stack.push_back(e.fn.get());
      }
    }
    if (!roots.empty() && !wrt.empty())
      grads = autograd::grad(roots, wrt, tangents, /*retain_graph=*/false, /*create_graph=*/false,
                             /*allow_unused=*/true);
  }
  std::vector<Tensor> joint_outs = fwd;
  std::vector<int> grad_slot(rg_primals.size(), -1);  // per primal needing grad: index in joint outputs
  for (size_t i = 0; i < grads.size(); ++i)
    if (grads[i].defined()) {
      grad_slot[i] = static_cast<int>(joint_outs.size());
      joint_outs.push_back(grads[i]);
    }
  // The forward's tracers stop needing their autograd graph here.
  for (Tensor& t : fwd) t = Tensor();
  std::vector<Tensor> joint_constants;
  Graph joint = rec.take(joint_outs, &joint_constants);
  map_random_source(joint, f.graph);
  // Note [Channels-last graphs]: before the partition, so that the values saved for backward
  // cross in the layout both halves use.
  if (decompose) lower::channels_last_convolutions(joint, &n_forward_nodes);
  log(Log::Aot, "joint:\n" + joint.str("joint"));

  // Inputs of the joint graph: primals (captured inputs, then f's constants), tangents, new constants.
  const size_t n_primals = f.graph.inputs.size();
  const size_t n_tangents = tangents.size();
  // Note [Saved versions]: the inputs the partition may not save to recompute from.
  std::vector<bool> pinned_primals(n_primals, false);
  for (int w : f.writeback) pinned_primals[static_cast<size_t>(w)] = true;
  for (size_t i = 0; i < captured.inputs.size() && i < n_primals; ++i)
    if (!eager_saves_primal[i]) pinned_primals[i] = true;
  Partition p =
      min_cut_partition(joint, n_primals, n_tangents, n_forward_nodes, fwd.size(), ctx.recompute, pinned_primals);
  tidy_final(p.forward);
  tidy_final(p.backward);
  ctx.stats.prim_ops_per_graph.push_back(decompose ? p.forward.num_ops() + p.backward.num_ops()
                                                   : prim_count(p.forward) + prim_count(p.backward));
  ctx.stats.saved_bytes.push_back(p.saved_bytes);
  ctx.stats.saveall_bytes.push_back(p.saveall_bytes);
  if (ctx.stats.aot_graphs.size() < 64)
    ctx.stats.aot_graphs.push_back(text + joint.str("joint") + p.forward.str("forward") + p.backward.str("backward"));
  if (log_enabled(Log::Aot)) {
    std::ostringstream os;
    os << "partition: saves " << p.saved.size() << " tensors, " << p.saved_bytes
       << " bytes (save-all: " << p.saveall_bytes << ")\n"
       << p.forward.str("forward") << p.backward.str("backward");
    log(Log::Aot, os.str());
  }

  // The forward's constants: f's (its last primals) and the joint trace's (after the primals).
  p.forward.input_constants.resize(p.forward_inputs.size());
  for (size_t j = 0; j < p.forward_inputs.size(); ++j) {
    const size_t i = static_cast<size_t>(p.forward_inputs[j]), first = n_primals - f.constants.size();
    if (i >= n_primals) p.forward.input_constants[j] = joint_constants[i - n_primals];
    else if (i >= first) p.forward.input_constants[j] = f.constants[i - first];
  }
  // Note [Writing into inputs]: the forward's write-back outputs (batch norm's running stats,
  // after the captured outputs) go to the forward inputs they update, so the backend may store
  // them there directly instead of the write-back copying each after the graph.
  if (!f.writeback.empty()) {
    p.forward.write_targets.assign(p.forward.outputs.size(), -1);
    for (size_t w = 0; w < f.writeback.size() && n_out + w < p.forward.outputs.size(); ++w) {
      auto it = std::find(p.forward_inputs.begin(), p.forward_inputs.end(), f.writeback[w]);
      if (it != p.forward_inputs.end()) p.forward.write_targets[n_out + w] = static_cast<int>(it - p.forward_inputs.begin());
    }
  }
  GraphFn run_fwd = shared_graph_fn(lower(p.forward));
  GraphFn run_bwd = shared_graph_fn(lower(p.backward));
  std::vector<Tensor> f_constants = f.constants;
  std::vector<int> writeback = f.writeback;
  std::vector<SyntheticBase> bases = f.bases;
  std::vector<TensorMeta> diff_meta;
  for (int k : diff) {
    const Value& v = f.graph.values[f.graph.outputs[k]];
    diff_meta.push_back(TensorMeta{v.meta.sizes, v.meta.dtype, v.meta.device, {}, 0});
  }
  std::vector<int> grad_out(rg_primals.size(), -1);  // per primal needing grad: index in backward outputs
  for (size_t i = 0; i < rg_primals.size(); ++i)
    if (grad_slot[i] >= 0)
      for (size_t j = 0; j < p.backward_outputs.size(); ++j)
        if (p.backward_outputs[j] == grad_slot[i]) grad_out[i] = static_cast<int>(j);
  return shared_runnable([=](const std::vector<Tensor>& inputs, const std::vector<int64_t>& rs) {
    std::vector<Tensor> in = inputs;
    for (Tensor& b : make_bases(inputs, bases)) in.push_back(std::move(b));
    in.insert(in.end(), f_constants.begin(), f_constants.end());
    std::vector<Tensor> in_all = in;
    in_all.insert(in_all.end(), joint_constants.begin(), joint_constants.end());
    std::vector<Tensor> fin;
    for (int j : p.forward_inputs) fin.push_back(in_all[j]);
    std::vector<Tensor> outs;
    {
      RandomStateScope scope(&rs);
      outs = run_fwd(fin);
    }
    // outs: the joint's forward outputs (captured, then write-backs), then the saved intermediates.
    auto node = std::make_shared<CompiledBackward>();
    node->backward = run_bwd;
    node->random_state = rs;
    // Note [Saved versions]
    // A saved tensor is saved at its version before the graph's writes. The recording bumped
    // the written inputs' versions already, and the write-back below overwrites their storage;
    // a saved tensor in that storage (the input itself, or a view of it) holds the value from
    // before the write, as eager's saved tensor would, and its expected version is one behind,
    // so backward raises eager's error. A saved input is version-checked, so the partition may
    // save an input (or a view of it) in place of values it recomputes from it only where eager's
    // autograd saves that input too (its nodes in the joint trace saved it, or a view sharing its
    // version counter: Note [Saving what the VJP reads]); a later write into it then raises in
    // eager as well. Other inputs, and written ones, are pinned_primals: saving them costs as much
    // as saving what must not be recomputed, so the partition saves the values computed from them
    // (eager's cast, not x: `y = x.to(kFloat32) * w; x.add_(1)` is no error; fuzzer seed 4006600).
    std::vector<const void*> written;
    for (int w : writeback) written.push_back(in[static_cast<size_t>(w)].unsafe_impl()->storage.get());
    std::vector<int> saved_output;  // per saved tensor: the graph output it is, or -1
    for (const SavedSource& s : p.saved) {
      saved_output.push_back(!s.from_input && static_cast<size_t>(s.index) < n_out ? s.index : -1);
      Tensor t = s.from_input ? in_all[s.index] : outs[s.index];
      uint32_t version = t._version();
      const void* st = t.unsafe_impl()->storage.get();
      if (st && std::find(written.begin(), written.end(), st) != written.end()) version -= 1;
      node->saved.push_back(t);
      node->saved_version.push_back(version);
    }
    write_back(in, writeback, outs, n_out);
    for (int j : p.backward_constants) node->constants.push_back(in_all[j]);
    for (size_t i = 0; i < rg_primals.size(); ++i) {
      // An input the backward gives no gradient (used only under no_grad) gets no edge, so
      // autograd::grad(allow_unused) leaves its gradient undefined, as eager's would.
      node->next_edges.push_back(grad_out[i] >= 0 ? input_gradient_edge(in[rg_primals[i]]) : autograd::Edge{});
      node->grad_of_edge.push_back(grad_out[i]);
      node->outputs_of_edge.push_back(reaches[i]);
    }
    node->output_meta = diff_meta;
    GraphResult r;
    r.outputs.assign(outs.begin(), outs.begin() + static_cast<long>(n_out));
    r.grad_fn = node;
    if (std::find_if(saved_output.begin(), saved_output.end(), [](int k) { return k >= 0; }) != saved_output.end())
      r.bind_output = [node, saved_output](size_t k, const Tensor& user) {
        // The saved output is checked through the user's tensor (its version counter), held as
        // an alias without autograd, as eager's saved outputs are (no cycle through grad_fn).
        for (size_t i = 0; i < saved_output.size(); ++i)
          if (saved_output[i] == static_cast<int>(k) && i < node->saved.size()) {
            node->saved[i] = make_view(user, user.sizes(), user.strides(), user.storage_offset());
            node->saved_version[i] = user._version();
          }
      };
    r.eager_saved = [node](std::vector<EagerSaved>&& s) {
      node->eager_saved = std::move(s);
    };
    r.output_nr.assign(n_out, -1);
    for (size_t d = 0; d < diff.size(); ++d) r.output_nr[diff[d]] = static_cast<int>(d);
    return r;
  });
}

}  // namespace kiln::compiler
