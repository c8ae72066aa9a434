#include "compile/codegen/cpp_codegen.h"

#include <algorithm>
#include <functional>
#include <sstream>

#include "compile/codegen/loop_emitter.h"
#include "compile/codegen/pointwise_ops.h"

namespace kiln::compiler::codegen {

// Note [Generated C++]
// Each loop kernel (Note [Loop IR]) becomes one extern "C" function, its loops
// in the IR's order. Operands are typed __restrict pointers indexed with
// compile-time strides (the run time checks the buffers match), so a
// contiguous kernel is one flat loop the compiler vectorizes; expressions that
// vary along no dim (a 0-d scalar) are computed once, before the loops. Three
// forms, by where the reduced dims sit:
// - pointwise: OpenMP over the collapsed outer loops, the innermost vectorized;
// - row (reduced dims innermost): OpenMP over the kept loops; inside, one pass
//   over the reduced loops per phase (Note [Reduction phases]), each with its
//   accumulators in registers (`omp simd reduction`: vector lanes of partial
//   sums), then the per-point values and stores. Without kept dims (a full
//   reduction) the outermost reduced loop is split across the threads, each
//   with partial accumulators, combined in thread order;
// - column (a kept dim innermost, under the reduced loops): the kept dim in
//   tiles of kTile, a row of accumulators per tile, the tile loop vectorized.
// Floating sums and products accumulate in double (as eager's reducers), in blocks, after
// casting to the result dtype as torch does; integers wrap in 64 bits; max/min
// propagate NaN. The order differs from eager's, so reductions agree within the
// accuracy rule, not bit for bit; pointwise values agree bit for bit.

std::string kernel_symbol(size_t i) { return "kiln_kernel_" + std::to_string(i); }

namespace {

using lower::Expr;
using lower::ExprKind;
using lower::LoopKernel;
using lower::ReduceOp;

constexpr int64_t kTile = 256;  // column form: accumulators per tile
constexpr int kMaxThreads = 256;
constexpr int64_t kBlock = 4096;  // floating sums: elements per block accumulator

class KernelEmitter : LoopEmitter {
 public:
  KernelEmitter(std::ostringstream& out, const LoopKernel& k) : LoopEmitter(k), out_(out) {}

  // Prints the kernel's function; returns its parameters (Note [Kernel parameters]).
  std::vector<int64_t> emit(const std::string& symbol) {
    name_buffers();
    bool_buffers_as_bytes_ = true;
    for (size_t b = 0; b < k_.buffers.size(); ++b) {
      const lower::Buffer& buf = k_.buffers[b];
      const std::string t = buf.dtype == DType::Bool ? "uint8_t" : cpp_type(buf.dtype), c = buf.output ? "" : "const ";
      os_ << "  " << c << t << "* __restrict " << bufname_[b] << " = reinterpret_cast<" << c << t << "*>(bufs[" << b
          << "]);\n";
    }
    emit_hoisted();
    if (!has_reduce_) {
      emit_pointwise_form();
    } else if (k_.num_reduced() > 0 && !k_.reduced.back() && k_.num_phases() == 1) {
      emit_column_form();
    } else {
      emit_row_form();
    }
    out_ << "extern \"C\" void " << symbol << "(char* const* bufs, const int64_t* p, int threads) {\n";
    out_ << "  (void)threads;\n  (void)p;\n";
    for (size_t i = 0; i < params_.size(); ++i) out_ << "  const int64_t P" << i << " = p[" << i << "];\n";
    out_ << body_.str() << "}\n\n";
    return params_;
  }

 private:
  void open_loop(size_t d, std::string& ind) {
    os_ << ind << "for (int64_t " << vars_[d] << " = 0; " << vars_[d] << " < " << num(k_.sizes[d]) << "; ++" << vars_[d]
        << ") {\n";
    ind += "  ";
  }
  void close_loop(std::string& ind) {
    ind.resize(ind.size() - 2);
    os_ << ind << "}\n";
  }

