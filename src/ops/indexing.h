// Shared shape logic of the indexing family, used by meta functions and CPU
// kernels alike so both agree on where advanced-indexed dims go.
#pragma once
#include <span>

#include "ops/registry.h"

namespace kiln {

// Note [Advanced indexing layout]
// x[i0, :, i2] with integer index tensors: the index tensors broadcast to a
// shape B. When the indexed dims are adjacent, B replaces them in place
// (result = x dims before, B, x dims after); when a slice separates them, B
// goes first and every non-indexed dim follows in order (PyTorch's rule).
// Either way the result is [P, B, Q] where P and Q are lists of x dims.
struct IndexPlan {
  Shape result;                 // the sizes of x[indices]
  Shape bshape;                 // broadcast shape of the index tensors
  std::vector<int64_t> dims;    // x dims that carry an index tensor, in order
  std::vector<Tensor> indices;  // the index tensors of those dims
  std::vector<int64_t> pre;     // x dims of P
  std::vector<int64_t> post;    // x dims of Q
};

// Validates integer index tensors (undefined = ':') against x and lays out
// the result. Bool masks must have been turned into integer tensors already.
IndexPlan plan_index(IntArrayRef x_sizes, std::span<const Tensor> indices, const char* op);

// Index tensors must be int64 or int32 (torch also accepts those two).
void check_index_dtype(const Tensor& index, const char* op, const char* what = "index");

// The values of an integer CPU tensor, in order, for the value checks torch makes
// before composites that would otherwise accept them (x[idx] wraps a negative
// index; index_select does not). Empty where values cannot be read without a
// graph break or a copy from a device: a tracer, the meta device, CUDA, or while
// recording. So only for a check that a kernel the composite runs makes again
// (an index range that gather or index_select refuses), which a compiled call keeps.
std::vector<int64_t> index_values(const Tensor& t);
// The values for a check that no kernel makes again (embedding_bag's offsets,
// index_fill's range): read while compiling too, a graph break where t is a tracer,
// so a compiled call raises eager's error (Note [Value checks]). Empty where there
// are no values (meta tensors, no elements) and, as index_values, off the CPU.
std::vector<int64_t> checked_index_values(const Tensor& t);
// torch's index_select, embedding and index_add: every index in [0, size), else
// "<op>: index V is out of bounds for dimension D with size N".
void check_index_range(const Tensor& index, int64_t size, int64_t dim, const char* op);

}  // namespace kiln
