// A recording: the record layer that turns a run of user code into graphs
// (Note [Capture semantics], Note [Record layer]).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "compile/ir/graph.h"
#include "compile/ir/hash.h"
#include "dispatch/dispatch.h"

namespace kiln::autograd {
struct Node;
struct Edge;
class DeferredGraph;
}  // namespace kiln::autograd

namespace kiln::compiler {

// Note [Capture semantics]
// Every call of a compiled function re-runs the user's code with a Recording
// installed where kernels run. Ops then run only their meta functions and
// return tracers (tensors without storage); real tensors they meet
// (parameters, buffers, arguments, constants) become graph inputs in the
// order they are first used, and a running hash of (op, attrs, input slots,
// input metadata) names the graph. When the code ends, or at a graph break
// (a value read, a data-dependent op), the graph so far is finished: every
// tracer still alive anywhere (returned, stored in a member, saved by
// autograd) becomes a graph output, the sink looks the hash up (compiling on
// a miss) and runs it, and each live tracer is made real in place — the same
// TensorImpl gets the output's storage, so every handle the user holds is
// now an ordinary tensor. C++ control flow therefore always takes eager's
// path, and nothing but tensor data is left to the compiled graph.

// Note [Versions eager would check]: a tensor an eager node of the graph would have saved, with
// its version then, and the slots of the compiled backward (differentiable outputs) whose
// gradient reaches that node (eager's node runs, and checks, only when one of them has one).
struct EagerSaved {
  std::shared_ptr<VersionCounter> counter;
  uint32_t version = 0;
  bool always = false;     // the node is not known: check whenever the backward runs
  std::vector<int> slots;  // grad slots of the compiled backward
};

struct GraphResult {
  std::vector<Tensor> outputs;              // one real tensor per graph output
  std::shared_ptr<autograd::Node> grad_fn;  // the compiled backward (AOT), else null
  std::vector<int> output_nr;               // per graph output: its slot in grad_fn, or -1
  // Called with (graph output, the user's tensor now holding it) for every tracer made real:
  // a backward that saved the output checks the version of the user's tensor, so a write to it
  // after the graph (in a later graph or eagerly) raises as eager's would.
  std::function<void(size_t, const Tensor&)> bind_output;
  // Note [Versions eager would check]: called with every tensor eager's autograd would have
  // saved for this graph (the graph's inputs and outputs among them can be written after it);
  // the compiled backward raises eager's "modified by an in-place operation" when one was
  // written since and eager's node would run, even where the AOT backward does not read it (a
  // partition recomputes or keeps something else).
  std::function<void(std::vector<EagerSaved>&&)> eager_saved;
};

// Receives each finished graph: compiles (or finds) it and runs it on the
// recording's real inputs.
struct GraphSink {
  virtual ~GraphSink() = default;
  // True for AOT backends: the autograd graph that the tracers built is
  // dropped before the outputs are chosen, and the result's grad_fn takes its
  // place (unless the captured code ran a backward itself: whole-step capture). The tracers'
  // nodes are then only built when needed (Note [Deferred tracer autograd]).
  virtual bool owns_autograd() const = 0;
  // graph.values[v].requires_grad is set for outputs that require grad when
  // `differentiable`, i.e. when the sink is to build their backward.
  virtual GraphResult run_graph(int graph_index, Graph& graph, uint64_t hash, const std::vector<Tensor>& inputs,
                                bool differentiable) = 0;
  // A graph ended early (value read, data-dependent op): `fullgraph` refuses here.
  virtual void on_break(int graph_index, const std::string& op, const std::string& reason) = 0;
  // Which dims of the real tensor that becomes input `slot` of graph `graph_index` are
  // symbolic (bit d for dim d; Note [Dynamic shapes]).
  virtual uint64_t dynamic_dims(int graph_index, int slot, const Tensor& t) {
    (void)graph_index, (void)slot, (void)t;
    return 0;
  }
  // Note [Trace replay]: the graph that graph `graph_index` of the latest call ran (null if
  // none, or if it is symbolic), which this call's recording checks itself against.
  virtual std::shared_ptr<const Graph> expected_graph(int graph_index) {
    (void)graph_index;
    return nullptr;
  }
  // A graph whose trace matched `expected` node for node: `values` holds this call's inputs
  // and outputs (its values and nodes are `expected`'s), and `random` the (seed, offset) of its random nodes. Runs the
  // compiled graph with this hash and returns true, or returns false (then run_graph gets the graph).
  virtual bool run_replayed(int graph_index, const Graph& expected, const Graph& values, uint64_t hash,
                            const std::vector<Tensor>& inputs, const std::vector<int64_t>& random,
                            GraphResult& result) {
    (void)graph_index, (void)expected, (void)values, (void)hash, (void)inputs, (void)random, (void)result;
    return false;
  }
};

// Note [Trace replay]
// A compiled function's code usually records the same graph call after call, so the
// recording checks each op against the node the latest call's graph has at that point
// instead of building the graph again: same op, same input values (by id, the inputs'
// metadata compared as they are met), equal attrs (Philox state aside). While that holds,
// an op skips its meta function (the expected node's outputs are what it would return: its
// inputs and attrs are the same) and neither a node nor a value is built; at the first difference the nodes
// matched so far are copied from the expected graph and recording goes on as usual. A
// graph that matched to its end runs the compiled entry with its hash without being copied.
// The hash is mixed exactly as recording would, so a change the nodes do not show (live
// outputs, aliasing between inputs, requires_grad) still selects another graph.

// Pointer → int, open addressing, no allocation per entry: a recording looks up every real
// tensor it meets (parameters, wrapped numbers) and clears both maps after every graph, so
// node-based maps cost a malloc and a free per graph input per call (Note [Cheap dispatch]).
class PtrIntMap {
 public:
  // The value for `key`, or nullptr.
  const int* find(const void* key) const {
    if (slots_.empty()) return nullptr;
    for (size_t k = slot(key);; k = (k + 1) & (slots_.size() - 1)) {
      if (slots_[k].key == key) return &slots_[k].value;
      if (!slots_[k].key) return nullptr;
    }
  }
  // Inserts (key, value) unless key is there; returns the stored value and whether it is new.
  std::pair<int, bool> emplace(const void* key, int value) {
    if ((used_.size() + 1) * 2 > slots_.size()) grow();
    size_t k = slot(key);
    for (; slots_[k].key; k = (k + 1) & (slots_.size() - 1))
      if (slots_[k].key == key) return {slots_[k].value, false};
    slots_[k] = Slot{key, value};
    used_.push_back(static_cast<uint32_t>(k));
    return {value, true};
  }
  void clear() {  // keeps the table for the next graph
    for (uint32_t k : used_) slots_[k] = Slot{};
    used_.clear();
  }