  void emit_pointwise_form() {
    const size_t rank = k_.sizes.size();
    std::string ind = "  ";
    std::vector<int> stores, roots;
    for (size_t s = 0; s < k_.stores.size(); ++s) {
      stores.push_back(static_cast<int>(s));
      roots.push_back(k_.stores[s].expr);
    }
    // The innermost loop is `omp simd`: its iterations write distinct elements of fresh outputs,
    // and the pointers, captured by the OpenMP region, lose __restrict there (with several
    // outputs g++ then gives up on the alias checks it would need and stays scalar).
    if (rank == 1) {
      os_ << ind << "#pragma omp parallel for simd num_threads(threads) if(threads > 1)\n";
    } else if (rank > 1) {
      os_ << ind << "#pragma omp parallel for num_threads(threads) if(threads > 1)"
          << (rank > 2 ? " collapse(" + std::to_string(rank - 1) + ")" : "") << "\n";
    }
    for (size_t d = 0; d < rank; ++d) {
      if (rank > 1 && d + 1 == rank) os_ << ind << "#pragma omp simd\n";
      open_loop(d, ind);
    }
    emit_exprs(closure(roots), ind, {});
    emit_stores(stores, ind);
    for (size_t d = 0; d < rank; ++d) close_loop(ind);
  }

  std::string simd_clause(const std::vector<int>& reds, const std::string& suffix) const {
    std::string s;
    for (int e : reds) {
      const Expr& x = k_.exprs[static_cast<size_t>(e)];
      const ReduceOp r = x.reduce;
      std::string op = r == ReduceOp::Sum ? "+" : r == ReduceOp::Prod ? "*" : "";
      // Floating max/min: NaN-sticky reductions of the umbrella header (kiln_jit.h), whose
      // combiner is the step's own comparison, so each vector lane keeps eager's semantics
      // (OpenMP's max/min leave NaN unspecified). Other accumulator types stay scalar.
      if ((r == ReduceOp::Max || r == ReduceOp::Min) && (x.acc == DType::Float32 || x.acc == DType::Float64))
        op = r == ReduceOp::Max ? "kiln_max" : "kiln_min";
      if (op.empty()) return "";
      s += " reduction(" + op + ":acc" + std::to_string(e) + suffix + ")";
    }
    return s.empty() ? "" : "#pragma omp simd" + s;
  }

  // The body of one pass: the varying expressions its reductions and stores need, the
  // reductions' steps and the stores (at the current loop depth, every reduced loop open).
  void emit_pass_body(const std::vector<int>& reds, const std::vector<int>& stores, const std::string& ind,
                      const std::string& acc_suffix, const std::vector<bool>& done) {
    emit_exprs(closure(pass_roots(reds, stores)), ind, done);
    for (int e : reds) {
      const Expr& x = k_.exprs[static_cast<size_t>(e)];
      const Reducer r = reducer(x);
      os_ << ind << r.step(acc_prefix_ + std::to_string(e) + acc_suffix, name(x.args[0])) << "\n";
    }
    emit_stores(stores, ind);
  }

