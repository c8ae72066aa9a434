// Scalar: a Python-number-like value (bool, integer or floating) passed to ops.
// It takes part in type promotion as a "wrapped number": it never widens a
// tensor's dtype within the same category (int tensor + 2 stays int; float16
// tensor * 0.5 stays float16), but int tensor * 0.5 becomes the default float.
#pragma once
#include <cstdint>
#include <ostream>
#include <type_traits>

#include "kiln/dtype.h"
#include "kiln/symint.h"

namespace kiln {

class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Float };

  Scalar() : kind_(Kind::Int), i_(0) {}
  Scalar(bool v) : kind_(Kind::Bool), i_(v) {}  // NOLINT
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(Kind::Int), i_(static_cast<int64_t>(v)) {}  // NOLINT
  template <class T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : kind_(Kind::Float), d_(static_cast<double>(v)) {}  // NOLINT
  // A size, as in `arange(x.size(1))`: its value in this call (Note [SymInt encoding]).
  Scalar(SymInt v) : kind_(Kind::Int), i_(v.expect_int()) {}  // NOLINT

  Kind kind() const { return kind_; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_integral() const { return kind_ == Kind::Int; }
  bool is_floating_point() const { return kind_ == Kind::Float; }

  double to_double() const { return kind_ == Kind::Float ? d_ : static_cast<double>(i_); }
  int64_t to_long() const { return kind_ == Kind::Float ? static_cast<int64_t>(d_) : i_; }
  bool to_bool() const { return kind_ == Kind::Float ? d_ != 0 : i_ != 0; }
  template <class T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>) return to_bool();
    else if constexpr (std::is_integral_v<T>) return static_cast<T>(to_long());
    else return static_cast<T>(to_double());
  }
  // The dtype a 0-d tensor made from this scalar gets: bool, int64 or the default float.
  DType dtype() const;
  bool operator==(const Scalar& o) const;

 private:
  Kind kind_;
  union {
    int64_t i_;
    double d_;
  };
};

std::ostream& operator<<(std::ostream& os, const Scalar& s);

// Comparisons with numbers by value, as Python's (`t.item() > 1e9`, `s == 1` for 1.0); integers
// compare exactly. (Scalar == Scalar above is structural: 1 and 1.0 differ.)
namespace detail {
template <class T>
int scalar_compare(const Scalar& s, T v) {
  if constexpr (std::is_integral_v<T>) {
    if (!s.is_floating_point()) {
      const int64_t a = s.to_long(), b = static_cast<int64_t>(v);
      return (a > b) - (a < b);
    }
  }
  const double a = s.to_double(), b = static_cast<double>(v);
  return a < b ? -1 : a > b ? 1 : a == b ? 0 : 2;  // 2: unordered (NaN)
}
}  // namespace detail
#define KILN_SCALAR_COMPARE(op, test)                                                              \
  template <class T>                                                                               \
  requires std::is_arithmetic_v<T> bool operator op(const Scalar& s, T v) {                        \
    const int c = detail::scalar_compare(s, v);                                                    \
    return test;                                                                                   \
  }                                                                                                \
  template <class T>                                                                               \
  requires std::is_arithmetic_v<T> bool operator op(T v, const Scalar& s) {                        \
    const int r = detail::scalar_compare(s, v);                                                    \
    const int c = r == 2 ? 2 : -r;                                                                 \
    return test;                                                                                   \
  }
KILN_SCALAR_COMPARE(==, c == 0)
KILN_SCALAR_COMPARE(!=, c != 0)
KILN_SCALAR_COMPARE(<, c == -1)
KILN_SCALAR_COMPARE(<=, c == -1 || c == 0)
KILN_SCALAR_COMPARE(>, c == 1)
KILN_SCALAR_COMPARE(>=, c == 1 || c == 0)
#undef KILN_SCALAR_COMPARE

}  // namespace kiln
