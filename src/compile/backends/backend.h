// Compile backends: what turns a captured graph into something that runs.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "compile/capture/recording.h"
#include "compile/ir/graph.h"
#include "kiln/compile.h"

namespace kiln::compiler {

// A graph compiled for one call site and structure: runs it on the
// recording's real inputs with this call's random state.
using Runnable =
    std::function<GraphResult(const std::vector<Tensor>& inputs, const std::vector<int64_t>& random_state)>;

// Runnables and graph functions are copied on every call (the cache, the autograd node that
// keeps the backward): these wrap one so that a copy shares its captured graphs and tensors.
inline Runnable shared_runnable(Runnable r) {
  auto p = std::make_shared<const Runnable>(std::move(r));
  return [p](const std::vector<Tensor>& inputs, const std::vector<int64_t>& rs) { return (*p)(inputs, rs); };
}
inline GraphFn shared_graph_fn(GraphFn f) {
  auto p = std::make_shared<const GraphFn>(std::move(f));
  return [p](const std::vector<Tensor>& inputs) { return (*p)(inputs); };
}

// Counted while compiled graphs run (CompileStats::generated_kernel_runs, kernel_fallbacks):
// shared with the runnables, which may outlive their compiled function (a pending backward).
struct KernelCounts {
  std::atomic<int64_t> generated{0};
  std::atomic<int64_t> fallbacks{0};
  std::atomic<int64_t> background_runs{0};
  std::atomic<int64_t> background_us{0};
  std::atomic<int64_t> cuda_graph_replays{0};
};

struct CompileContext {
  bool differentiable;  // build the backward of the outputs that require grad
  const CompileOptions& options;
  CompileStats& stats;
  bool recompute = true;  // the partition recomputes cheap forward values in the backward (backend's choice)
  // Per graph input: the first input that shares its storage (itself when none does), from the
  // call that compiles; the graph's hash holds the same pattern (Note [Aliased inputs]).
  std::vector<int> input_alias = {};
  std::shared_ptr<KernelCounts> kernel_counts = {};
};

// The aliasing pattern of a graph's real inputs (CompileContext::input_alias).
std::vector<int> input_alias_pattern(const std::vector<Tensor>& inputs);

struct BackendEntry {
  std::string name;
  bool aot = false;        // owns autograd (GraphSink::owns_autograd)
  bool decompose = false;  // lower composites to prims first
  std::function<Runnable(const Graph& g, CompileContext& ctx)> compile;
  // Runs a symbolic graph for every binding of its symbols (Note [Dynamic shapes]); otherwise
  // each binding compiles its own copy, whose attrs are that call's numbers.
  bool symbolic = false;
};

void add_backend(BackendEntry entry);
const BackendEntry* find_backend(const std::string& name);  // null when unknown
std::vector<std::string> backend_names();

// Runs g with eager kernels (below autograd, recording paused). With a
// random state, RANDOM nodes take their (seed, offset) from it through
// g.random_source (Note [Random state as input]).
std::vector<Tensor> run_interpreted(const Graph& g, const std::vector<Tensor>& inputs,
                                    const std::vector<int64_t>* random_state);

// Runs one node with eager kernels, as run_interpreted does: a symbolic graph's attrs
// evaluated with sym_values, a RANDOM node's (seed, offset) from random_state (random_index
// counts the RANDOM nodes run so far, in graph order).
std::vector<Tensor> run_node(const Graph& g, const Node& n, std::span<const Tensor> ins,
                             const std::vector<int64_t>* random_state, size_t& random_index,
                             const std::vector<int64_t>& sym_values);

// Note [Externs into dead inputs]
// index_add, index_put, scatter, scatter_add and scatter_reduce make their output a copy of input 0
// and then change some of its elements. In a training graph input 0 is often a buffer made only for
// them and read by nothing after (the zeros an embedding's gradient is accumulated into): the kernel
// may then write into it, which saves an allocation and a full copy per call (dlrm: eight 25.6 MB
// tables per step). The caller drops its own reference to input 0 when this node is its last use;
// the kernel writes into it only where nothing else holds its TensorImpl or its storage (a view,
// the user, another graph value), so no one can see the difference. Otherwise, or where the node
// cannot (symbolic attrs, no kernel), `outs` stays empty and false says run the node as usual.
// CPU only: the CUDA kernels' first copy is not yet checked for a source that is the destination.
bool writes_into_input0(const Node& n);
bool run_into_dead_input(const Graph& g, const Node& n, std::span<const Tensor> ins, std::vector<Tensor>& outs);

// Inputs handed over: a graph runner (run_interpreted, inductor's) called on this very vector
// (one its caller discards) may move from it, so that each input is freed after its last use in
// the graph: the saved tensors of a compiled backward, as eager's nodes free theirs one by one.
class DonateInputsScope {
 public:
  explicit DonateInputsScope(const std::vector<Tensor>* inputs);
  ~DonateInputsScope();
  DonateInputsScope(const DonateInputsScope&) = delete;
  DonateInputsScope& operator=(const DonateInputsScope&) = delete;
};
// True once, for the runner called on the donated vector: it then owns (may move from) its
// elements. A runner that only passes `inputs` on to another does not call it.
bool take_donated_inputs(const std::vector<Tensor>& inputs);

// The random state of the call whose graphs are running: set by the AOT
// runtime around each lowered graph it calls (forward, and backward later).
const std::vector<int64_t>* current_random_state();
class RandomStateScope {
 public:
  explicit RandomStateScope(const std::vector<int64_t>* state);
  ~RandomStateScope();
  RandomStateScope(const RandomStateScope&) = delete;
  RandomStateScope& operator=(const RandomStateScope&) = delete;

 private:
  const std::vector<int64_t>* prev_;
};

// The AOT pipeline (src/compile/aot/aot.cpp): functionalize, then for a
// differentiable graph the joint forward+backward graph and its min-cut
// partition; decompose; hand each graph to `lower`.
using LowerFn = std::function<GraphFn(const Graph& g)>;
Runnable aot_compile(const Graph& g, CompileContext& ctx, bool decompose, const LowerFn& lower);

}  // namespace kiln::compiler
