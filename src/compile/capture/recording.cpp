#include "compile/capture/recording.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "autograd/autograd_meta.h"
#include "autograd/deferred.h"
#include "autograd/engine.h"
#include "autograd/node.h"
#include "compile/capture/sym_shapes.h"

namespace kiln::compiler {

namespace {
thread_local Recording* tls_recording = nullptr;
// Recordings alive on this thread, paused ones included: a retrace made while a graph is
// compiled (PauseRecording) must not uninstall the hooks the paused recording needs.
thread_local int tls_recordings_alive = 0;
// Note [Input edges]: the edges of the graph being run by this thread's recording.
struct InputEdges {
  const std::vector<std::pair<const TensorImpl*, std::shared_ptr<autograd::Node>>>* fns;
  const std::vector<uint32_t>* nrs;
};
thread_local const InputEdges* tls_input_edges = nullptr;
struct InputEdgesScope {
  const InputEdges* prev;
  explicit InputEdgesScope(const InputEdges* e) : prev(tls_input_edges) { tls_input_edges = e; }
  ~InputEdgesScope() { tls_input_edges = prev; }
};
std::atomic<uint64_t> g_next_recording{1};

// Note [Recording buffers]
// Every call of a compiled function records with a new Recording, and each recorded op
// appends to its containers (the graph's values and nodes, the tracers made, the inputs
// met, the lookup tables). Fresh ones would regrow by doubling, call after call: a malloc,
// a copy and a free per doubling, and memory the caches have not seen. So the outermost
// recording of a thread borrows the containers a previous one left empty (their capacity
// kept) and gives them back cleared; a nested recording (a retrace while compiling) makes
// its own.
struct RecordingBuffers {
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<int> graph_inputs, graph_outputs;
  std::vector<Tensor> inputs;
  std::vector<bool> input_grad;
  PtrIntMap input_of, storage_class;
  std::vector<std::weak_ptr<TensorImpl>> tracked;
  std::vector<std::pair<std::shared_ptr<VersionCounter>, uint32_t>> saved_log;
  std::vector<int64_t> saved_by;
  std::vector<std::pair<size_t, Attrs>> random_attrs;
  bool in_use = false;
};
thread_local RecordingBuffers tls_buffers;

const void* storage_key(const TensorImpl* i) {
  if (i->storage) return i->storage.get();
  return i->version.get();  // tensors without storage alias when they share a version counter
}

bool same_meta(const TensorMeta& a, const TensorMeta& b) {
  return a.dtype == b.dtype && a.device == b.device && a.storage_offset == b.storage_offset && a.sizes == b.sizes &&
         a.strides == b.strides;
}
}  // namespace

Recording* active_recording() { return tls_recording; }

autograd::Edge input_gradient_edge(const Tensor& t) {
  if (const InputEdges* e = tls_input_edges)
    for (size_t k = 0; k < e->fns->size(); ++k)
      if ((*e->fns)[k].first == t.unsafe_impl()) return autograd::Edge{(*e->fns)[k].second, (*e->nrs)[k]};
  return autograd::gradient_edge(t);
}

PauseRecording::PauseRecording() : prev_(tls_recording) { tls_recording = nullptr; }
PauseRecording::~PauseRecording() { tls_recording = prev_; }

Recording::Recording(GraphSink* sink, bool decompose, bool functionalize)
    : sink_(sink), decompose_(decompose), functionalize_(functionalize), id_(g_next_recording++), prev_(tls_recording) {
  tls_recording = this;
  layer_guard_ = std::make_unique<RecordLayerGuard>(this);
  sym_scope_ = std::make_unique<SymTableScope>(&syms_);
  ++tls_recordings_alive;
  set_value_read_hook(&Recording::on_value_read);
  set_tracer_alias_hook(&Recording::on_tracer_alias);
  backward_runs_at_start_ = autograd::backward_runs();
  const bool aot_capture = sink_ && !decompose_ && !functionalize_ && sink_->owns_autograd();
  if (aot_capture) deferred_ = std::make_unique<autograd::DeferredGraph>();
  prev_saved_log_ = autograd::set_saved_tracer_log(aot_capture ? &saved_log_ : nullptr);
  prev_saved_by_ = autograd::set_saved_producer_log(aot_capture ? &saved_by_ : nullptr);
  if (!tls_buffers.in_use) {
    tls_buffers.in_use = owns_buffers_ = true;
    swap_buffers();
  }
  start_replay();
}

void Recording::swap_buffers() {
  RecordingBuffers& b = tls_buffers;
  std::swap(graph_.values, b.values);
  std::swap(graph_.nodes, b.nodes);
  std::swap(graph_.inputs, b.graph_inputs);
  std::swap(graph_.outputs, b.graph_outputs);
  std::swap(inputs_, b.inputs);
  std::swap(input_grad_, b.input_grad);
  std::swap(input_of_, b.input_of);
  std::swap(storage_class_, b.storage_class);
  std::swap(tracked_, b.tracked);
  std::swap(saved_log_, b.saved_log);
  std::swap(saved_by_, b.saved_by);
  std::swap(random_attrs_, b.random_attrs);
}

Recording::~Recording() {
  deferred_.reset();
  autograd::set_saved_tracer_log(prev_saved_log_);
  autograd::set_saved_producer_log(prev_saved_by_);
  clear_symbolic_reals();
  layer_guard_.reset();
  sym_scope_.reset();
  tls_recording = prev_;
  if (--tls_recordings_alive == 0) {
    set_value_read_hook(nullptr);
    set_tracer_alias_hook(nullptr);
  }
  if (owns_buffers_) {  // Note [Recording buffers]: given back empty, capacity kept
    graph_.values.clear();
    graph_.nodes.clear();
    graph_.inputs.clear();
    graph_.outputs.clear();
    inputs_.clear();
    input_grad_.clear();
    input_of_.clear();
    storage_class_.clear();
    tracked_.clear();
    saved_log_.clear();
    saved_by_.clear();
    random_attrs_.clear();
    swap_buffers();
    tls_buffers.in_use = false;
  }
}

void Recording::clear_symbolic_reals() {
  for (const auto& p : symbolic_reals_) p->sym_sizes.reset();
  symbolic_reals_.clear();
}

void Recording::declare_inputs(const std::vector<Tensor>& args) {
  for (const Tensor& t : args)
    if (t.defined() && !t.unsafe_impl()->is_tracer()) (void)value_of(t);
}

void Recording::reset() {
  clear_symbolic_reals();
  // A fresh graph that keeps the buffers of the last one (the next graph is usually as big).
  std::vector<Value> values = std::move(graph_.values);
  std::vector<Node> nodes = std::move(graph_.nodes);
  std::vector<int> ins = std::move(graph_.inputs), outs = std::move(graph_.outputs);
  graph_ = Graph();
  values.clear();
  nodes.clear();
  ins.clear();
  outs.clear();
  graph_.values = std::move(values);
  graph_.nodes = std::move(nodes);
  graph_.inputs = std::move(ins);
  graph_.outputs = std::move(outs);
  hash_ = Hasher();
  inputs_.clear();
  input_grad_.clear();
  input_fns_.clear();
  input_nrs_.clear();
  input_of_.clear();
  storage_class_.clear();
  written_.clear();
  tracked_.clear();
  aliases_.clear();
  view_origin_.clear();
  generation_.clear();
  placeholders_.clear();
  written_inputs_.clear();
  saved_log_.clear();
  saved_by_.clear();
  id_ = g_next_recording++;
  backward_runs_at_start_ = autograd::backward_runs();
  keep_eager_autograd_ = false;
  syms_.begin_graph(graph_index_);
  graph_has_symbols_ = false;
  start_replay();
}

void Recording::start_replay() {
  expect_.reset();
  replaying_ = false;
  matched_ = 0;
  replay_values_ = 0;
  random_attrs_.clear();
  if (!sink_ || decompose_ || functionalize_) return;
  expect_ = sink_->expected_graph(graph_index_);
  replaying_ = expect_ && !expect_->is_symbolic();
  if (expect_) tracked_.reserve(expect_->values.size());
}

void Recording::stop_replay() {
  if (!replaying_) return;
  replaying_ = false;
  // The values matched so far are the expected graph's: its inputs' metadata was compared as
  // they were met, and its nodes' outputs start without requires_grad, as record() makes them.
  graph_.values.assign(expect_->values.begin(), expect_->values.begin() + static_cast<std::ptrdiff_t>(replay_values_));
  for (Value& v : graph_.values)
    if (v.node >= 0) v.requires_grad = false;
  graph_.nodes.assign(expect_->nodes.begin(), expect_->nodes.begin() + static_cast<std::ptrdiff_t>(matched_));
  for (auto& [n, attrs] : random_attrs_) graph_.nodes[n].attrs = std::move(attrs);
  random_attrs_.clear();
}

void Recording::note_no_grad_write(const OpInfo& info, std::span<const Tensor> inputs, bool no_grad) {
  if (!info.has(MUTATES) || functionalize_ || decompose_ || inputs.empty() || !inputs[0].defined()) return;
  // With grad mode on, eager records nothing either when no input requires grad: a view taken
  // under no_grad of a tensor that requires grad, written by a value without grad (PyTorch too).
  if (!no_grad)
    for (const Tensor& t : inputs)
      if (t.defined() && t.requires_grad()) {
        // A write with grad into a tensor without grad that shares its storage with one that has
        // grad (`v2 = v1.detach(); v2.copy_(v0)`, seed 8025259): eager gives the alias a history
        // of its own and leaves v1's alone (detach() is not an autograd view), where the
        // functional graph would remake v1 from the written values; keep eager's autograd.
        if (!inputs[0].requires_grad() && shares_storage_with_grad(inputs[0])) keep_eager_autograd_ = true;
        return;
      }
  // The written tensor, or a tensor sharing its storage (its base, a detach()ed alias's
  // source), keeps its history.
  if (shares_storage_with_grad(inputs[0])) keep_eager_autograd_ = true;
}

bool Recording::shares_storage_with_grad(const Tensor& t) const {
  if (t.requires_grad()) return true;
  const TensorImpl* i = t.unsafe_impl();
  const TensorImpl* root = i->view_base ? i->view_base.get() : i;
  if (root != i && Tensor(i->view_base).requires_grad()) return true;
  // Aliases share the storage (real tensors) or the version counter (tracers); a tensor that
  // holds them alone has none.
  if (root->storage ? root->storage.use_count() <= 1 : !root->version || root->version.use_count() <= 1) return false;
  const void* key = storage_key(root);
  // A tracer view of a real tensor shares the real tensor's version counter, not its storage
  // (`in.view(...).detach()`: the alias is a tracer without a base, seed 1016017).
  const VersionCounter* version = i->version.get();
  auto aliases_with_grad = [&](const Tensor& o) {
    const TensorImpl* oi = o.unsafe_impl();
    return o.requires_grad() &&
           (storage_key(oi->view_base ? oi->view_base.get() : oi) == key || (version && oi->version.get() == version));
  };
  for (const Tensor& in : inputs_)
    if (aliases_with_grad(in)) return true;
  for (const auto& w : tracked_)
    if (auto p = w.lock(); p && aliases_with_grad(Tensor(p))) return true;
  return false;
}

bool Recording::written_aliased_grad_input() const {
  for (const void* key : written_) {
    int members = 0;
    bool grad = false;
    // Whether it required grad when the graph met it, as the graph's input says: a write since
    // (`zero_`) may have ended its history (fuzzer seeds 26000291, 27018678).
    for (size_t i = 0; i < inputs_.size(); ++i)
      if (inputs_[i].defined() && storage_key(inputs_[i].unsafe_impl()) == key) {
        ++members;
        grad = grad || input_grad_[i] || inputs_[i].requires_grad();
      }
    if (members > 1 && grad) return true;
  }
  return false;
}

// Note [Detached inputs]: the capture reads it off the tracers (a detach()ed alias read by a
// differentiable op); a retrace takes it from the node it replays.
// A write (MUTATES) keeps its inputs as they are: its target is a buffer, not a value to detach.
// The mask has 32 bits: a detach()ed alias read at a later position (a cat of many tensors)
// cannot be marked, so that graph keeps eager's autograd (correct, not faster).
uint32_t Recording::detached_mask(OpId op, std::span<const Tensor> inputs, bool no_grad) {
  if (no_grad || op_info(op).has(MUTATES)) return 0;
  const DetachedInputs* src = recording_detached_inputs();
  if (src && src->op == op && src->inputs.size() == inputs.size()) return src->mask;
  uint32_t mask = 0;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& t = inputs[k];
    if (!t.defined()) continue;
    bool d = false;
    if (src) {
      bool other = false;  // read through a position with grad as well
      for (size_t j = 0; j < src->inputs.size(); ++j)
        if (src->inputs[j].defined() && src->inputs[j].unsafe_impl() == t.unsafe_impl()) {
          if (j < 32 && (src->mask >> j & 1u))
            d = true;
          else
            other = true;
        }
      d = d && !other;
    } else if (sink_ && !t.requires_grad() && !t.unsafe_impl()->view_base) {
      // A detach()ed alias: made by make_view, not a view. (A tracer that does not require grad
      // because its op ran below autograd, inside a composite with its own VJP, is a node's output.)
      auto it = aliases_.find(t.unsafe_impl());
      d = it != aliases_.end() && it->second.lock().get() == t.unsafe_impl();
    }
    if (d && k < 32) mask |= uint32_t{1} << k;
    if (d && k >= 32) keep_eager_autograd_ = true;
  }
  return mask;
}

