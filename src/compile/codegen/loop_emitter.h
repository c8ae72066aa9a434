// What the C++ and CUDA emitters share (Note [Loop emitters]): the loop IR's
// expressions, indices, reductions and stores spelled as C-family statements,
// and which of them run where (hoisted, per point, in a pass over the reduced
// dims). Each emitter adds its own forms: how the dims map to loops, threads,
// blocks.
#pragma once
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "compile/lower/loop_ir.h"

namespace kiln::compiler::codegen {

// Note [Loop emitters]
// An emitter prints one LoopKernel as one function. Its statements are the same on every
// device: loads `bufN[index]`, a pointwise expression as a call of its shared scalar functor
// (pointwise_ops.h), a reduction's step and combine, a store. What differs is the
// iteration: loops and OpenMP on the CPU, threads and blocks on CUDA. Loop variables are
// named i0, i1, ... after the IR's dims in either case, so index expressions read alike.

// How a reduction accumulates: its accumulator type and initial value, the statement adding
// one element, the statement combining two partial accumulators, and the result.
struct Reducer {
  std::string acc_type, init;
  std::function<std::string(const std::string& acc, const std::string& x)> step;
  std::function<std::string(const std::string& acc, const std::string& part)> combine;
  std::string result(const std::string& acc) const;
  std::string result_fmt;  // '@' stands for the accumulator
};
Reducer reducer(const lower::Expr& e);

class LoopEmitter {
 protected:
  explicit LoopEmitter(const lower::LoopKernel& k);
  virtual ~LoopEmitter() = default;

  // Note [Kernel parameters]: a size, a stride (other than 0 and 1) or an offset is read from the
  // kernel's parameter array, not written into the source, so the source depends on the
  // kernel's structure alone and a graph at another batch size finds its compiled code.
  std::string num(int64_t v);
  std::string index_expr(const lower::Index& ix);
  std::string name(int e) const;  // the variable holding expression e's value

  // Names the buffers in0, in1, ... (inputs) and out0, ... (outputs), in bufname_.
  void name_buffers();
  // Declares the values that vary along no dim and depend on no reduction (0-d scalars and what
  // is computed from them), once before the loops, and marks them hoisted.
  void emit_hoisted();
  // Declares each expression in `which` (not a Reduce, not in `skip`) in definition order.
  void emit_exprs(const std::vector<bool>& which, const std::string& ind, const std::vector<bool>& skip);
  // The non-Reduce expressions `roots` need (roots included), stopping at Reduce values (read
  // as finalized variables) and hoisted ones.
  std::vector<bool> closure(const std::vector<int>& roots) const;
  // Of closure(roots), the per-point expressions (constant along the reduced dims).
  std::vector<bool> per_point(const std::vector<int>& roots) const;
  void emit_stores(const std::vector<int>& stores, const std::string& ind);
  // Stores by where they run: in the pass of phase p (values varying along reduced dims), or
  // after every pass (reductions' results and per-point values).
  void split_stores(std::vector<std::vector<int>>& in_phase, std::vector<int>& after) const;
  std::vector<int> reduces_of_phase(int p) const;
  // The roots of one pass: its reductions' arguments and its stores' values.
  std::vector<int> pass_roots(const std::vector<int>& reds, const std::vector<int>& stores) const;

  std::ostringstream body_;  // the function's body, before its parameters are known
  std::ostringstream& os_ = body_;
  const lower::LoopKernel& k_;
  std::vector<int64_t> params_;
  std::vector<std::vector<bool>> varies_;
  std::vector<std::string> vars_, bufname_;
  std::vector<bool> invariant_, along_reduced_, hoisted_;
  bool has_reduce_ = false;
  // Per expression, a replacement for a load's `buf[index]` (empty: none); the CUDA emitter's
  // vectorized loop reads lanes of a vector loaded before it.
  std::vector<std::string> load_override_;
  // Bool buffers are bytes (the C++ emitter's uint8_t pointers): a load reads `buf[index] != 0`.
  // g++ vectorizes a loop that loads bytes beside float and int64 values, not one that loads
  // `bool` (it finds no vector type for such a loop's float loads: a causal mask's softmax).
  bool bool_buffers_as_bytes_ = false;
};

}  // namespace kiln::compiler::codegen
