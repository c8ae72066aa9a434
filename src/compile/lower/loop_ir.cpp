#include "compile/lower/loop_ir.h"

#include <algorithm>
#include <sstream>

namespace kiln::compiler::lower {

// Note [Loop IR]
// A kernel's dims are in loop order (the scheduler chose it from the memory
// layout: Note [Loop order]); `reduced` marks the dims its reductions run
// over. Expressions are SSA in definition order: a Load reads one element of
// an input buffer at an affine Index of the loop variables, a Pointwise applies
// one prim of the op table (its shared scalar functor, in the compute dtype
// its eager kernel uses), a Reduce folds its argument over the reduced dims.
// A Store writes an expression at an Index of an output buffer. Nothing here
// says how the loops run (threads, vectors, blocks): that is the emitter's.

bool Index::constant() const {
  return std::all_of(coeffs.begin(), coeffs.end(), [](int64_t c) { return c == 0; });
}

const char* reduce_name(ReduceOp r) {
  switch (r) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Prod: return "prod";
    case ReduceOp::Max: return "amax";
    case ReduceOp::Min: return "amin";
  }
  return "?";
}

int64_t LoopKernel::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

int LoopKernel::num_inputs() const {
  return static_cast<int>(std::count_if(buffers.begin(), buffers.end(), [](const Buffer& b) { return !b.output; }));
}

int LoopKernel::num_reduced() const { return static_cast<int>(std::count(reduced.begin(), reduced.end(), true)); }

int LoopKernel::num_phases() const {
  // A pass for each phase that accumulates a reduction or computes a value along the reduced dims
  // (a per-point value of the last phase needs none, but counting it keeps this simple).
  int p = 1;
  for (const Expr& e : exprs) p = std::max(p, e.phase + 1);
  return p;
}

std::vector<std::vector<bool>> LoopKernel::varies() const {
  std::vector<std::vector<bool>> v(exprs.size(), std::vector<bool>(sizes.size(), false));
  for (size_t e = 0; e < exprs.size(); ++e) {
    const Expr& x = exprs[e];
    if (x.kind == ExprKind::Load) {
      for (size_t d = 0; d < sizes.size(); ++d) v[e][d] = x.index.coeffs[d] != 0;
      continue;
    }
    for (int a : x.args)
      for (size_t d = 0; d < sizes.size(); ++d) v[e][d] = v[e][d] || v[static_cast<size_t>(a)][d];
    if (x.kind == ExprKind::Reduce)
      for (size_t d = 0; d < sizes.size(); ++d) v[e][d] = v[e][d] && !reduced[d];
  }
  return v;
}

namespace {

std::string index_str(const Index& ix) {
  std::string s;
  for (size_t d = 0; d < ix.coeffs.size(); ++d) {
    if (ix.coeffs[d] == 0) continue;
    if (!s.empty()) s += " + ";
    s += (ix.coeffs[d] == 1 ? "" : std::to_string(ix.coeffs[d]) + "*") + "i" + std::to_string(d);
  }
  if (ix.offset != 0 || s.empty()) s += (s.empty() ? "" : " + ") + std::to_string(ix.offset);
  return s;
}

}  // namespace

std::string LoopKernel::str() const {
  std::ostringstream os;
  os << "kernel [";
  for (size_t d = 0; d < sizes.size(); ++d) os << (d ? ", " : "") << sizes[d] << (reduced[d] ? "r" : "");
  os << "] phases " << num_phases() << "\n";
  int in = 0, out = 0;
  std::vector<std::string> bname;
  for (const Buffer& b : buffers) {
    bname.push_back(b.output ? "out" + std::to_string(out++) : "in" + std::to_string(in++));
    os << "  " << bname.back() << " = %" << b.value << " " << dtype_name(b.dtype) << "\n";
  }
  for (size_t e = 0; e < exprs.size(); ++e) {
    const Expr& x = exprs[e];
    os << "  e" << e << " = ";
    switch (x.kind) {
      case ExprKind::Load: os << "load " << bname[static_cast<size_t>(x.buffer)] << "[" << index_str(x.index) << "]"; break;
      case ExprKind::Pointwise: os << op_name(x.op); break;
      case ExprKind::Reduce: os << reduce_name(x.reduce); break;
    }
    if (x.kind != ExprKind::Load) {
      os << "(";
      for (size_t a = 0; a < x.args.size(); ++a) os << (a ? ", " : "") << "e" << x.args[a];
      os << ")";
    }
    os << " : " << dtype_name(x.dtype);
    if (x.kind == ExprKind::Pointwise && x.compute != x.dtype) os << " in " << dtype_name(x.compute);
    if (x.kind == ExprKind::Reduce) os << " acc " << dtype_name(x.acc);
    if (x.phase) os << " phase " << x.phase;
    os << "\n";
  }
  for (const Store& s : stores)
    os << "  store " << bname[static_cast<size_t>(s.buffer)] << "[" << index_str(s.index) << "] = e" << s.expr << "\n";
  return os.str();
}

}  // namespace kiln::compiler::lower
