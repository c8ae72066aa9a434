// The captured graph: table-level ops over values, as recorded (Note [Record
// layer]). A value is a buffer, not an SSA name: a node flagged MUTATES
// (copy_, the foreach updates) writes its first input in place, and views
// alias their input, so running the nodes in order with eager kernels
// reproduces eager exactly. Functionalization (src/compile/aot/) turns this
// into a pure graph for the passes that need one.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/sym_table.h"
#include "ops/registry.h"

namespace kiln::compiler {

struct Value {
  TensorMeta meta;  // sizes, strides, storage_offset, dtype, device
  int node = -1;    // producing node; -1 for a graph input
  int index = 0;    // which output of `node`, or which graph input
  bool requires_grad = false;
  bool wrapped_number = false;  // a graph input made from a C++ number: promotes like one
  Shape sym;                    // symbolic sizes as raw SymInts (Note [Dynamic shapes]); empty: meta.sizes
};

// Symbol `symbol` of a graph's table is dim `dim` of graph input `input`.
struct SymSource {
  int symbol;
  int input;
  int dim;
};

struct Node {
  OpId op;
  Attrs attrs;
  std::vector<int> inputs;   // value ids; -1 for an absent optional tensor
  std::vector<int> outputs;  // value ids
  bool no_grad = false;      // a constant for autograd (Note [No-grad nodes] in dispatch.h)
  uint32_t detached = 0;     // bit k: input k read through a detach()ed alias (Note [Detached inputs])
};

struct Graph {
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<int> inputs;   // value ids of the graph inputs, in order
  std::vector<int> outputs;  // value ids the caller receives, in order
  // Per RANDOM node, in node order: which (seed, offset) pair of the random
  // state passed at run time it draws from (Note [Random state as input]).
  // Empty: the graph's own RANDOM nodes in order (a captured graph).
  std::vector<int> random_source;
  // Per output, the graph input whose buffer receives it after the graph runs (the caller's
  // write-back of a mutated input, Note [Writing into inputs]), -1 for none; empty: none at all.
  // A backend may store such an output into that input directly where nothing reads the
  // input's old value afterwards.
  std::vector<int> write_targets;
  // Per input, the tensor every call binds it to where that is fixed when compiling (the scalars
  // a decomposition made constants, Recording::take), undefined where the caller's; empty: none
  // known. Passes that match values read it (Note [GEMM epilogues]).
  std::vector<Tensor> input_constants;
  // Note [Dynamic shapes]: the expressions that symbolic attrs (Attrs::symbolic_values) and
  // Value::sym refer to, and where each symbol comes from. Empty for a static graph; node
  // attrs' values() are then the only attrs, else they are this call's values of the expressions.
  std::vector<SymNode> sym_nodes;
  std::vector<SymSource> sym_sources;
  bool is_symbolic() const { return !sym_sources.empty(); }
  // The symbols' values for these inputs, and every node's value under them.
  std::vector<int64_t> sym_values(const std::vector<Tensor>& inputs) const;

  int add_input(const TensorMeta& m, bool requires_grad, bool wrapped_number = false);
  // Appends a node and one new value per meta; returns the node's index.
  int add_node(OpId op, Attrs attrs, std::vector<int> inputs, const std::vector<TensorMeta>& outs);

  // One node a line, `%7 = mul(%3, %5) : f32[8, 1024]`, like FX's print_readable.
  std::string str(const std::string& name = "graph") const;
  // Throws kiln::Error naming the first inconsistency (used after every pass in tests).
  void verify() const;
  size_t num_ops() const { return nodes.size(); }
};

// Note [Random state as input]
// A RANDOM op's Philox (seed, offset) are its last two attrs, which the
// public function reserved from the generator. They are left out of the
// graph's hash, and each call passes the values its own recording saw, so a
// cached graph draws exactly the numbers eager would, and the generator
// advances by what the graph consumed (the recording reserved it).
std::vector<int64_t> random_state(const Graph& g);
bool is_random_attr(const OpInfo& info, size_t attr_index, size_t num_attrs);
// For a graph derived from `source` (functionalized, decomposed, partitioned):
// points each RANDOM node at the source's pair with the same (seed, offset).
void map_random_source(Graph& derived, const Graph& source);

std::string meta_str(const TensorMeta& m);
// An op's attr names, from its ops.def signature: "(T x; ints dim, bool keepdim)" → dim, keepdim.
const std::vector<std::string>& op_attr_names(OpId op);
// With symbolic sizes (raw SymInts over `nodes`) where `sym` is not empty.
std::string meta_str(const TensorMeta& m, const Shape& sym, const std::vector<SymNode>& nodes);
// A node's attrs with every symbolic value evaluated (sym_values' result).
Attrs evaluate_attrs(const Attrs& attrs, const std::vector<int64_t>& values);

}  // namespace kiln::compiler