bool Recording::replay(OpId op, std::span<const Tensor> inputs, const Attrs& attrs, std::vector<Tensor>& outs) {
  premixed_ = false;
  if (!replaying_) return false;
  if (matched_ >= expect_->nodes.size() || attrs.has_symbolic()) {
    stop_replay();
    return false;
  }
  const Node& n = expect_->nodes[matched_];
  const OpInfo& info = op_info(op);
  // The op and its inputs are mixed as record() mixes them (value_of mixes a new input's
  // structure in between); on a difference record() then skips this part.
  bool same = n.op == op && n.inputs.size() == inputs.size();
  hash_.mix(static_cast<uint64_t>(op) + 1);
  for (size_t k = 0; k < inputs.size(); ++k) {
    const int v = inputs[k].defined() ? value_of(inputs[k]) : -1;  // may stop the replay (a new input differs)
    hash_.mix(static_cast<uint64_t>(v + 1));
    same = same && replaying_ && v == n.inputs[k];
  }
  const auto& av = attrs.values();
  same = same && av.size() == n.attrs.size() && n.no_grad == !recording_differentiable() &&
         n.detached == detached_mask(op, inputs, n.no_grad);
  for (size_t a = 0; a < av.size() && same; ++a)
    same = is_random_attr(info, a, av.size()) || attr_equal(av[a], n.attrs.values()[a]);
  if (!same) {
    stop_replay();
    premixed_ = true;
    return false;
  }
  // The rest of what record() mixes and notes.
  for (size_t a = 0; a < av.size(); ++a)
    if (!is_random_attr(info, a, av.size())) hash_.mix_attr(av[a]);
  hash_.mix(n.no_grad ? 0x6e67u : 0x6467u);
  hash_.mix(n.detached);
  note_no_grad_write(info, inputs, n.no_grad);
  if (info.has(MUTATES)) {
    for (const Tensor& t : inputs) {
      if (!t.defined()) continue;
      const TensorImpl* i = t.unsafe_impl();
      const TensorImpl* root = i->view_base ? i->view_base.get() : i;
      if (!root->is_tracer()) written_.insert(storage_key(root));
    }
  }
  outs.clear();
  outs.reserve(n.outputs.size());
  for (int v : n.outputs) {
    KILN_CHECK(static_cast<size_t>(v) == replay_values_, "internal: a replayed trace lost count of its values");
    ++replay_values_;
    const Value& e = expect_->values[static_cast<size_t>(v)];
    outs.push_back(info.has(VIEW) ? make_tracer_view(inputs[0], e.meta, v) : make_tracer(e.meta, v));
  }
  if (info.has(RANDOM)) random_attrs_.emplace_back(matched_, attrs);
  ++matched_;
  return true;
}

