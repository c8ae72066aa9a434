// The scheduler (the TorchInductor role): a pure graph of prims becomes a list
// of steps, each an extern call (an eager kernel: matmul, conv, views,
// indexing, ...) or a loop kernel (loop_ir.h) that computes a fused group of
// pointwise prims and reductions over one iteration space (Note [Loop kernels]).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "compile/ir/graph.h"
#include "compile/lower/loop_ir.h"

namespace kiln::compiler::lower {

struct Step {
  bool is_kernel;
  int index;  // node index (extern) or kernel index
};

struct Schedule {
  std::vector<LoopKernel> kernels;
  std::vector<Step> steps;
  // Nodes fused into kernels / run as externs, for logs and tests.
  int fused_nodes = 0;
  int extern_nodes = 0;
  std::vector<std::string> closed_by;  // per kernel: what ended it (another shape, an extern reading it, ...)
  std::string str(const Graph& g) const;  // KILN_LOGS=fusion
};

// Groups g's nodes into kernels (Note [Loop kernels]); g must be pure (functionalized).
Schedule schedule(const Graph& g);

// Note [Loop order]: dims `kept` then `red`, each by decreasing |stride| in the primary
// operand's `strides` (kept as given without them); where `column`, a kept dim whose stride is
// below every reduced dim's goes innermost (the column form).
std::vector<size_t> loop_order(std::vector<size_t> kept, std::vector<size_t> red, const std::vector<int64_t>* strides,
                               bool column);

// A value's strides: its meta's, or contiguous where the meta has none (non-view outputs).
std::vector<int64_t> value_strides(const Value& v);

}  // namespace kiln::compiler::lower