  // Opens the innermost reduced loop, dim d over [lo, hi). Floating sums over a long extent run
  // in blocks of kBlock, each summed in vector lanes into a block accumulator, then added to
  // the pass's accumulator: two levels, so float sums stay within the accuracy rule.
  bool open_inner_reduced(size_t d, const std::string& lo, const std::string& hi, const std::vector<int>& reds,
                          std::string& ind) {
    const std::string simd = simd_clause(reds, "");
    bool blocked = !simd.empty() && k_.sizes[d] > kBlock;
    for (int e : reds) {
      const Expr& x = k_.exprs[static_cast<size_t>(e)];
      blocked = blocked && x.reduce == ReduceOp::Sum && is_floating_point(x.acc);
    }
    if (!blocked) {
      if (!simd.empty()) os_ << ind << simd << "\n";
      if (simd.empty() && reds.empty() && stores_distinct_) os_ << ind << "#pragma omp simd\n";  // a pass that only stores
      os_ << ind << "for (int64_t " << vars_[d] << " = " << lo << "; " << vars_[d] << " < " << hi << "; ++" << vars_[d]
          << ") {\n";
      ind += "  ";
      return false;
    }
    os_ << ind << "for (int64_t ib = " << lo << "; ib < " << hi << "; ib += " << kBlock << "LL) {\n";
    ind += "  ";
    os_ << ind << "const int64_t ie = ib + " << kBlock << "LL < " << hi << " ? ib + " << kBlock << "LL : " << hi << ";\n";
    for (int e : reds)
      os_ << ind << cpp_type(k_.exprs[static_cast<size_t>(e)].acc) << " bacc" << e << " = 0;\n";
    std::string clause;
    for (int e : reds) clause += " reduction(+:bacc" + std::to_string(e) + ")";
    os_ << ind << "#pragma omp simd" << clause << "\n";
    os_ << ind << "for (int64_t " << vars_[d] << " = ib; " << vars_[d] << " < ie; ++" << vars_[d] << ") {\n";
    ind += "  ";
    acc_prefix_ = "bacc";
    return true;
  }
  void close_inner_reduced(bool blocked, const std::vector<int>& reds, std::string& ind) {
    close_loop(ind);
    if (!blocked) return;
    for (int e : reds) os_ << ind << "acc" << e << " += bacc" << e << ";\n";
    close_loop(ind);
    acc_prefix_ = "acc";
  }

  void emit_row_form() {
    const size_t rank = k_.sizes.size();
    size_t nk = 0;
    while (nk < rank && !k_.reduced[nk]) ++nk;
    const int phases = k_.num_phases();
    std::vector<std::vector<int>> in_phase;
    std::vector<int> after;
    split_stores(in_phase, after);
    std::string ind = "  ";
    const bool split = nk == 0 && phases == 1 && rank > 0;  // a full reduction: threads split it
    if (split) {
      emit_split_reduction(in_phase[0], after);
      return;
    }
    if (nk > 0)
      os_ << ind << "#pragma omp parallel for num_threads(threads) if(threads > 1)"
          << (nk > 1 ? " collapse(" + std::to_string(nk) + ")" : "") << "\n";
    for (size_t d = 0; d < nk; ++d) open_loop(d, ind);
    for (int p = 0; p < phases; ++p) {
      const std::vector<int> reds = reduces_of_phase(p);
      if (reds.empty() && in_phase[static_cast<size_t>(p)].empty()) continue;
      for (int e : reds) {
        const Expr& x = k_.exprs[static_cast<size_t>(e)];
        const Reducer r = reducer(x);
        os_ << ind << r.acc_type << " acc" << e << " = " << r.init << ";\n";
      }
      os_ << ind << "{\n";
      std::string inner = ind + "  ";
      const std::vector<bool> pre = per_point(pass_roots(reds, in_phase[static_cast<size_t>(p)]));
      emit_exprs(pre, inner, {});
      bool blocked = false;
      // A pass that only stores runs as `omp simd` when each iteration of the innermost loop
      // writes its own elements.
      stores_distinct_ = true;
      for (int st : in_phase[static_cast<size_t>(p)])
        stores_distinct_ = stores_distinct_ && k_.stores[static_cast<size_t>(st)].index.coeffs[rank - 1] != 0;
      for (size_t d = nk; d < rank; ++d) {
        if (d + 1 == rank)
          blocked = open_inner_reduced(d, "0", num(k_.sizes[d]), reds, inner);
        else
          open_loop(d, inner);
      }
      emit_pass_body(reds, in_phase[static_cast<size_t>(p)], inner, "", pre);
      for (size_t d = rank; d-- > nk;) {
        if (d + 1 == rank)
          close_inner_reduced(blocked, reds, inner);
        else
          close_loop(inner);
      }
      os_ << ind << "}\n";
      for (int e : reds) {
        const Expr& x = k_.exprs[static_cast<size_t>(e)];
        const Reducer r = reducer(x);
        os_ << ind << "const " << cpp_type(x.dtype) << " " << name(e) << " = " << r.result("acc" + std::to_string(e))
            << ";\n";
      }
    }
    emit_after(after, ind);
    for (size_t d = 0; d < nk; ++d) close_loop(ind);
  }