int Recording::value_of(const Tensor& t) {
  TensorImpl* i = t.unsafe_impl();
  if (i->is_tracer()) {
    KILN_CHECK(i->tracer_recording == id_,
               "compile: a tensor traced by another graph was used here; tracers cannot cross compiled functions "
               "that are recorded at the same time");
    if (functionalize_ && i->view_base) refresh_view(i);
    return static_cast<int>(i->tracer_value);
  }
  if (const int* v = input_of_.find(i)) return *v;
  TensorMeta m{Shape(t.sizes()), t.dtype(), t.device(), Shape(t.strides()), t.storage_offset()};
  const int slot = static_cast<int>(graph_.inputs.size());
  // Dynamic dims become symbols (Note [Dynamic shapes]); 0 and 1 stay numbers, as in PyTorch.
  Shape sym;
  if (uint64_t dyn = sink_ ? sink_->dynamic_dims(graph_index_, slot, t) : 0)
    for (size_t d = 0; d < m.sizes.size() && d < 64; ++d)
      if ((dyn >> d & 1) && m.sizes[d] >= 2) {
        if (sym.empty()) sym = m.sizes;
        // Duck sizing (as PyTorch's): a dim equal to a symbol of this graph is that symbol; the
        // hash then says so, and a later call where they differ records a different graph.
        int64_t same = 0;
        for (size_t k : syms_.symbol_nodes()) {
          const SymNode& n = syms_.nodes()[k];
          if (n.graph == graph_index_ && n.hint == m.sizes[d]) same = syms_.raw_of(k);
        }
        if (same) {
          sym[d] = same;
          continue;
        }
        sym[d] = syms_.symbol(m.sizes[d]);
        graph_.sym_sources.push_back(SymSource{static_cast<int>(syms_.node(sym[d]).a), slot, static_cast<int>(d)});
      }
  int v = -1;
  if (replaying_) {  // Note [Trace replay]: the input the expected graph met here, or the replay ends
    const size_t k = replay_values_;
    const bool same = sym.empty() && k < expect_->values.size() && expect_->values[k].node == -1 &&
                      expect_->values[k].index == slot && expect_->values[k].requires_grad == t.requires_grad() &&
                      expect_->values[k].wrapped_number == i->is_wrapped_number &&
                      same_meta(expect_->values[k].meta, m);
    if (same) {
      v = static_cast<int>(replay_values_++);
      graph_.inputs.push_back(v);
    } else {
      stop_replay();
    }
  }
  if (v < 0) v = graph_.add_input(m, t.requires_grad(), i->is_wrapped_number);
  input_of_.emplace(i, v);
  inputs_.push_back(t);
  input_grad_.push_back(t.requires_grad());
  if (i->autograd && !functionalize_ && !decompose_ && t.requires_grad() && !t.is_leaf()) {
    autograd::Edge e = autograd::gradient_edge(t);  // Note [Input edges]
    input_fns_.emplace_back(i, std::move(e.fn));
    input_nrs_.push_back(e.input_nr);
  }
  // Structure, not identity: which slot, what metadata, which earlier input it aliases.
  hash_.mix(0x1a7e5ull);
  if (sym.empty()) {
    hash_.mix_meta(m);
  } else {
    graph_has_symbols_ = true;
    graph_.values[v].sym = sym;
    // The user's tensor reads as symbolic on this thread until this graph is run (x.size(1)).
    if (!i->sym_sizes) {
      i->sym_sizes = std::make_unique<Shape>(sym);
      symbolic_reals_.push_back(t.impl_ptr());
    }
    hash_.mix(sym.size());
    for (int64_t raw : sym) hash_.mix(syms_.hash(raw));
    // A contiguous input's strides follow from its sizes; others are compared as numbers.
    if (t.is_contiguous())
      hash_.mix(0xc0u);
    else
      hash_.mix_ints(m.strides);
    hash_.mix(static_cast<uint64_t>(m.storage_offset));
    hash_.mix(static_cast<uint64_t>(m.dtype));
    hash_.mix((static_cast<uint64_t>(m.device.type) << 8) | static_cast<uint8_t>(m.device.index));
  }
  hash_.mix((t.requires_grad() ? 1u : 0u) | (i->is_wrapped_number ? 2u : 0u));
  auto [cls, fresh] = storage_class_.emplace(storage_key(i), static_cast<int>(inputs_.size()) - 1);
  hash_.mix(fresh ? ~0ull : static_cast<uint64_t>(cls));
  return v;
}