 private:
  struct Slot {
    const void* key = nullptr;
    int value = 0;
  };
  size_t slot(const void* key) const {
    return (reinterpret_cast<uintptr_t>(key) * 0x9e3779b97f4a7c15ull >> 20) & (slots_.size() - 1);
  }
  void grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(old.empty() ? 256 : old.size() * 2, Slot{});
    used_.clear();
    for (const Slot& s : old)
      if (s.key) emplace(s.key, s.value);
  }
  std::vector<Slot> slots_;
  std::vector<uint32_t> used_;
};

class Recording final : public RecordLayer {
 public:
  // sink == null: a retrace (a pass replaying a graph on placeholders); the
  // graph is taken with take() and breaks are errors.
  // functionalize: writes become new values (Note [Functionalization]).
  explicit Recording(GraphSink* sink, bool decompose = false, bool functionalize = false);
  ~Recording() override;
  Recording(const Recording&) = delete;
  Recording& operator=(const Recording&) = delete;

  std::vector<Tensor> record(OpId op, std::span<const Tensor> inputs, const Attrs& attrs,
                             std::vector<TensorMeta>& metas) override;
  void graph_break(OpId op, std::span<const Tensor> inputs, const char* reason) override;
  bool replay(OpId op, std::span<const Tensor> inputs, const Attrs& attrs, std::vector<Tensor>& outs) override;
  // A retrace lowering to prims keeps an op whose kernel checks values (Note [Value checks]).
  bool decompose(OpId op) const override {
    return (decompose_ && !op_info(op).has(CHECKS_VALUES)) || (functionalize_ && op_info(op).has(MUTATES));
  }
  autograd::DeferredGraph* deferred_autograd() override { return deferred_.get(); }
  void keep_eager_autograd() override { keep_eager_autograd_ = true; }

