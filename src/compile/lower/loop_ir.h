// The loop-level IR (Note [Loop IR]): one kernel is an iteration space and a
// body of typed expressions — loads through index expressions, the op table's
// pointwise prims, reductions — with the stores that leave it. It knows no
// device: the C++ emitter (src/compile/codegen/) prints it as loops, a CUDA
// emitter maps the same dims to blocks and threads.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ops/registry.h"

namespace kiln::compiler::lower {

// An affine index over the kernel's dims: sum of coeffs[d] * i_d, plus offset
// (elements). A coefficient is 0 where the buffer broadcasts along the dim (or,
// for a reduction's output, along the reduced dims).
struct Index {
  std::vector<int64_t> coeffs;
  int64_t offset = 0;
  bool constant() const;  // the same element at every point
  bool operator==(const Index&) const = default;
};

enum class ExprKind : uint8_t { Load, Pointwise, Reduce };
enum class ReduceOp : uint8_t { Sum, Prod, Max, Min };
const char* reduce_name(ReduceOp r);

struct Expr {
  ExprKind kind;
  DType dtype;            // the value's dtype
  std::vector<int> args;  // expression ids, each defined before this one
  // Load
  int buffer = -1;
  Index index;
  // Pointwise: the prim, its attrs, and the dtype its scalar functor runs in (as its eager
  // kernel picks it) and torch.result_type of its inputs (integer division's modes).
  OpId op{};
  Attrs attrs;
  DType compute = DType::Float32;
  DType promoted = DType::Float32;
  // Reduce: over the kernel's reduced dims, accumulating in `acc`.
  ReduceOp reduce = ReduceOp::Sum;
  DType acc = DType::Float32;
  // Which pass over the reduced dims computes it (Note [Reduction phases]); a reduction's value
  // is available from the next phase on.
  int phase = 0;
};

// A kernel argument: graph value `value`, read (input) or written (output).
struct Buffer {
  int value;
  DType dtype;
  bool output;
};

struct Store {
  int buffer;
  Index index;
  int expr;
};

struct LoopKernel {
  // The iteration space in loop order, outermost first: sizes and which dims reductions run over.
  std::vector<int64_t> sizes;
  std::vector<bool> reduced;
  std::vector<Buffer> buffers;  // inputs first, then outputs
  std::vector<Expr> exprs;
  std::vector<Store> stores;
  std::vector<int> nodes;  // the graph nodes it computes (logs, tests)
  // What the run time checks before calling the code: each input buffer's sizes and strides as
  // compiled (a mismatch runs the nodes with eager kernels instead).
  std::vector<TensorMeta> input_metas;

  int64_t numel() const;
  int num_inputs() const;
  int num_reduced() const;
  int num_phases() const;  // passes over the reduced dims (1 without reductions)
  // Whether expression e's value changes along dim d (a load's index, or any argument's;
  // a reduction's value does not change along reduced dims).
  std::vector<std::vector<bool>> varies() const;
  // Readable form, one expression a line (KILN_LOGS=code, golden tests).
  std::string str() const;
};

}  // namespace kiln::compiler::lower