Tensor Recording::make_tracer(const TensorMeta& m, int value, std::shared_ptr<VersionCounter> version) {
  Tensor t = make_meta_tensor(m.sizes, m.strides, m.dtype, m.device, std::move(version));
  TensorImpl* i = t.unsafe_impl();
  i->storage_offset = m.storage_offset;
  i->tracer_recording = id_;
  i->tracer_value = value;
  tracked_.push_back(t.impl_ptr());
  return t;
}

Tensor Recording::make_tracer_view(const Tensor& base, const TensorMeta& m, int value) {
  const TensorImpl* b = base.unsafe_impl();
  Tensor t = make_tracer(m, value, b->version);  // a view shares its base's version counter
  TensorImpl* i = t.unsafe_impl();
  i->view_base = b->view_base ? b->view_base : base.impl_ptr();
  return t;
}

std::vector<Tensor> Recording::record(OpId op, std::span<const Tensor> inputs, const Attrs& attrs,
                                      std::vector<TensorMeta>& metas) {
  stop_replay();  // no-op: replay() ended it before the caller ran the meta function
  const bool premixed = std::exchange(premixed_, false);  // replay() mixed the op and its inputs
  const OpInfo& info = op_info(op);
  if (functionalize_ && op == OpId::copy_) {
    // dst takes src's value, not its buffer: where that value is a graph input or a view
    // (`a.copy_(in)`, `a.copy_(b.t())`), binding dst to it would make dst an alias of src, so a
    // later write of src (write-back, a graph after a break) would show through dst.
    Tensor src = inputs[1];
    const int v = value_of(src);
    const int producer = graph_.values[static_cast<size_t>(v)].node;
    if (producer < 0 || op_info(graph_.nodes[static_cast<size_t>(producer)].op).has(VIEW))
      src = backend_call(OpId::clone, std::vector<Tensor>{src}, Attrs{})[0];
    functional_write(inputs[0], src);
    return {};
  }
  std::vector<int> ins;
  ins.reserve(inputs.size());
  if (!premixed) hash_.mix(static_cast<uint64_t>(op) + 1);
  for (const Tensor& t : inputs) {
    int v = t.defined() ? value_of(t) : -1;
    ins.push_back(v);
    if (!premixed) hash_.mix(static_cast<uint64_t>(v + 1));
  }
  // With symbols about, attrs keep their expressions (Note [Dynamic shapes]).
  std::vector<AttrValue> sym_attrs;
  bool symbolic = false;
  if (graph_has_symbols_) {
    sym_attrs = symbolic_attrs(syms_, op, inputs, attrs.symbolic_values(), metas);
    for (const AttrValue& a : sym_attrs) symbolic = symbolic || attr_is_symbolic(a);
  }
  const auto& av = symbolic ? sym_attrs : attrs.values();
  for (size_t a = 0; a < av.size(); ++a)
    if (!is_random_attr(info, a, av.size())) hash_.mix_attr(av[a]);  // Note [Random state as input]
  const bool no_grad = !recording_differentiable();                  // Note [No-grad nodes]
  hash_.mix(no_grad ? 0x6e67u : 0x6467u);
  const uint32_t detached = detached_mask(op, inputs, no_grad);  // Note [Detached inputs]
  hash_.mix(detached);
  // Note [No-grad writes]: a write under no_grad (or with grad but from no input that requires
  // it) into a tensor that requires grad (made by this graph, or an input), or into a view of
  // one, changes its value but not its history: eager's backward sends its
  // gradient on to what it was before the write. A functional graph has no such value (its
  // final value is a constant for autograd, Note [No-grad nodes]), so this graph keeps eager's
  // autograd.
  note_no_grad_write(info, inputs, no_grad);
  if (info.has(MUTATES)) {
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (!inputs[k].defined()) continue;
      const TensorImpl* i = inputs[k].unsafe_impl();
      const TensorImpl* root = i->view_base ? i->view_base.get() : i;
      if (!root->is_tracer()) written_.insert(storage_key(root));
    }
  }
  for (TensorMeta& m : metas)
    if (!info.has(VIEW)) {
      m.strides = contiguous_strides(m.sizes);
      m.storage_offset = 0;
    }
  int n = graph_.add_node(op, symbolic ? Attrs(sym_attrs) : attrs, std::move(ins), metas);
  graph_.nodes[static_cast<size_t>(n)].no_grad = no_grad;
  graph_.nodes[static_cast<size_t>(n)].detached = detached;
  std::vector<Shape> out_sym;
  if (graph_has_symbols_) out_sym = symbolic_output_sizes(syms_, op, inputs, av, metas);
  std::vector<Tensor> outs;
  outs.reserve(metas.size());
  for (size_t k = 0; k < metas.size(); ++k) {
    int v = graph_.nodes[n].outputs[k];
    outs.push_back(info.has(VIEW) ? make_tracer_view(inputs[0], metas[k], v) : make_tracer(metas[k], v));
    if (k < out_sym.size() && !out_sym[k].empty()) {
      graph_.values[v].sym = out_sym[k];
      outs.back().unsafe_impl()->sym_sizes = std::make_unique<Shape>(std::move(out_sym[k]));
    }
    if (functionalize_ && info.has(VIEW)) {
      const TensorImpl* b = inputs[0].unsafe_impl();
      const TensorImpl* root = b->view_base ? b->view_base.get() : b;
      view_origin_[outs.back().unsafe_impl()] =
          ViewOrigin{inputs[0].impl_ptr(), op,     attrs, std::vector<Tensor>(inputs.begin() + 1, inputs.end()), k,
                     generation_[root],    no_grad};
    }
  }
  return outs;
}