  // The call's tensor arguments become graph inputs now, in order, so that their sizes are
  // symbolic before the code first uses them (Note [Dynamic shapes]).
  void declare_inputs(const std::vector<Tensor>& args);
  // Finishes the current graph (see the Note); a no-op when it has no nodes.
  void flush();
  // A new graph input that is a tracer (for retracing a graph).
  Tensor placeholder(const TensorMeta& m, bool requires_grad, bool wrapped_number = false);
  // Retrace: the graph recorded so far, with these tracers as its outputs.
  // Its inputs are the placeholders (in order), then the real tensors the
  // retrace met (constants, returned in `constants`).
  Graph take(const std::vector<Tensor>& outputs, std::vector<Tensor>* constants);
  // Functionalize: the placeholders (by input index) that were written.
  std::vector<int> written_placeholders() const;
  size_t num_nodes() const { return replaying_ ? matched_ : graph_.nodes.size(); }
  int graphs_run() const { return graph_index_; }
  // A graph of this call kept eager's autograd on its tracers (an AOT sink could not own it):
  // its outputs' history is not the compiled graph's, so assume_pure must not replay it.
  bool eager_autograd_kept() const { return eager_autograd_kept_; }

  // The hooks of this thread's active recording.
  static void on_value_read(const Tensor& t, const char* what);
  static void on_tracer_alias(const std::shared_ptr<TensorImpl>& alias);

 private:
  int value_of(const Tensor& t);
  // Note [Detached inputs]: Node::detached for an op on `inputs`.
  uint32_t detached_mask(OpId op, std::span<const Tensor> inputs, bool no_grad);
  Tensor make_tracer(const TensorMeta& m, int value, std::shared_ptr<VersionCounter> version = nullptr);
  Tensor make_tracer_view(const Tensor& base, const TensorMeta& m, int value);
  void reset();
  void functional_write(const Tensor& dst, const Tensor& src);
  Tensor lay_out_as(const Tensor& value, const Tensor& dst);
  // Note [No-grad writes]: a write under no_grad into a tensor that requires grad.
  void note_no_grad_write(const OpInfo& info, std::span<const Tensor> inputs, bool no_grad);
  // t, or a live tensor sharing its storage (a view, a detach()ed alias), requires grad.
  bool shares_storage_with_grad(const Tensor& t) const;
  // The graph writes one of several real inputs sharing a storage, one of which requires grad.
  bool written_aliased_grad_input() const;
  void refresh_view(TensorImpl* view);