  // Per-point values and stores after every pass: reductions' results and values constant
  // along the reduced dims (reduced loop variables are 0 there: their coefficients are 0).
  void emit_after(const std::vector<int>& after, const std::string& ind) {
    if (after.empty()) return;
    os_ << ind << "{\n";
    emit_exprs(closure(pass_roots({}, after)), ind + "  ", {});
    emit_stores(after, ind + "  ");
    os_ << ind << "}\n";
  }

  // A reduction over every dim: the outermost loop split into one range per thread.
  void emit_split_reduction(const std::vector<int>& stores, const std::vector<int>& after) {
    const size_t rank = k_.sizes.size();
    const std::vector<int> reds = reduces_of_phase(0);
    std::string ind = "  ";
    os_ << ind << "const int nt = threads < 1 ? 1 : threads > " << kMaxThreads << " ? " << kMaxThreads
        << " : threads;\n";
    for (int e : reds) {
      const Expr& x = k_.exprs[static_cast<size_t>(e)];
      const Reducer r = reducer(x);
      os_ << ind << r.acc_type << " part" << e << "[" << kMaxThreads << "];\n";
    }
    os_ << ind << "#pragma omp parallel for num_threads(nt) if(nt > 1)\n";
    os_ << ind << "for (int t = 0; t < nt; ++t) {\n";
    std::string inner = ind + "  ";
    for (int e : reds) {
      const Expr& x = k_.exprs[static_cast<size_t>(e)];
      const Reducer r = reducer(x);
      os_ << inner << r.acc_type << " acc" << e << " = " << r.init << ";\n";
    }
    const std::string n0 = num(k_.sizes[0]);
    const std::string lo = n0 + " * t / nt", hi = n0 + " * (t + 1) / nt";
    bool blocked = false;
    if (rank == 1) {
      blocked = open_inner_reduced(0, lo, hi, reds, inner);
    } else {
      os_ << inner << "for (int64_t " << vars_[0] << " = " << lo << "; " << vars_[0] << " < " << hi << "; ++" << vars_[0]
          << ") {\n";
      inner += "  ";
      for (size_t d = 1; d < rank; ++d) {
        if (d + 1 == rank)
          blocked = open_inner_reduced(d, "0", num(k_.sizes[d]), reds, inner);
        else
          open_loop(d, inner);
      }
    }
    emit_pass_body(reds, stores, inner, "", {});
    for (size_t d = rank; d-- > 0;) {
      if (d + 1 == rank)
        close_inner_reduced(blocked, reds, inner);
      else
        close_loop(inner);
    }
    for (int e : reds) os_ << inner << "part" << e << "[t] = acc" << e << ";\n";
    os_ << ind << "}\n";
    for (int e : reds) {
      const Expr& x = k_.exprs[static_cast<size_t>(e)];
      const Reducer r = reducer(x);
      os_ << ind << r.acc_type << " acc" << e << " = " << r.init << ";\n";
      os_ << ind << "for (int t = 0; t < nt; ++t) " << r.combine("acc" + std::to_string(e), "part" + std::to_string(e) + "[t]")
          << "\n";
      os_ << ind << "const " << cpp_type(x.dtype) << " " << name(e) << " = " << r.result("acc" + std::to_string(e))
          << ";\n";
    }
    for (size_t d = 0; d < rank; ++d) os_ << ind << "const int64_t " << vars_[d] << " = 0; (void)" << vars_[d] << ";\n";
    emit_after(after, ind);
  }

