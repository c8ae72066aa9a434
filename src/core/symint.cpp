// Symbolic SymInts: the table behind the tags (Note [SymInt encoding]).
#include <atomic>
#include <sstream>

#include "core/sym_table.h"
#include "kiln/error.h"

namespace kiln {

namespace {
thread_local SymTable* tls_table = nullptr;
std::atomic<uint32_t> g_generation{1};
constexpr int kGenShift = 28;
constexpr uint32_t kGenMask = (1u << 20) - 1;

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

int64_t eval_op(detail::SymOp op, int64_t a, int64_t b) {
  using detail::SymOp;
  switch (op) {
    case SymOp::Add: return a + b;
    case SymOp::Sub: return a - b;
    case SymOp::Mul: return a * b;
    case SymOp::Div: KILN_CHECK(b != 0, "SymInt: division by zero"); return a / b;
    case SymOp::Mod: KILN_CHECK(b != 0, "SymInt: modulo by zero"); return a % b;
    case SymOp::Neg: return -a;
    case SymOp::Symbol: break;
  }
  return 0;
}
}  // namespace

SymTable* active_sym_table() { return tls_table; }
bool symbols_live() { return tls_table && tls_table->num_symbols() > 0; }
SymTableScope::SymTableScope(SymTable* t) : prev_(tls_table) { tls_table = t; }
SymTableScope::~SymTableScope() { tls_table = prev_; }

SymTable::SymTable() : generation_(g_generation.fetch_add(1) & kGenMask) {}

int64_t SymTable::raw_of(size_t index) const {
  return static_cast<int64_t>((SymInt::kTag << 48) | (static_cast<uint64_t>(generation_) << kGenShift) |
                              static_cast<uint64_t>(index));
}

int64_t SymTable::make(SymNode n) {
  KILN_CHECK(nodes_.size() < static_cast<size_t>(kIndexMask), "compile: too many symbolic size expressions in one call");
  nodes_.push_back(n);
  return raw_of(nodes_.size() - 1);
}

int64_t SymTable::symbol(int64_t hint) {
  SymNode n;
  n.op = detail::SymOp::Symbol;
  n.a = num_symbols_++;
  n.hint = hint;
  n.hash = mix(0x5e3b01ull, static_cast<uint64_t>(n.a));
  n.graph = graph_;
  symbol_nodes_.push_back(nodes_.size());
  return make(n);
}

bool SymTable::owns(int64_t raw) const {
  if (!SymInt::raw_is_symbolic(raw)) return false;
  uint32_t gen = static_cast<uint32_t>(static_cast<uint64_t>(raw) >> kGenShift) & kGenMask;
  return gen == generation_ && static_cast<size_t>(index_of(raw)) < nodes_.size();
}

const SymNode& SymTable::node(int64_t raw) const {
  KILN_CHECK(owns(raw),
             "compile: a symbolic size (from x.size(d) while a compiled function was recorded) was used after that "
             "call ended; keep sizes across calls as int64_t");
  return nodes_[static_cast<size_t>(index_of(raw))];
}

uint64_t SymTable::hash(int64_t raw) const {
  return SymInt::raw_is_symbolic(raw) ? node(raw).hash : mix(0xc0257ull, static_cast<uint64_t>(raw));
}

int SymTable::graph_of(int64_t raw) const { return SymInt::raw_is_symbolic(raw) ? node(raw).graph : -2; }

int64_t SymTable::apply(detail::SymOp op, int64_t a, int64_t b) {
  using detail::SymOp;
  bool sa = SymInt::raw_is_symbolic(a), sb = op != SymOp::Neg && SymInt::raw_is_symbolic(b);
  // Identities keep expressions small (and equal where the user wrote x*1).
  if (!sb && op != SymOp::Neg) {
    if ((op == SymOp::Add || op == SymOp::Sub) && b == 0) return a;
    if ((op == SymOp::Mul || op == SymOp::Div) && b == 1) return a;
  }
  if (!sa && op == SymOp::Mul && a == 1) return b;
  if (!sa && op == SymOp::Add && a == 0) return b;
  if (!sa && !sb) return eval_op(op, a, b);
  SymNode n;
  n.op = op;
  n.a = a;
  n.b = op == SymOp::Neg ? 0 : b;
  n.hint = eval_op(op, hint(a), op == SymOp::Neg ? 0 : hint(n.b));
  n.hash = mix(mix(static_cast<uint64_t>(op) + 17, hash(a)), hash(n.b));
  int ga = graph_of(a), gb = op == SymOp::Neg ? -2 : graph_of(n.b);
  n.graph = ga == -2 ? gb : (gb == -2 || gb == ga ? ga : -1);
  return make(n);
}

namespace detail {
int64_t sym_hint(int64_t raw) {
  KILN_CHECK(tls_table,
             "compile: a symbolic size (from x.size(d) while a compiled function was recorded) was used after that "
             "call ended; keep sizes across calls as int64_t");
  return tls_table->node(raw).hint;
}
int64_t sym_apply(SymOp op, int64_t a, int64_t b) {
  KILN_CHECK(tls_table,
             "compile: a symbolic size (from x.size(d) while a compiled function was recorded) was used after that "
             "call ended; keep sizes across calls as int64_t");
  return tls_table->apply(op, a, b);
}
}  // namespace detail

std::ostream& operator<<(std::ostream& os, SymInt s) { return os << s.expect_int(); }

std::string sym_str(int64_t raw, const std::vector<SymNode>& nodes) {
  if (!SymInt::raw_is_symbolic(raw)) return std::to_string(raw);
  const SymNode& n = nodes.at(static_cast<size_t>(SymTable::index_of(raw)));
  using detail::SymOp;
  auto operand = [&](int64_t r) {
    std::string s = sym_str(r, nodes);
    bool compound = SymInt::raw_is_symbolic(r) && nodes.at(static_cast<size_t>(SymTable::index_of(r))).op != SymOp::Symbol;
    return compound ? "(" + s + ")" : s;
  };
  switch (n.op) {
    case SymOp::Symbol: return "s" + std::to_string(n.a);
    case SymOp::Add: return operand(n.a) + " + " + operand(n.b);
    case SymOp::Sub: return operand(n.a) + " - " + operand(n.b);
    case SymOp::Mul: return operand(n.a) + "*" + operand(n.b);
    case SymOp::Div: return operand(n.a) + "/" + operand(n.b);
    case SymOp::Mod: return operand(n.a) + "%" + operand(n.b);
    case SymOp::Neg: return "-" + operand(n.a);
  }
  return "?";
}

std::vector<int64_t> sym_evaluate(const std::vector<SymNode>& nodes, const std::vector<int64_t>& symbol_values) {
  std::vector<int64_t> v(nodes.size(), 0);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const SymNode& n = nodes[i];
    if (n.op == detail::SymOp::Symbol) {
      v[i] = static_cast<size_t>(n.a) < symbol_values.size() ? symbol_values[static_cast<size_t>(n.a)] : n.hint;
      continue;
    }
    v[i] = eval_op(n.op, sym_value(n.a, v), n.op == detail::SymOp::Neg ? 0 : sym_value(n.b, v));
  }
  return v;
}

}  // namespace kiln