// Note [Functionalization]
// A retrace with functionalize on turns writes into values: copy_(dst, src)
// records src broadcast and converted to dst's shape and dtype, and dst's
// TensorImpl is rebound to that value, so every later use of dst (through any
// handle) reads the new value. A view made before the write is remade from
// its base when next used (its root's write count moved on). Writes into a
// placeholder are graph-input updates the caller applies after the graph.
// A write through a view scatters into the view's root instead: the root's new value is
// scatter(root, positions of the view's elements, src), and the write lands on the root
// (as_strided of an arange gives those positions). A strided root is first laid out as
// the storage it views, so that the positions are storage positions and the new value is
// the same as_strided view of the new storage: the root keeps its strides.
// A strided tensor keeps its strides when written whole, as eager's storage does (seed 3685): its
// new value is laid out as the storage it views, so that as_strided of it (a view remade after
// the write, or one taken later) reads the elements eager's would. Positions outside it are 0.
Tensor Recording::lay_out_as(const Tensor& value, const Tensor& dst) {
  const TensorImpl* d = dst.unsafe_impl();
  if (value.strides() == dst.strides() && value.storage_offset() == dst.storage_offset()) return value;
  auto call1 = [](OpId op, std::vector<Tensor> in, Attrs a) { return backend_call(op, in, a)[0]; };
  int64_t span = d->storage_offset + 1;
  for (size_t k = 0; k < d->sizes.size(); ++k) {
    if (d->sizes[k] == 0 || d->strides[k] < 0) return value;  // nothing to lay out, or no such storage
    span += (d->sizes[k] - 1) * d->strides[k];
  }
  Tensor where = call1(OpId::arange, {}, {Scalar(int64_t{0}), Scalar(span), Scalar(int64_t{1}), kInt64, dst.device()});
  Tensor pos = call1(OpId::as_strided, {where}, {dst.sizes().vec(), dst.strides().vec(), dst.storage_offset()});
  pos = call1(OpId::view, {call1(OpId::clone, {pos}, {})}, {std::vector<int64_t>{dst.numel()}});
  Tensor vals = call1(OpId::view, {call1(OpId::clone, {value}, {})}, {std::vector<int64_t>{dst.numel()}});
  Tensor storage = call1(OpId::full, {}, {std::vector<int64_t>{span}, Scalar(int64_t{0}), dst.dtype(), dst.device()});
  storage = call1(OpId::scatter, {storage, pos, vals}, {int64_t{0}});
  return call1(OpId::as_strided, {storage}, {dst.sizes().vec(), dst.strides().vec(), dst.storage_offset()});
}

void Recording::functional_write(const Tensor& dst, const Tensor& src) {
  TensorImpl* d = dst.unsafe_impl();
  KILN_CHECK(d->is_tracer() && d->tracer_recording == id_, "internal: a functionalized write into a real tensor");
  Tensor s = src;
  if (s.sizes() != dst.sizes()) s = backend_call(OpId::expand, std::vector<Tensor>{s}, Attrs{dst.sizes().vec()})[0];
  if (s.device() != dst.device())  // a copy between devices moves the value (Note [Device moves])
    s = backend_call(OpId::_to_copy, std::vector<Tensor>{s}, Attrs{dst.dtype(), dst.device()})[0];
  else if (s.dtype() != dst.dtype())
    s = backend_call(OpId::to, std::vector<Tensor>{s}, Attrs{dst.dtype()})[0];
  if (d->view_base) {
    Tensor root(d->view_base);
    const TensorImpl* r = root.unsafe_impl();
    KILN_CHECK(r->is_tracer(), "internal: a functionalized write through a view of a real tensor");
    if (recording_differentiable()) rebase_view_origin(d, root);
    auto call1 = [](OpId op, std::vector<Tensor> in, Attrs a) { return backend_call(op, in, a)[0]; };
    auto flat = [&](const Tensor& t) {
      return call1(OpId::view, {call1(OpId::clone, {t}, {})}, {std::vector<int64_t>{t.numel()}});
    };
    if (dst.numel() == 0) return;
    Tensor vals = flat(s);
    if (r->is_contiguous && r->storage_offset == 0) {
      // The root's storage is its elements in order: scatter at the view's storage positions.
      Tensor pos = call1(OpId::arange, {},
                         {Scalar(int64_t{0}), Scalar(root.numel()), Scalar(int64_t{1}), kInt64, root.device()});
      pos = flat(call1(OpId::as_strided, {pos}, {dst.sizes().vec(), dst.strides().vec(), dst.storage_offset()}));
      Tensor fresh = call1(OpId::scatter, {call1(OpId::view, {root}, {std::vector<int64_t>{root.numel()}}), pos, vals},
                           {int64_t{0}});
      functional_write(root, call1(OpId::view, {fresh}, {root.sizes().vec()}));
      return;
    }
    // A strided root: rebuild the storage it views (its elements at their storage positions),
    // scatter the view's elements into it, and view it as the root again, so the root keeps
    // its strides and every other view of it (as_strided ones too) is remade the same way.
    int64_t span = r->storage_offset + 1;
    for (size_t k = 0; k < r->sizes.size(); ++k) {
      KILN_CHECK(r->strides[k] >= 0,
                 "compile: not supported yet: a write through a view of a tensor with negative strides");
      if (r->sizes[k] == 0) return;
      span += (r->sizes[k] - 1) * r->strides[k];
    }
    Tensor where =
        call1(OpId::arange, {}, {Scalar(int64_t{0}), Scalar(span), Scalar(int64_t{1}), kInt64, root.device()});
    Tensor root_pos =
        flat(call1(OpId::as_strided, {where}, {root.sizes().vec(), root.strides().vec(), root.storage_offset()}));
    Tensor view_pos =
        flat(call1(OpId::as_strided, {where}, {dst.sizes().vec(), dst.strides().vec(), dst.storage_offset()}));
    Tensor storage =
        call1(OpId::full, {}, {std::vector<int64_t>{span}, Scalar(int64_t{0}), root.dtype(), root.device()});
    storage = call1(OpId::scatter, {storage, root_pos, flat(root)}, {int64_t{0}});
    storage = call1(OpId::scatter, {storage, view_pos, vals}, {int64_t{0}});
    functional_write(
        root, call1(OpId::as_strided, {storage}, {root.sizes().vec(), root.strides().vec(), root.storage_offset()}));
    return;
  }
  if (!d->is_contiguous || d->storage_offset != 0) s = lay_out_as(s, dst);
  int v = value_of(s);
  const TensorMeta& m = graph_.values[v].meta;
  d->tracer_value = v;
  d->strides = m.strides;
  d->storage_offset = m.storage_offset;
  d->refresh_metadata();
  ++generation_[d];
  for (const auto& [w, index] : placeholders_)
    if (w.lock().get() == d) written_inputs_.insert(index);
}

