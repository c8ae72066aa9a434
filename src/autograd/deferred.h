// Autograd nodes for tracer ops, built only when something needs them
// (Note [Deferred tracer autograd]).
#pragma once
#include <memory>
#include <vector>

#include "ops/registry.h"

namespace kiln::autograd {

struct Node;
struct DeferredBuffers;

// Note [Deferred tracer autograd]
// While a compiled function's code is recorded with inputs that require grad, the autograd
// layer would build an OpNode per op on tracers, as in eager (about half of what recording
// costs). For an AOT backend those nodes are thrown away at the graph's end: the backend
// builds the backward from the graph. So the layer only notes what the node would hold (the
// op, its attrs and inputs, weak handles to its outputs and the versions to check) and marks
// each floating output with a shared placeholder grad_fn, so requires_grad(), is_leaf() and
// the graph's hash read as in eager. Anything that needs the real graph goes through
// gradient_edge(), grad_fn() or a hook and calls materialize_deferred() first: backward()
// on a tracer (whole-step capture), a custom Function, an in-place op taking over a
// history, a graph whose backend keeps eager's autograd. The nodes are then built in op
// order from what was noted, exactly as eager would have built them.
// What it notes holds the ops' inputs and outputs (tracers, cheap) until the graph ends, so
// the recording drops or builds the nodes before it decides which tracers are still alive.
class DeferredGraph {
 public:
  DeferredGraph();
  ~DeferredGraph();
  DeferredGraph(const DeferredGraph&) = delete;
  DeferredGraph& operator=(const DeferredGraph&) = delete;

  // Notes the node of an op that ran (below autograd) and marks its outputs.
  void add(OpId op, std::vector<Tensor>&& inputs, Attrs&& attrs, std::vector<Tensor>& outputs);
  // Builds the nodes noted so far and gives their outputs their grad_fn.
  void materialize();
  // Forgets the nodes noted so far (their backward is built elsewhere).
  void clear();
  bool empty() const { return entries_.empty(); }
  // Whether a tensor that a noted node would save was written since its op ran: eager's
  // backward would raise "modified by an in-place operation" (Note [Saved tracer versions]).
  bool saved_modified() const;
  // Appends (version counter, version when saved) of every tensor the deferred nodes would save
  // (Note [Versions eager would check]).
  void saved_versions(std::vector<std::pair<std::shared_ptr<VersionCounter>, uint32_t>>& out,
                      std::vector<int64_t>* producers = nullptr) const;
  DeferredGraph* prev() const { return prev_; }

 private:
  friend struct DeferredBuffers;
  struct Entry {
    OpId op;
    Attrs attrs;
    std::vector<Tensor> inputs;
    uint32_t first_output, num_outputs;
  };
  std::vector<Entry> entries_;
  std::vector<Tensor> outputs_;
  std::vector<uint32_t> input_versions_, output_versions_;  // when the op ran, in order
  DeferredGraph* prev_;
  bool materializing_ = false;
  bool owns_buffers_ = false;  // holds the thread's spare lists (Note [Recording buffers])
  void swap_buffers();
};

// The placeholder grad_fn of outputs whose node is deferred.
const std::shared_ptr<Node>& deferred_node();
// Builds every deferred node of this thread's recordings (no-op when there are none).
void materialize_deferred();
// True while deferred nodes are being built: their edges are the history at the time their op
// ran, so a view is not rebased on a later write (Note [View rebase]).

// Gives `view` the history eager's view rebase gives it: an as_strided node of `base` (a
// tensor sharing its storage that requires grad) with the view's geometry, built without a
// kernel. Used where the node cannot be recorded as the op runs (materializing deferred nodes,
// a compiled graph's view of a written input).
void set_as_strided_history(const Tensor& view, const Tensor& base);
bool materializing_deferred();
// This thread's nodes deferred and, of those, built (for tests and benchmarks).
struct DeferredCounts {
  uint64_t deferred = 0, built = 0;
};
DeferredCounts deferred_counts();

}  // namespace kiln::autograd
