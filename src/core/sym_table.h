// The expressions behind symbolic SymInts (Note [SymInt encoding]): one table
// per recording, active on its thread while the user's code runs.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/symint.h"

namespace kiln {

struct SymNode {
  detail::SymOp op = detail::SymOp::Symbol;
  int64_t a = 0, b = 0;  // operands as raw SymInts; a Symbol's `a` is its number
  int64_t hint = 0;      // the value in this call
  uint64_t hash = 0;     // structural: the same expression over the same symbols hashes the same
  int graph = -1;        // the graph whose inputs bind its symbols; -1 when it mixes graphs
};

class SymTable {
 public:
  SymTable();
  // A new symbol for a graph input's dimension, bound in the current graph.
  int64_t symbol(int64_t hint);
  int64_t apply(detail::SymOp op, int64_t a, int64_t b);
  // A raw SymInt of this table (tag and generation match).
  bool owns(int64_t raw) const;
  const SymNode& node(int64_t raw) const;
  int64_t hint(int64_t raw) const { return SymInt::raw_is_symbolic(raw) ? node(raw).hint : raw; }
  uint64_t hash(int64_t raw) const;
  // The graph a raw value can be used in: -2 for a concrete value (any graph).
  int graph_of(int64_t raw) const;
  void begin_graph(int g) { graph_ = g; }
  // The graph g was dropped (it recorded no op) and its index goes to the next one: its
  // symbols are bound nowhere, so that graph must not take them for its own (they read as
  // plain numbers there, as another graph's do).
  void retire_graph(int g) {
    for (SymNode& n : nodes_)
      if (n.graph == g) n.graph = kRetired;
  }
  static constexpr int kRetired = -3;
  int current_graph() const { return graph_; }
  int num_symbols() const { return num_symbols_; }
  const std::vector<SymNode>& nodes() const { return nodes_; }
  const std::vector<size_t>& symbol_nodes() const { return symbol_nodes_; }  // node index of each symbol
  int64_t raw_of(size_t index) const;  // the tagged value of node `index`
  static int64_t index_of(int64_t raw) { return raw & kIndexMask; }
  static constexpr int64_t kIndexMask = (int64_t{1} << 28) - 1;

 private:
  int64_t make(SymNode n);
  std::vector<SymNode> nodes_;
  std::vector<size_t> symbol_nodes_;
  uint32_t generation_;
  int graph_ = 0;
  int num_symbols_ = 0;
};

// This thread's active table (null outside a recording that made symbols).
SymTable* active_sym_table();
// True while symbolic SymInts can exist on this thread (Attrs splits its values then).
bool symbols_live();
class SymTableScope {
 public:
  explicit SymTableScope(SymTable* t);  // null hides the outer table
  ~SymTableScope();
  SymTableScope(const SymTableScope&) = delete;
  SymTableScope& operator=(const SymTableScope&) = delete;

 private:
  SymTable* prev_;
};

// A table copied into a graph: evaluates and prints raw values by node index
// (the generation bits are ignored there).
std::string sym_str(int64_t raw, const std::vector<SymNode>& nodes);
// values[i]: node i's value under some binding of the symbols (symbol_values[k] for symbol k).
std::vector<int64_t> sym_evaluate(const std::vector<SymNode>& nodes, const std::vector<int64_t>& symbol_values);
inline int64_t sym_value(int64_t raw, const std::vector<int64_t>& values) {
  return SymInt::raw_is_symbolic(raw) ? values[static_cast<size_t>(SymTable::index_of(raw))] : raw;
}

}  // namespace kiln
