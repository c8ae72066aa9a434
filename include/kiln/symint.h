// SymInt: a size. In eager mode it is a plain int64 with no overhead; while
// compiling it may stand for a symbolic expression (Note [SymInt encoding]).
// Converting a SymInt to int64_t specializes it: under tracing that records an
// equality guard, in eager mode it is free.
#pragma once
#include <concepts>
#include <cstdint>
#include <ostream>
#include <vector>

#include "kiln/array_ref.h"

namespace kiln {

// Note [SymInt encoding]
// A SymInt holds its value inline. The compile pipeline may later reserve a
// range of int64 values to tag a pointer to a symbolic node (as c10::SymInt
// does); until then every SymInt is concrete and is_symbolic() is false. The
// class stays layout-compatible with int64_t so a std::vector<int64_t> can be
// viewed as a SymIntArrayRef without copying.
class SymInt {
 public:
  constexpr SymInt() = default;
  template <std::integral I>
  constexpr SymInt(I v) : v_(static_cast<int64_t>(v)) {}  // NOLINT

  constexpr bool is_symbolic() const { return false; }
  constexpr int64_t expect_int() const { return v_; }
  constexpr operator int64_t() const { return v_; }  // NOLINT: specializes

#define KILN_SYMINT_BINOP(op)                                                              \
  friend constexpr SymInt operator op(SymInt a, SymInt b) { return SymInt(a.v_ op b.v_); } \
  template <std::integral I>                                                               \
  friend constexpr SymInt operator op(SymInt a, I b) { return SymInt(a.v_ op static_cast<int64_t>(b)); } \
  template <std::integral I>                                                               \
  friend constexpr SymInt operator op(I a, SymInt b) { return SymInt(static_cast<int64_t>(a) op b.v_); }
  KILN_SYMINT_BINOP(+)
  KILN_SYMINT_BINOP(-)
  KILN_SYMINT_BINOP(*)
  KILN_SYMINT_BINOP(/)
  KILN_SYMINT_BINOP(%)
#undef KILN_SYMINT_BINOP
#define KILN_SYMINT_CMP(op)                                                             \
  friend constexpr bool operator op(SymInt a, SymInt b) { return a.v_ op b.v_; }        \
  template <std::integral I>                                                            \
  friend constexpr bool operator op(SymInt a, I b) { return a.v_ op static_cast<int64_t>(b); } \
  template <std::integral I>                                                            \
  friend constexpr bool operator op(I a, SymInt b) { return static_cast<int64_t>(a) op b.v_; }
  KILN_SYMINT_CMP(==)
  KILN_SYMINT_CMP(!=)
  KILN_SYMINT_CMP(<)
  KILN_SYMINT_CMP(<=)
  KILN_SYMINT_CMP(>)
  KILN_SYMINT_CMP(>=)
#undef KILN_SYMINT_CMP
  constexpr SymInt operator-() const { return SymInt(-v_); }
  SymInt& operator+=(SymInt o) { v_ += o.v_; return *this; }
  SymInt& operator-=(SymInt o) { v_ -= o.v_; return *this; }
  SymInt& operator*=(SymInt o) { v_ *= o.v_; return *this; }

 private:
  int64_t v_ = 0;
};
static_assert(sizeof(SymInt) == sizeof(int64_t));

inline std::ostream& operator<<(std::ostream& os, SymInt s) { return os << s.expect_int(); }

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
  // Specializes every entry (free in eager mode).
  std::vector<int64_t> to_ints() const {
    std::vector<int64_t> out;
    out.reserve(size());
    for (SymInt s : *this) out.push_back(s.expect_int());
    return out;
  }
};

}  // namespace kiln
