// The min-cut partitioner (AOTAutograd's min_cut_rematerialization_partition):
// splits a joint forward+backward graph into a forward graph, which also
// returns what the backward needs, and a backward graph, which recomputes
// cheap pointwise chains instead of saving them.
#pragma once
#include <vector>

#include "compile/ir/graph.h"

namespace kiln::compiler {

struct SavedSource {
  bool from_input;  // a non-tangent joint input (index among them), else a forward output
  int index;
};

struct Partition {
  Graph forward;   // inputs: the joint's non-tangent inputs; outputs: its forward outputs, then saved intermediates
  Graph backward;  // inputs: saved, tangents, backward_constants; outputs: the joint's gradient outputs
  std::vector<int> forward_inputs;      // per forward input: index among the joint's non-tangent inputs
  std::vector<SavedSource> saved;       // per saved tensor (the backward's first inputs)
  std::vector<int> backward_constants;  // per backward constant input: index among non-tangent inputs
  std::vector<int> backward_outputs;    // per backward output: its index in the joint's outputs
  size_t saved_bytes = 0;               // saved intermediates
  size_t saveall_bytes = 0;             // every forward intermediate (what saving all would keep)
};

// joint: inputs are primals [0, n_primals), tangents [n_primals, +n_tangents),
// then constants; nodes [0, n_forward_nodes) are the forward; outputs are
// n_forward_outputs forward values, then gradients.
// recompute = false saves every forward value the backward reads (AOTAutograd's default
// partition): the fastest split when the graphs run unfused eager kernels.
// pinned_primals (per primal; may be empty): inputs saved (they or a view of them) only where the
// backward reads them itself, never to recompute a value from them (Note [Saved versions] in
// aot.cpp): those the forward writes back, and those eager's autograd does not save.
Partition min_cut_partition(const Graph& joint, size_t n_primals, size_t n_tangents, size_t n_forward_nodes,
                            size_t n_forward_outputs, bool recompute = true,
                            const std::vector<bool>& pinned_primals = {});

// The subgraph computing `outputs` from `inputs` (value ids of g), in g's node order; nodes
// [0, sink_before) are placed instead just before their first consumer (Note [Recompute where
// used]), the others keep g's order.
Graph extract(const Graph& g, const std::vector<int>& inputs, const std::vector<int>& outputs,
              size_t sink_before = 0);

}  // namespace kiln::compiler
