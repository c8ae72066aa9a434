// The state behind one compiled function or module: options, the cache of
// compiled graphs per call site, statistics (Note [Capture semantics]).
#pragma once
#include <atomic>
#include <map>
#include <mutex>
#include <vector>

#include "compile/backends/backend.h"
#include "compile/capture/recording.h"
#include "kiln/compile.h"

namespace kiln::compiler {

class CompiledFunction final : public GraphSink {
 public:
  explicit CompiledFunction(CompileOptions options);  // validates the options
  ~CompiledFunction() override;
  void run(const std::function<void()>& body, const std::vector<Tensor>& args);
  bool replay(const CompiledState::PureCall& call, std::vector<Tensor>& outs);
  void run_pure(const std::function<void()>& body, const CompiledState::PureCall& call);
  // Drops every compiled graph; during a call of this function (from its own body, or another
  // thread) the drop happens when that call ends (Note [Compile threads]).
  void clear_cache();

  bool owns_autograd() const override { return backend_->aot; }
  GraphResult run_graph(int graph_index, Graph& graph, uint64_t hash, const std::vector<Tensor>& inputs,
                        bool differentiable) override;
  void on_break(int graph_index, const std::string& op, const std::string& reason) override;
  uint64_t dynamic_dims(int graph_index, int slot, const Tensor& t) override;
  std::shared_ptr<const Graph> expected_graph(int graph_index) override;
  bool run_replayed(int graph_index, const Graph& expected, const Graph& values, uint64_t hash,
                    const std::vector<Tensor>& inputs, const std::vector<int64_t>& random,
                    GraphResult& result) override;

  CompileStats stats_;
  std::shared_ptr<KernelCounts> kernel_counts_ = std::make_shared<KernelCounts>();
  const CompileStats& stats();  // stats_ with the kernel counts of the graphs run so far
  const CompileOptions options_;

 private:
  struct Entry {
    uint64_t hash;
    Runnable run;
    std::vector<TensorMeta> input_metas;
    std::vector<OpId> ops;
    bool symbolic = false;
    std::shared_ptr<const Graph> graph;  // as captured: what the next call's trace is checked against
    // Note [Confirmed hits]: the graph as captured (symbolic ones too), its inputs' aliasing and
    // whether it was compiled differentiable: a hash hit runs the entry only if these agree.
    std::shared_ptr<const Graph> structure;
    std::vector<int> alias;
    bool differentiable = false;
    // A symbolic graph on a backend that takes numbers: one compile per binding of the
    // symbols, the latest kSpecializations kept (Note [Dynamic shapes]).
    std::vector<std::pair<std::vector<int64_t>, Runnable>> specs;
    // Bindings first seen past recompile_limit, compiled by "aot_eager" (Note [Specialization limit]).
    std::vector<std::pair<std::vector<int64_t>, Runnable>> fallback_specs;
  };
  // Compiles `graph` for a new binding of its symbols, and keeps it in e (Note [Specialization limit]).
  Runnable compile_binding(int graph_index, const Graph& graph, CompileContext& ctx,
                           const std::vector<int64_t>& binding, Entry& e);
  // Per graph index: the backend's compiles there, graphs and specializations (Note [Specialization limit]).
  std::map<int, int> backend_compiles_;
  static constexpr size_t kSpecializations = 16;
  // Automatic dynamic shapes: each graph input slot's first sizes, and the dims seen to change.
  struct SeenInput {
    Shape sizes;
    uint64_t dynamic = 0;
  };
  std::map<int, std::vector<SeenInput>> seen_;
  void run_impl(const std::function<void()>& body, const CompiledState::PureCall* pure,
                const std::vector<Tensor>& args);
  void remember_last(const Graph& graph, const std::vector<Tensor>& inputs, const Runnable& run);
  void remember_pure(const CompiledState::PureCall& call,
                     const std::vector<std::pair<const TensorImpl*, int64_t>>& returned,
                     const std::vector<bool>& returned_grad);
  std::string recompile_reason(const std::vector<Entry>& entries, const Graph& g,
                               const std::vector<Tensor>& inputs) const;
  // Note [assume_pure] (compile.h): one graph that a call's guards select without re-running it.
  struct PureEntry {
    uint64_t key;
    bool grad_mode;
    std::vector<TensorMeta> arg_meta;
    std::vector<bool> arg_requires_grad;
    std::vector<int> input_from;   // per graph input: >= 0 an argument, else -1 - index into captured
    std::vector<Tensor> captured;  // tensors the code reached, held by identity
    std::vector<int> bump;         // graph inputs the graph writes (their versions move on)
    std::vector<int> output_from;  // per returned tensor: its graph output
    std::vector<bool> output_grad;  // per returned tensor: it requires grad (a detach()ed alias does not)
    std::vector<int> alias;        // the inputs' aliasing when compiled (Note [Aliased inputs])
    Runnable run;
    // The guards of the captured tensors in one flat block (read on every replay), and the
    // graph's inputs with the captured ones in place (the arguments' slots filled per call).
    struct Guard {
      const TensorImpl* impl;
      DType dtype;
      Device device;
      bool requires_grad;
      uint32_t rank;
      int64_t storage_offset;
      size_t at;                  // sizes then strides in `dims`
      const void* autograd_hint;  // impl->autograd when the entry was made: prefetched, never read
    };
    std::vector<Guard> guards;
    std::vector<int64_t> dims;
    std::vector<Tensor> inputs;
  };
  // What the latest run_graph ran, for run_pure to turn into a PureEntry.
  struct LastGraph {
    std::vector<Tensor> inputs;
    std::vector<int> outputs;  // value ids
    std::vector<int> bump;
    bool random = false;
    Runnable run;
  };
  const BackendEntry* backend_;
  std::vector<PureEntry> pure_;
  LastGraph last_;
  int breaks_total_ = 0;
  std::mutex mu_;  // one call at a time (Note [Compile threads])
  std::atomic<bool> clear_pending_{false};
  void clear_locked();
  std::map<int, std::vector<Entry>> cache_;  // graph index within a call → compiled graphs
  // Per graph index: the entry the latest call ran (Note [Trace replay]).
  std::map<int, std::shared_ptr<const Graph>> latest_;
  bool fallback_ = false;
};

// The first stack frame outside libkiln ("?" when unknown): the user's call site.
std::string user_call_site();

}  // namespace kiln::compiler