// Note [In-place on a view] (dispatch.cpp): a write with grad through a view gives the view eager's
// new history, a view of the written root, even where the view (or a view it was taken of) was
// made under no_grad: remade as it was, it would stay a constant for autograd (`y` a view of a
// no-grad result, then `y.copy_(x)`: y had no gradient). Eager's autograd needs a contiguous root
// there, so as_strided of the root gives the view's elements.
void Recording::rebase_view_origin(TensorImpl* view, const Tensor& root) {
  const TensorImpl* r = root.unsafe_impl();
  if (!r->is_contiguous || r->storage_offset != 0) return;
  bool no_grad = false;
  for (const TensorImpl* v = view; v && !no_grad;) {
    auto it = view_origin_.find(v);
    if (it == view_origin_.end()) break;
    no_grad = it->second.no_grad;
    auto base = it->second.base.lock();
    v = base.get() == r ? nullptr : base.get();
  }
  if (!no_grad) return;
  Attrs attrs{std::vector<int64_t>(view->sizes.begin(), view->sizes.end()),
              std::vector<int64_t>(view->strides.begin(), view->strides.end()),
              static_cast<int64_t>(view->storage_offset)};
  view_origin_[view] = ViewOrigin{root.impl_ptr(), OpId::as_strided, std::move(attrs), {}, 0, ~uint64_t{0}, false};
}

void Recording::refresh_view(TensorImpl* view) {
  auto it = view_origin_.find(view);
  if (it == view_origin_.end()) return;
  const TensorImpl* root = view->view_base.get();
  uint64_t gen = generation_[root];
  if (it->second.root_generation == gen) return;
  ViewOrigin o = it->second;
  auto base = o.base.lock();
  KILN_CHECK(base, "internal: the base of a view is gone");
  std::vector<Tensor> ins{Tensor(base)};
  for (const Tensor& t : o.others) ins.push_back(t);
  DifferentiableScope scope(!o.no_grad);
  std::vector<Tensor> outs = backend_call(o.op, ins, o.attrs);  // refreshes the base first, if it is a view too
  const TensorImpl* fresh = outs.at(o.output).unsafe_impl();
  view->tracer_value = fresh->tracer_value;
  view->strides = fresh->strides;
  view->storage_offset = fresh->storage_offset;
  view->refresh_metadata();
  view_origin_[view].root_generation = gen;
}

std::vector<int> Recording::written_placeholders() const {
  std::vector<int> v(written_inputs_.begin(), written_inputs_.end());
  std::sort(v.begin(), v.end());
  return v;
}

Tensor Recording::placeholder(const TensorMeta& m, bool requires_grad, bool wrapped_number) {
  int index = static_cast<int>(graph_.inputs.size());
  int v = graph_.add_input(m, requires_grad, wrapped_number);
  Tensor t = make_tracer(m, v);
  t.unsafe_impl()->is_wrapped_number = wrapped_number;
  if (requires_grad) t.requires_grad_(true);
  placeholders_.emplace_back(t.impl_ptr(), index);
  return t;
}

Graph Recording::take(const std::vector<Tensor>& outputs, std::vector<Tensor>* constants) {
  graph_.outputs.clear();
  for (const Tensor& t : outputs) {
    KILN_CHECK(t.defined(), "internal: retrace output is undefined");
    graph_.outputs.push_back(value_of(t));
  }
  // Placeholders first, then the real tensors met (constants), each in order.
  std::vector<bool> is_placeholder(graph_.inputs.size(), false);
  for (const auto& p : placeholders_) is_placeholder[p.second] = true;
  std::vector<int> order;
  for (size_t i = 0; i < graph_.inputs.size(); ++i)
    if (is_placeholder[i]) order.push_back(graph_.inputs[i]);
  for (size_t i = 0; i < graph_.inputs.size(); ++i)
    if (!is_placeholder[i]) order.push_back(graph_.inputs[i]);
  graph_.inputs = order;
  for (size_t i = 0; i < order.size(); ++i) graph_.values[order[i]].index = static_cast<int>(i);
  if (constants) *constants = inputs_;
  Graph g = std::move(graph_);
  reset();
  return g;
}

void Recording::graph_break(OpId op, std::span<const Tensor>, const char* reason) {
  KILN_CHECK(sink_, op_name(op), ": cannot be traced into a graph: ", reason);
  sink_->on_break(graph_index_, op_name(op), reason);
  flush();
}

void Recording::on_value_read(const Tensor& t, const char* what) {
  Recording* r = tls_recording;
  if (!r) return;
  const TensorImpl* i = t.unsafe_impl();
  bool needs_flush = false;
  if (i->is_tracer()) {
    KILN_CHECK(i->tracer_recording == r->id_, "compile: reading the values of a tensor traced by another graph");
    needs_flush = true;
  } else {
    const TensorImpl* root = i->view_base ? i->view_base.get() : i;
    needs_flush = r->written_.count(storage_key(root)) > 0;
  }
  if (!needs_flush) return;
  std::string reason = std::string("user code reads a traced tensor's values (") + what + ")";
  KILN_CHECK(r->sink_, "compile: not supported yet: an op's decomposition reads tensor values (", what,
             ") while a graph is retraced");
  r->sink_->on_break(r->graph_index_, what, reason);
  r->flush();
}

void Recording::on_tracer_alias(const std::shared_ptr<TensorImpl>& alias) {
  if (Recording* r = tls_recording)
    if (alias->tracer_recording == r->id_) {
      r->tracked_.push_back(alias);
      r->aliases_[alias.get()] = alias;
    }
}

bool Recording::saved_tracer_modified() const {
  for (const auto& [counter, version] : saved_log_)
    if (counter->version.load() != version) return true;
  return deferred_ && deferred_->saved_modified();
}

