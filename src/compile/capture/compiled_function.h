// The state behind one compiled function or module: options, the cache of
// compiled graphs per call site, statistics (Note [Capture semantics]).
#pragma once
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
  void run(const std::function<void()>& body);
  void clear_cache();

  bool owns_autograd(const Graph& graph) const override { return backend_->aot && aot_supports(graph, nullptr); }
  GraphResult run_graph(int graph_index, Graph& graph, uint64_t hash, const std::vector<Tensor>& inputs,
                        bool differentiable) override;
  void on_break(int graph_index, const std::string& op, const std::string& reason) override;

  CompileStats stats_;
  const CompileOptions options_;

 private:
  struct Entry {
    uint64_t hash;
    Runnable run;
    std::vector<TensorMeta> input_metas;
    std::vector<OpId> ops;
  };
  std::string recompile_reason(const std::vector<Entry>& entries, const Graph& g,
                               const std::vector<Tensor>& inputs) const;
  const BackendEntry* backend_;
  std::mutex mu_;                            // one call at a time
  std::map<int, std::vector<Entry>> cache_;  // graph index within a call → compiled graphs
  bool fallback_ = false;
};

// The first stack frame outside libkiln ("?" when unknown): the user's call site.
std::string user_call_site();

}  // namespace kiln::compiler
