// The loop-level IR and its scheduler (the TorchInductor role, CPU first): a
// pure graph of prims becomes a list of steps, each an extern call (an eager
// kernel: matmul, conv, views, indexing, ...) or a generated loop kernel that
// computes a fused group of pointwise prims and reductions over one iteration
// space (Note [Loop kernels]).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "compile/ir/graph.h"

namespace kiln::compiler::lower {

// A buffer a kernel reads or writes: a graph value, indexed over the kernel's
// iteration dims with these strides (elements; 0 where it broadcasts or, for a
// reduction's output, along the reduced dims).
struct Operand {
  int value;
  std::vector<int64_t> strides;
};

struct Kernel {
  std::vector<int64_t> sizes;  // iteration space, outer→inner: kept dims, then reduced dims
  int num_reduced = 0;         // trailing dims of `sizes` that reductions run over
  std::vector<int> nodes;      // graph nodes computed per point, in graph order
  std::vector<Operand> loads;  // values produced outside the kernel
  std::vector<Operand> stores; // values the kernel materializes (used later or graph outputs)
  // What the run-time check compares before calling the code: each load's sizes and strides
  // as compiled (a mismatch runs the nodes with eager kernels instead).
  std::vector<TensorMeta> load_metas;
  int64_t numel() const;
};

struct Step {
  bool is_kernel;
  int index;  // node index (extern) or kernel index
};

struct Schedule {
  std::vector<Kernel> kernels;
  std::vector<Step> steps;
  // Nodes fused into kernels / run as externs, for logs and tests.
  int fused_nodes = 0;
  int extern_nodes = 0;
  std::string str(const Graph& g) const;  // KILN_LOGS=fusion
};

// Groups g's nodes into kernels (Note [Loop kernels]); g must be pure (functionalized).
Schedule schedule(const Graph& g);

// A value's strides: its meta's, or contiguous where the meta has none (non-view outputs).
std::vector<int64_t> value_strides(const Value& v);

}  // namespace kiln::compiler::lower