  GraphSink* sink_;
  bool decompose_;
  bool functionalize_;
  // Functionalization: how each view was made, to remake it after its root is written.
  struct ViewOrigin {
    std::weak_ptr<TensorImpl> base;
    OpId op;
    Attrs attrs;
    std::vector<Tensor> others;  // inputs after the base (expand_as's `other`)
    size_t output;
    uint64_t root_generation;
    bool no_grad;  // the view's node (Note [No-grad nodes]): its remake is the same
  };
  std::unordered_map<const TensorImpl*, ViewOrigin> view_origin_;
  void rebase_view_origin(TensorImpl* view, const Tensor& root);
  std::vector<uint64_t> output_reach(const std::vector<Node>& nodes, size_t nv) const;
  bool eager_view_history(const std::shared_ptr<TensorImpl>& p) const;  // Note [Views of written inputs]
  std::unordered_map<const TensorImpl*, uint64_t> generation_;           // root → writes so far
  std::vector<std::pair<std::weak_ptr<TensorImpl>, int>> placeholders_;  // impl, input index
  std::unordered_set<int> written_inputs_;
  uint64_t id_ = 0;
  int graph_index_ = 0;
  Graph graph_;
  Hasher hash_;
  std::vector<Tensor> inputs_;                      // real graph inputs, in order
  std::vector<bool> input_grad_;                    // per input: it required grad when met
  // Note [Input edges]: per real input that requires grad with a history, its gradient edge
  // when the graph met it (before the graph's writes rebased it).
  std::vector<std::pair<const TensorImpl*, std::shared_ptr<autograd::Node>>> input_fns_;
  std::vector<uint32_t> input_nrs_;
  PtrIntMap input_of_;                              // real impl → value id
  PtrIntMap storage_class_;                         // storage → first input using it
  std::unordered_set<const void*> written_;         // storages of real inputs the graph writes
  std::vector<std::weak_ptr<TensorImpl>> tracked_;  // every tracer impl and alias made
  // The aliases among them (made by make_view: views, detach()), for Note [Detached inputs].
  std::unordered_map<const TensorImpl*, std::weak_ptr<TensorImpl>> aliases_;
  uint64_t backward_runs_at_start_ = 0;
  bool keep_eager_autograd_ = false;  // this graph: not differentiable by the sink
  bool eager_autograd_kept_ = false;  // some graph of this call
  Recording* prev_ = nullptr;
  std::unique_ptr<RecordLayerGuard> layer_guard_;
  std::unique_ptr<autograd::DeferredGraph> deferred_;  // Note [Deferred tracer autograd]
  // Note [Saved tracer versions] (autograd/node.h): tracers saved by eager nodes, and the
  // log that was installed before this recording's.
  std::vector<std::pair<std::shared_ptr<VersionCounter>, uint32_t>> saved_log_;
  std::vector<std::pair<std::shared_ptr<VersionCounter>, uint32_t>>* prev_saved_log_ = nullptr;
  std::vector<int64_t> saved_by_;  // per saved_log_ entry: its node's value (Note [Versions eager would check])
  std::vector<int64_t>* prev_saved_by_ = nullptr;
  bool saved_tracer_modified() const;
  // Symbolic sizes (Note [Dynamic shapes]): one table for the whole call, so a SymInt the
  // user holds across a graph break stays readable; the current graph's symbols only in it.
  SymTable syms_;
  std::unique_ptr<SymTableScope> sym_scope_;
  bool graph_has_symbols_ = false;
  // Real inputs whose sizes read as symbolic while this graph is recorded (cleared after it).
  std::vector<std::shared_ptr<TensorImpl>> symbolic_reals_;
  void clear_symbolic_reals();
  // Note [Trace replay]: the graph this one follows while `replaying_`, the nodes of it
  // matched so far and the attrs of the random ones among them (their Philox state is new).
  std::shared_ptr<const Graph> expect_;
  bool replaying_ = false;
  size_t matched_ = 0;
  size_t replay_values_ = 0;  // values matched so far: graph_.values is empty while replaying
  std::vector<std::pair<size_t, Attrs>> random_attrs_;
  bool premixed_ = false;  // replay() mixed this op and its inputs into the hash, then differed
  void start_replay();
  void stop_replay();  // copies the matched nodes into graph_
  // Note [Recording buffers]: this recording holds the thread's spare containers.
  bool owns_buffers_ = false;
  void swap_buffers();
};

// Pauses recording on this thread (running a graph's kernels, eager fallbacks).
class PauseRecording {
 public:
  PauseRecording();
  ~PauseRecording();
  PauseRecording(const PauseRecording&) = delete;
  PauseRecording& operator=(const PauseRecording&) = delete;

 private:
  RecordLayerGuard layer_{nullptr};
  Recording* prev_;
};

Recording* active_recording();

// Note [Input edges]
// A compiled graph's backward node sends each input's gradient along the input's gradient
// edge. An input the graph writes in place with grad on was rebased by the capture (eager's
// autograd ran the write: `m.mul_(2)` made m's grad_fn a MulBackward), so its edge read after
// the capture leads through the write's node: a value the graph computed from m before the
// write (`w = m - 1`) would send its gradient through MulBackward too. The recording keeps
// each input's edge from when the graph first met it, and the backends read edges through
// this function while the recording runs the graph.
autograd::Edge input_gradient_edge(const Tensor& t);

}  // namespace kiln::compiler