// Note [Views of written inputs]
// An input the graph writes with grad (`x.copy_(y)`) took eager's new history as the capture
// ran the write (Note [Input edges]). A view of it the graph returns (`x.t()`) has, eagerly,
// that history under the view's node, so a gradient with respect to x (a hook on it, or x
// among autograd::grad's inputs) sees the view's part too; through the compiled graph's node
// it went straight to y and x's node missed it (fuzzer seeds 15010892, 21021438). The view's
// history is remade as eager's view rebase makes it: as_strided of the written input. Its
// slot in the compiled node gets no gradient, so nothing is counted twice. A value the graph
// computes from x after the write (`x * 2`) still sends its gradient through the compiled node
// alone, as torch.compile's does: the gradients of leaves are eager's, a gradient with respect
// to x itself counts only x's own uses after the call.
bool Recording::eager_view_history(const std::shared_ptr<TensorImpl>& p) const {
  const TensorImpl* root = p->view_base.get();
  if (!root || root->is_tracer() || !written_.count(storage_key(root))) return false;
  const Tensor* src = nullptr;
  for (const Tensor& in : inputs_) {
    if (!in.defined() || storage_key(in.unsafe_impl()->view_base ? in.unsafe_impl()->view_base.get()
                                                                  : in.unsafe_impl()) != storage_key(root))
      continue;
    const auto* m = autograd::autograd_meta_or_null(in);
    if (!m || !m->grad_fn) continue;
    bool rebased = true;  // its history is not the one it brought into the graph
    for (const auto& [impl, fn] : input_fns_)
      if (impl == in.unsafe_impl()) rebased = fn != m->grad_fn;
    if (!rebased) continue;
    if (src) return false;  // two candidates: not this case (aliased inputs keep eager's autograd)
    src = &in;
  }
  if (!src) return false;
  autograd::set_as_strided_history(Tensor(p), *src);
  return true;
}

// Note [Versions eager would check]: per value, the graph outputs whose gradient reaches the
// node that made it (bit o: output o; all bits past 64 outputs). Values are buffers
// (graph.h): a write passes the reach of what later reads the written buffer, or any view of
// it, on to the write's inputs. `copy_` replaces all of a buffer no view shares, so what read
// that buffer before it is not reached through it (eager's copy_ replaced its history:
// `v = scatter(x, i, s); v.copy_(x)` never runs scatter's node, seed 18004905).
std::vector<uint64_t> Recording::output_reach(const std::vector<Node>& nodes, size_t nv) const {
  auto ok = [nv](int v) { return v >= 0 && static_cast<size_t>(v) < nv; };
  std::vector<int> root(nv);
  for (size_t v = 0; v < nv; ++v) root[v] = static_cast<int>(v);
  std::vector<int> members(nv, 1);  // per root: values that alias it
  for (const Node& n : nodes)
    if (op_info(n.op).has(VIEW) && !n.inputs.empty() && ok(n.inputs[0]))
      for (int o : n.outputs)
        if (ok(o)) {
          root[o] = root[n.inputs[0]];
          ++members[root[o]];
        }
  // class_reach[r]: the OR of reach over the values aliasing root r. Reach only grows in the
  // backward walk (the one reset is of a buffer alone in its class), so it is kept as it grows.
  std::vector<uint64_t> reach(nv, 0), class_reach(nv, 0);
  auto add = [&](int v, uint64_t bits) {
    reach[v] |= bits;
    class_reach[root[v]] |= bits;
  };
  for (size_t o = 0; o < graph_.outputs.size(); ++o)
    if (ok(graph_.outputs[o])) add(graph_.outputs[o], o < 64 ? uint64_t{1} << o : ~uint64_t{0});
  for (size_t n = nodes.size(); n-- > 0;) {
    const Node& node = nodes[n];
    uint64_t m = 0;
    for (int v : node.outputs)
      if (ok(v)) m |= reach[v];
    if (op_info(node.op).has(MUTATES))
      for (int in : node.inputs)
        if (ok(in)) m |= class_reach[root[in]];
    const int dst = node.inputs.empty() ? -1 : node.inputs[0];
    const bool replaces = node.op == OpId::copy_ && ok(dst) && root[dst] == dst && members[dst] == 1;
    for (int in : node.inputs)
      if (ok(in)) add(in, m);
    if (replaces) reach[dst] = class_reach[dst] = 0;
  }
  return reach;
}