  // Kept dims outside, the reduced dims, then the innermost kept dim in tiles with a row of
  // accumulators (one pass: the scheduler picks this form only then).
  void emit_column_form() {
    const size_t rank = k_.sizes.size();
    const size_t c = rank - 1;
    size_t nk = 0;
    while (nk < c && !k_.reduced[nk]) ++nk;
    std::vector<std::vector<int>> in_phase;
    std::vector<int> after;
    split_stores(in_phase, after);
    const std::vector<int> reds = reduces_of_phase(0);
    const std::string size = num(k_.sizes[c]), tile = std::to_string(kTile) + "LL";
    std::string ind = "  ";
    os_ << ind << "#pragma omp parallel for num_threads(threads) if(threads > 1) collapse(" << nk + 1 << ")\n";
    for (size_t d = 0; d < nk; ++d) open_loop(d, ind);
    os_ << ind << "for (int64_t cb = 0; cb < (" << size << " + " << tile << " - 1) / " << tile << "; ++cb) {\n";
    ind += "  ";
    os_ << ind << "const int64_t c0 = cb * " << tile << ", cn = " << size << " - c0 < " << tile << " ? " << size
        << " - c0 : " << tile << ";\n";
    for (int e : reds) {
      const Expr& x = k_.exprs[static_cast<size_t>(e)];
      const Reducer r = reducer(x);
      os_ << ind << r.acc_type << " acc" << e << "[" << kTile << "];\n";
      os_ << ind << "for (int64_t ic = 0; ic < cn; ++ic) acc" << e << "[ic] = " << r.init << ";\n";
    }
    for (size_t d = nk; d < c; ++d) open_loop(d, ind);
    os_ << ind << "#pragma omp simd\n";
    os_ << ind << "for (int64_t ic = 0; ic < cn; ++ic) {\n";
    std::string inner = ind + "  ";
    os_ << inner << "const int64_t " << vars_[c] << " = c0 + ic;\n";
    emit_pass_body(reds, in_phase[0], inner, "[ic]", {});
    os_ << ind << "}\n";
    for (size_t d = nk; d < c; ++d) close_loop(ind);
    os_ << ind << "for (int64_t ic = 0; ic < cn; ++ic) {\n";
    inner = ind + "  ";
    os_ << inner << "const int64_t " << vars_[c] << " = c0 + ic;\n";
    for (size_t d = nk; d < c; ++d) os_ << inner << "const int64_t " << vars_[d] << " = 0; (void)" << vars_[d] << ";\n";
    for (int e : reds) {
      const Expr& x = k_.exprs[static_cast<size_t>(e)];
      const Reducer r = reducer(x);
      os_ << inner << "const " << cpp_type(x.dtype) << " " << name(e) << " = "
          << r.result("acc" + std::to_string(e) + "[ic]") << ";\n";
    }
    emit_after(after, inner);
    os_ << ind << "}\n";
    ind.resize(ind.size() - 2);
    os_ << ind << "}\n";
    for (size_t d = 0; d < nk; ++d) close_loop(ind);
  }

  std::ostringstream& out_;
  std::string acc_prefix_ = "acc";
  bool stores_distinct_ = false;  // "bacc" inside a blocked sum (open_inner_reduced)
};

}  // namespace

std::string source_prelude() {
  return "// Generated by kiln's C++ code generator (Note [Generated C++]).\n"
         "#include \"kiln_jit.h\"  // <cstdint>, <limits>, core/convert.h, core/scalar_math.h (precompiled)\n\n";
}

std::string generate_kernel(const lower::LoopKernel& k, const std::string& symbol, std::vector<int64_t>* params) {
  std::ostringstream os;
  std::vector<int64_t> p = KernelEmitter(os, k).emit(symbol);
  if (params) *params = std::move(p);
  return os.str();
}

std::string generate_cpp(const lower::Schedule& s, size_t first, size_t last,
                         std::vector<std::vector<int64_t>>* params) {
  std::string src = source_prelude();
  for (size_t i = first; i < last && i < s.kernels.size(); ++i) {
    std::vector<int64_t> p;
    src += generate_kernel(s.kernels[i], kernel_symbol(i), &p);
    if (params) params->push_back(std::move(p));
  }
  return src;
}

}  // namespace kiln::compiler::codegen
