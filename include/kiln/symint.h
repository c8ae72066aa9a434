// SymInt: a size. In eager mode it is a plain int64 with no overhead; while
// compiling it may stand for a symbolic expression (Note [SymInt encoding]).
// Converting a SymInt to int64_t gives its value in this call (its "hint").
#pragma once
#include <concepts>
#include <cstdint>
#include <ostream>
#include <vector>

#include "kiln/array_ref.h"

namespace kiln {

namespace detail {
// Out of line: only symbolic SymInts (while compiling) get here.
int64_t sym_hint(int64_t raw);
enum class SymOp : uint8_t { Symbol, Add, Sub, Mul, Div, Mod, Neg };
int64_t sym_apply(SymOp op, int64_t a, int64_t b);
}  // namespace detail

// Note [SymInt encoding]
// A SymInt is one int64. A concrete size is itself; a symbolic one is a tag
// (top 16 bits 0x8001, a range no size, index or offset uses) with the
// recording's generation and the index of an expression node in that
// recording's table (src/core/sym_table.h). Each node also holds its value in
// the current call, so comparisons, conversions and every kernel see plain
// numbers: a branch on a size takes eager's path, and the recorder (which
// re-runs the user's code on every call) sees any difference as a different
// graph. Arithmetic on a symbolic SymInt makes a new node, which is how
// `x.size(1) / 2` reaches a graph as an expression. The class is
// layout-compatible with int64_t, so a std::vector<int64_t> can be viewed as
// a SymIntArrayRef without copying.
class SymInt {
 public:
  static constexpr uint64_t kTag = 0x8001;
  constexpr SymInt() = default;
  template <std::integral I>
  constexpr SymInt(I v) : v_(static_cast<int64_t>(v)) {}  // NOLINT

  static constexpr SymInt from_raw(int64_t raw) {
    SymInt s;
    s.v_ = raw;
    return s;
  }
  static constexpr bool raw_is_symbolic(int64_t raw) { return (static_cast<uint64_t>(raw) >> 48) == kTag; }
  constexpr bool is_symbolic() const { return raw_is_symbolic(v_); }
  // The bits as stored: the tagged form when symbolic (for attrs that keep the expression).
  constexpr int64_t raw() const { return v_; }
  // The value in this call (specializes nothing: see the Note).
  int64_t expect_int() const { return is_symbolic() ? detail::sym_hint(v_) : v_; }
  operator int64_t() const { return expect_int(); }  // NOLINT

#define KILN_SYMINT_BINOP(op, name)                                                                       \
  friend SymInt operator op(SymInt a, SymInt b) {                                                         \
    if (a.is_symbolic() || b.is_symbolic()) return from_raw(detail::sym_apply(detail::SymOp::name, a.v_, b.v_)); \
    return SymInt(a.v_ op b.v_);                                                                          \
  }                                                                                                       \
  template <std::integral I>                                                                              \
  friend SymInt operator op(SymInt a, I b) { return a op SymInt(b); }                                     \
  template <std::integral I>                                                                              \
  friend SymInt operator op(I a, SymInt b) { return SymInt(a) op b; }
  KILN_SYMINT_BINOP(+, Add)
  KILN_SYMINT_BINOP(-, Sub)
  KILN_SYMINT_BINOP(*, Mul)
  KILN_SYMINT_BINOP(/, Div)
  KILN_SYMINT_BINOP(%, Mod)
#undef KILN_SYMINT_BINOP
#define KILN_SYMINT_CMP(op)                                                                          \
  friend bool operator op(SymInt a, SymInt b) { return a.expect_int() op b.expect_int(); }           \
  template <std::integral I>                                                                         \
  friend bool operator op(SymInt a, I b) { return a.expect_int() op static_cast<int64_t>(b); }      \
  template <std::integral I>                                                                         \
  friend bool operator op(I a, SymInt b) { return static_cast<int64_t>(a) op b.expect_int(); }
  KILN_SYMINT_CMP(==)
  KILN_SYMINT_CMP(!=)
  KILN_SYMINT_CMP(<)
  KILN_SYMINT_CMP(<=)
  KILN_SYMINT_CMP(>)
  KILN_SYMINT_CMP(>=)
#undef KILN_SYMINT_CMP
  SymInt operator-() const { return is_symbolic() ? from_raw(detail::sym_apply(detail::SymOp::Neg, v_, 0)) : SymInt(-v_); }
  SymInt& operator+=(SymInt o) { return *this = *this + o; }
  SymInt& operator-=(SymInt o) { return *this = *this - o; }
  SymInt& operator*=(SymInt o) { return *this = *this * o; }

 private:
  int64_t v_ = 0;
};
static_assert(sizeof(SymInt) == sizeof(int64_t));

std::ostream& operator<<(std::ostream& os, SymInt s);  // its value; symbolic ones add the expression

// A list of sizes. Accepts {a, b * c}, std::vector<SymInt> and std::vector<int64_t>.
class SymIntArrayRef : public ArrayRef<SymInt> {
 public:
  using ArrayRef<SymInt>::ArrayRef;
  SymIntArrayRef(const std::vector<int64_t>& v)  // NOLINT
      : ArrayRef<SymInt>(reinterpret_cast<const SymInt*>(v.data()), v.size()) {}
  template <class C>  // other contiguous containers of int64_t (kiln's small-buffer vectors)
    requires(!std::is_same_v<C, std::vector<int64_t>> && !std::is_base_of_v<IntArrayRef, C> &&
             std::is_same_v<decltype(std::declval<const C&>().data()), const int64_t*>)
  SymIntArrayRef(const C& c)  // NOLINT
      : ArrayRef<SymInt>(reinterpret_cast<const SymInt*>(c.data()), c.size()) {}
  SymIntArrayRef(IntArrayRef v)  // NOLINT
      : ArrayRef<SymInt>(reinterpret_cast<const SymInt*>(v.data()), v.size()) {}
  SymIntArrayRef(ArrayRef<SymInt> v) : ArrayRef<SymInt>(v) {}  // NOLINT
  // Every entry's value in this call.
  std::vector<int64_t> to_ints() const {
    std::vector<int64_t> out;
    out.reserve(size());
    for (SymInt s : *this) out.push_back(s.expect_int());
    return out;
  }
  // The entries as stored, symbolic ones tagged (op attrs keep them: Note [Symbolic attrs]).
  std::vector<int64_t> raw() const {
    std::vector<int64_t> out;
    out.reserve(size());
    for (SymInt s : *this) out.push_back(s.raw());
    return out;
  }
};

}  // namespace kiln
