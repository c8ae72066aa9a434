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

}  // namespace kiln
