// Symbolic sizes of a recorded op's outputs and attrs (Note [Dynamic shapes]).
#pragma once
#include <span>
#include <vector>

#include "core/sym_table.h"
#include "core/tensor_impl.h"
#include "ops/registry.h"

namespace kiln::compiler {

// Note [Dynamic shapes]
// A dynamic dim of a graph input is a symbol; expressions over symbols reach
// a graph through attrs (a size the user computed from x.size(d)) and are
// what its hash sees instead of numbers, so one graph serves every value of
// the symbol. Soundness does not rest on guards: kiln re-runs the user's code
// on every call (Note [Capture semantics]), so every expression is checked
// against this call's numbers as it is recorded (its value is the number the
// meta function used), and running the graph evaluates the same expressions
// with this call's symbols. A symbolic size that does not come from the
// user's SymInts is found by matching numbers to the expressions at hand
// (the inputs' dims, then the symbols): a coincidence (a static size equal
// to a symbol's value) costs at most another graph, never a wrong result.
// Graphs a backend derives (AOT's joint graph, the partition) read plain
// numbers, so a backend that cannot take a symbolic graph gets one per
// binding of the symbols (CompileStats::specializations).

// The symbolic sizes of `inputs[j]` as raw SymInts (its sizes when it has none).
Shape sym_sizes_of(const Tensor& t);
// Attrs with symbolic values where the op's size attrs match an expression at hand;
// values of expressions bound in another graph become plain numbers.
std::vector<AttrValue> symbolic_attrs(SymTable& table, OpId op, std::span<const Tensor> inputs,
                                      const std::vector<AttrValue>& attrs, const std::vector<TensorMeta>& metas);
// Each output's symbolic sizes (raw; empty when all are plain numbers).
std::vector<Shape> symbolic_output_sizes(SymTable& table, OpId op, std::span<const Tensor> inputs,
                                         const std::vector<AttrValue>& attrs, const std::vector<TensorMeta>& metas);

}  // namespace kiln::compiler
