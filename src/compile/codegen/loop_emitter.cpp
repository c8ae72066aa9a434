#include "compile/codegen/loop_emitter.h"

#include "compile/codegen/pointwise_ops.h"

namespace kiln::compiler::codegen {

using lower::Expr;
using lower::ExprKind;
using lower::ReduceOp;

std::string Reducer::result(const std::string& acc) const {
  std::string s = result_fmt;
  s.replace(s.find('@'), 1, acc);
  return s;
}

Reducer reducer(const Expr& e) {
  const std::string ot = cpp_type(e.dtype), at = cpp_type(e.acc);
  Reducer r;
  r.acc_type = e.acc == DType::Int64 && (e.reduce == ReduceOp::Sum || e.reduce == ReduceOp::Prod) ? "uint64_t" : at;
  if (e.reduce == ReduceOp::Sum || e.reduce == ReduceOp::Prod) {
    const bool sum = e.reduce == ReduceOp::Sum;
    const std::string op = sum ? " += " : " *= ";
    r.init = sum ? "0" : "1";
    if (is_floating_point(e.dtype)) {
      // torch casts the input to the result dtype first.
      r.step = [op, ot, at](const std::string& a, const std::string& x) {
        return a + op + "kiln::convert<" + at + ">(kiln::convert<" + ot + ">(" + x + "));";
      };
      r.result_fmt = "kiln::convert<" + ot + ">(@)";
    } else {
      // Integers wrap (two's complement) without signed overflow.
      r.step = [op, ot](const std::string& a, const std::string& x) {
        return a + op + "static_cast<uint64_t>(static_cast<int64_t>(kiln::convert<" + ot + ">(" + x + ")));";
      };
      r.result_fmt = "kiln::convert<" + ot + ">(static_cast<int64_t>(@))";
    }
    r.combine = [op](const std::string& a, const std::string& p) { return a + op + p + ";"; };
    return r;
  }
  const bool max = e.reduce == ReduceOp::Max;
  const bool fp = is_floating_point(e.acc);
  if (fp)
    r.init = max ? "-std::numeric_limits<" + at + ">::infinity()" : "std::numeric_limits<" + at + ">::infinity()";
  else
    r.init = max ? "std::numeric_limits<" + at + ">::lowest()" : "std::numeric_limits<" + at + ">::max()";
  // A NaN sticks: once a is NaN no comparison is true, and a NaN v always wins.
  auto pick = [max, fp, at](const std::string& a, const std::string& v) {
    return "{ const " + at + " v_ = " + v + "; if (v_ " + (max ? ">" : "<") + " " + a + (fp ? " || v_ != v_" : "") +
           ") " + a + " = v_; }";
  };
  r.step = [pick, at](const std::string& a, const std::string& x) { return pick(a, "kiln::convert<" + at + ">(" + x + ")"); };
  r.combine = pick;
  r.result_fmt = "kiln::convert<" + ot + ">(@)";
  return r;
}

LoopEmitter::LoopEmitter(const lower::LoopKernel& k) : k_(k), varies_(k.varies()) {
  const size_t rank = k.sizes.size();
  for (size_t d = 0; d < rank; ++d) vars_.push_back("i" + std::to_string(d));
  for (const Expr& e : k.exprs) has_reduce_ = has_reduce_ || e.kind == ExprKind::Reduce;
  for (size_t e = 0; e < k.exprs.size(); ++e) {
    bool any = false, along_reduced = false;
    for (size_t d = 0; d < rank; ++d) {
      any = any || varies_[e][d];
      along_reduced = along_reduced || (varies_[e][d] && k.reduced[d]);
    }
    invariant_.push_back(!any);
    along_reduced_.push_back(along_reduced);
  }
  hoisted_.assign(k.exprs.size(), false);
}

std::string LoopEmitter::num(int64_t v) {
  if (v == 0 || v == 1) return std::to_string(v);
  params_.push_back(v);
  return "P" + std::to_string(params_.size() - 1);
}

std::string LoopEmitter::index_expr(const lower::Index& ix) {
  std::string s;
  for (size_t d = 0; d < ix.coeffs.size(); ++d) {
    const int64_t c = ix.coeffs[d];
    if (c == 0) continue;
    if (!s.empty()) s += " + ";
    s += c == 1 ? vars_[d] : vars_[d] + " * " + num(c);
  }
  if (ix.offset) s += (s.empty() ? "" : " + ") + num(ix.offset);
  return s.empty() ? "0" : s;
}

std::string LoopEmitter::name(int e) const {
  const Expr& x = k_.exprs[static_cast<size_t>(e)];
  return (x.kind == ExprKind::Reduce ? "r" : "v") + std::to_string(e);
}

void LoopEmitter::name_buffers() {
  int in = 0, out = 0;
  for (const lower::Buffer& b : k_.buffers) bufname_.push_back(b.output ? "out" + std::to_string(out++) : "in" + std::to_string(in++));
}

void LoopEmitter::emit_hoisted() {
  // One pass in definition order (arguments come first): whether each depends on a reduction.
  std::vector<bool> top(k_.exprs.size(), false), after_reduce(k_.exprs.size(), false);
  for (size_t e = 0; e < k_.exprs.size(); ++e) {
    const Expr& x = k_.exprs[e];
    after_reduce[e] = x.kind == ExprKind::Reduce;
    for (int a : x.args) after_reduce[e] = after_reduce[e] || after_reduce[static_cast<size_t>(a)];
    top[e] = invariant_[e] && !after_reduce[e];
  }
  emit_exprs(top, "  ", {});
  hoisted_ = top;
}

void LoopEmitter::emit_exprs(const std::vector<bool>& which, const std::string& ind, const std::vector<bool>& skip) {
  for (size_t e = 0; e < k_.exprs.size(); ++e) {
    if (!which[e] || (!skip.empty() && skip[e])) continue;
    const Expr& x = k_.exprs[e];
    const std::string t = cpp_type(x.dtype);
    if (x.kind == ExprKind::Load) {
      os_ << ind << "const " << t << " " << name(static_cast<int>(e)) << " = ";
      if (e < load_override_.size() && !load_override_[e].empty())
        os_ << load_override_[e] << ";\n";
      else if (bool_buffers_as_bytes_ && x.dtype == DType::Bool)
        os_ << "(" << bufname_[static_cast<size_t>(x.buffer)] << "[" << index_expr(x.index) << "] != 0);\n";
      else
        os_ << bufname_[static_cast<size_t>(x.buffer)] << "[" << index_expr(x.index) << "];\n";
    } else if (x.kind == ExprKind::Pointwise) {
      std::vector<std::string> args;
      for (int a : x.args) args.push_back(name(a));
      os_ << ind << "const " << t << " " << name(static_cast<int>(e)) << " = " << pointwise_call(x, args) << ";\n";
    }
  }
}

std::vector<bool> LoopEmitter::closure(const std::vector<int>& roots) const {
  std::vector<bool> need(k_.exprs.size(), false);
  std::vector<int> stack(roots);
  while (!stack.empty()) {
    const int e = stack.back();
    stack.pop_back();
    if (need[static_cast<size_t>(e)] || hoisted_[static_cast<size_t>(e)]) continue;
    const Expr& x = k_.exprs[static_cast<size_t>(e)];
    if (x.kind == ExprKind::Reduce) continue;
    need[static_cast<size_t>(e)] = true;
    for (int a : x.args) stack.push_back(a);
  }
  return need;
}

std::vector<bool> LoopEmitter::per_point(const std::vector<int>& roots) const {
  std::vector<bool> need = closure(roots);
  for (size_t e = 0; e < need.size(); ++e) need[e] = need[e] && !along_reduced_[e];
  return need;
}

void LoopEmitter::emit_stores(const std::vector<int>& stores, const std::string& ind) {
  for (int s : stores) {
    const lower::Store& st = k_.stores[static_cast<size_t>(s)];
    os_ << ind << bufname_[static_cast<size_t>(st.buffer)] << "[" << index_expr(st.index) << "] = " << name(st.expr)
        << ";\n";
  }
}

void LoopEmitter::split_stores(std::vector<std::vector<int>>& in_phase, std::vector<int>& after) const {
  in_phase.assign(static_cast<size_t>(k_.num_phases()), {});
  for (size_t s = 0; s < k_.stores.size(); ++s) {
    const int e = k_.stores[s].expr;
    const Expr& x = k_.exprs[static_cast<size_t>(e)];
    // A value constant along the reduced dims may still be stored at every point of them (an
    // output broadcast from an expanded input): its index decides, not its value.
    bool along = along_reduced_[static_cast<size_t>(e)];
    for (size_t d = 0; d < k_.sizes.size(); ++d) along = along || (k_.reduced[d] && k_.stores[s].index.coeffs[d] != 0);
    if (x.kind != ExprKind::Reduce && along)
      in_phase[static_cast<size_t>(x.phase)].push_back(static_cast<int>(s));
    else
      after.push_back(static_cast<int>(s));
  }
}

std::vector<int> LoopEmitter::reduces_of_phase(int p) const {
  std::vector<int> r;
  for (size_t e = 0; e < k_.exprs.size(); ++e)
    if (k_.exprs[e].kind == ExprKind::Reduce && k_.exprs[e].phase == p) r.push_back(static_cast<int>(e));
  return r;
}

std::vector<int> LoopEmitter::pass_roots(const std::vector<int>& reds, const std::vector<int>& stores) const {
  std::vector<int> roots;
  for (int e : reds) roots.push_back(k_.exprs[static_cast<size_t>(e)].args[0]);
  for (int s : stores) roots.push_back(k_.stores[static_cast<size_t>(s)].expr);
  return roots;
}

}  // namespace kiln::compiler::codegen