void Recording::flush() {
  if (num_nodes() == 0) {
    // The next graph takes this index: symbols made for this one's inputs are bound by no graph
    // (the second call of `nonzero(m); y.expand(...)` took m's symbol for y's size).
    syms_.retire_graph(graph_index_);
    reset();
    return;
  }
  KILN_CHECK(sink_, "internal: flush of a retrace");
  if (replaying_ && matched_ < expect_->nodes.size()) stop_replay();  // the trace ended early
  const bool replayed = replaying_;  // every node matched: graph_ has the values, expect_ the nodes
  bool ran_backward = autograd::backward_runs() != backward_runs_at_start_;
  bool differentiable = !ran_backward && !keep_eager_autograd_ && sink_->owns_autograd();
  const size_t num_values = replayed ? replay_values_ : graph_.values.size();
  std::vector<bool> requires_grad(num_values, false);
  // The tracers that require grad: a detach()ed alias shares its value (and storage) but
  // takes no grad_fn when made real.
  // Sorted: a set would cost a node per tracer per call, and every tracer the deferred
  // autograd holds is alive here.
  std::vector<const TensorImpl*> grad_impls;
  // Note [Saved tracer versions]: a tensor eager's backward reads was written since; eager's
  // autograd (with its version checks) is kept for this graph.
  if (differentiable && saved_tracer_modified()) differentiable = false;
  // Note [Aliased inputs]: the graph writes one of several inputs sharing a storage, one of which
  // requires grad; eager's autograd (its view rebase) is kept, the sink computes the values.
  if (differentiable && written_aliased_grad_input()) differentiable = false;
  std::vector<std::pair<std::shared_ptr<VersionCounter>, uint32_t>> eager_saved;
  std::vector<int64_t> eager_saved_by;  // per entry: a value of the node that saved it, or -1
  if (differentiable) {
    // Drop the tracers' own autograd graph (the sink builds the backward) so
    // that what it saved does not count as alive; remember who required grad.
    std::vector<std::shared_ptr<TensorImpl>> live;
    live.reserve(tracked_.size());
    for (const auto& w : tracked_)
      if (auto p = w.lock(); p && p->tracer_recording == id_) live.push_back(std::move(p));
    for (const auto& p : live) {
      Tensor t(p);
      if (!t.requires_grad()) continue;
      if (t.is_leaf()) differentiable = false;  // a leaf made inside the graph: keep eager's autograd
      requires_grad[p->tracer_value] = true;
      grad_impls.push_back(p.get());
    }
    std::sort(grad_impls.begin(), grad_impls.end());
    if (differentiable) {
      for (const auto& p : live)
        if (auto* m = autograd::autograd_meta_or_null(Tensor(p))) {
          m->grad_fn = nullptr;
          m->output_nr = 0;
        }
      eager_saved = saved_log_;  // Note [Versions eager would check]
      eager_saved_by = saved_by_;
      eager_saved_by.resize(eager_saved.size(), -1);
      if (deferred_) {
        deferred_->saved_versions(eager_saved, &eager_saved_by);
        deferred_->clear();
      }
    }
  }
  // Eager's autograd graph is kept (a backward ran inside, or a leaf was made here): build
  // what was deferred now, before the saved tensors decide which tracers are alive.
  if (!differentiable && deferred_) deferred_->materialize();
  std::vector<std::shared_ptr<TensorImpl>> live;
  live.reserve(tracked_.size());
  std::vector<int> out_index(num_values, -1);
  for (const auto& w : tracked_)
    if (auto p = w.lock(); p && p->tracer_recording == id_) {
      out_index[p->tracer_value] = 0;
      if (!differentiable && sink_->owns_autograd() && !eager_autograd_kept_)
        eager_autograd_kept_ = Tensor(p).requires_grad();
      live.push_back(std::move(p));
    }
  tracked_.clear();
  aliases_.clear();
  graph_.outputs.clear();
  for (size_t v = 0; v < out_index.size(); ++v)
    if (out_index[v] == 0) {
      out_index[v] = static_cast<int>(graph_.outputs.size());
      graph_.outputs.push_back(static_cast<int>(v));
      const bool rg = differentiable && requires_grad[v];
      if (!replayed) graph_.values[v].requires_grad = rg;
      hash_.mix(v);
      hash_.mix(rg);
    }
  hash_.mix(differentiable);
  if (graph_has_symbols_) graph_.sym_nodes = syms_.nodes();
  GraphResult result;
  {
    PauseRecording pause;
    const InputEdges edges{&input_fns_, &input_nrs_};
    InputEdgesScope edges_scope(&edges);
    std::vector<int64_t> random;
    for (const auto& [n, attrs] : random_attrs_) {
      random.push_back(attrs.i(attrs.size() - 2));
      random.push_back(attrs.i(attrs.size() - 1));
    }
    if (!replayed || !sink_->run_replayed(graph_index_, *expect_, graph_, hash_.h, inputs_, random, result)) {
      stop_replay();
      if (replayed)  // the values were the expected graph's until now: mark the outputs as above
        for (int v : graph_.outputs) graph_.values[v].requires_grad = differentiable && requires_grad[v];
      result = sink_->run_graph(graph_index_, graph_, hash_.h, inputs_, differentiable);
    }
  }
  if (result.grad_fn && result.eager_saved && !eager_saved.empty()) {
    // Note [Versions eager would check]: the graph outputs downstream of each saving node.
    const std::vector<Node>& nodes = replayed ? expect_->nodes : graph_.nodes;
    const size_t nv = replayed ? std::max(expect_->values.size(), num_values) : graph_.values.size();
    const std::vector<Value>& values = replayed ? expect_->values : graph_.values;
    std::vector<uint64_t> reach = output_reach(nodes, nv);
    std::vector<EagerSaved> checks;
    for (size_t i = 0; i < eager_saved.size(); ++i) {
      EagerSaved e{eager_saved[i].first, eager_saved[i].second, true, {}};
      const int64_t v = i < eager_saved_by.size() ? eager_saved_by[i] : -1;
      if (v >= 0 && static_cast<size_t>(v) < nv && static_cast<size_t>(v) < values.size() && values[v].node >= 0 &&
          static_cast<size_t>(values[v].node) < nodes.size() && graph_.outputs.size() <= 64) {
        uint64_t m = 0;
        for (int w : nodes[values[v].node].outputs)
          if (w >= 0 && static_cast<size_t>(w) < nv) m |= reach[w];
        e.always = false;
        for (size_t o = 0; o < graph_.outputs.size(); ++o)
          if ((m >> o & 1u) && o < result.output_nr.size() && result.output_nr[o] >= 0) e.slots.push_back(result.output_nr[o]);
        if (e.slots.empty()) continue;  // no gradient reaches the node: eager's never runs
      }
      checks.push_back(std::move(e));
    }
    if (!checks.empty()) result.eager_saved(std::move(checks));
  }
  KILN_CHECK(result.outputs.size() == graph_.outputs.size(), "internal: the graph returned ", result.outputs.size(),
             " outputs, expected ", graph_.outputs.size());
  for (const auto& p : live) {
    int k = out_index[p->tracer_value];
    const Tensor& r = result.outputs[k];
    KILN_CHECK(r.defined() && r.sizes() == IntArrayRef(p->sizes) && r.dtype() == p->dtype,
               "internal: compiled graph output ", k, " has shape ", (r.defined() ? shape_str(r.sizes()) : "undefined"),
               " where the trace said ", shape_str(p->sizes));
    const TensorImpl* ri = r.unsafe_impl();
    if (const TensorImpl* root = p->view_base.get(); root && !root->is_tracer() && root->storage) {
      // Note [Views of inputs stay views]: a view of a real tensor (a graph input) is made a view
      // of its storage, as in eager, not the graph's buffer for it (a view of the functional
      // value where the input was written, a copy from a backend): a write through it after
      // the graph (past a break) reaches the input, and the input's later writes show through it
      // (seed 1014063). The write-back has given the storage the view's values; the tracer kept
      // eager's strides and offset.
      p->storage = root->storage;
    } else {
      p->storage = ri->storage;
      p->strides = ri->strides;
      p->storage_offset = ri->storage_offset;
    }
    p->tracer_recording = 0;
    p->tracer_value = -1;
    p->sym_sizes.reset();
    p->refresh_metadata();
    if (result.bind_output) result.bind_output(static_cast<size_t>(k), Tensor(p));
    const bool grad = std::binary_search(grad_impls.begin(), grad_impls.end(), p.get());
    if (grad && eager_view_history(p)) continue;
    if (result.grad_fn && !result.output_nr.empty() && result.output_nr[k] >= 0 && grad) {
      auto& m = autograd::autograd_meta(Tensor(p));
      m.grad_fn = result.grad_fn;
      m.output_nr = static_cast<uint32_t>(result.output_nr[k]);
      m.view_of_base = autograd::view_follows_base(p.get());  // Note [View rebase]: the history is current
      m.view_version = p->version ? p->version->version.load() : 0;
    }
  }
  ++graph_index_;
  reset();
}

}  // namespace kiln::compiler
