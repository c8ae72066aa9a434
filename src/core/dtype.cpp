#include "kiln/dtype.h"

#include <array>

#include "kiln/error.h"

namespace kiln {

size_t itemsize(DType t) {
  static constexpr std::array<size_t, kNumDTypes> sizes = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8};
  return sizes[static_cast<int>(t)];
}

std::string_view dtype_name(DType t) {
  static constexpr std::array<std::string_view, kNumDTypes> names = {
      "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"};
  return names[static_cast<int>(t)];
}

bool is_floating_point(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}

bool is_integral(DType t, bool include_bool) {
  if (t == DType::Bool) return include_bool;
  return !is_floating_point(t);
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  // The lattice of torch.promote_types for our dtypes: table indexed by enum order
  // Bool, UInt8, Int8, Int16, Int32, Int64, Float16, BFloat16, Float32, Float64.
  using D = DType;
  constexpr D b1 = D::Bool, u1 = D::UInt8, i1 = D::Int8, i2 = D::Int16, i4 = D::Int32, i8 = D::Int64,
              f2 = D::Float16, bf = D::BFloat16, f4 = D::Float32, f8 = D::Float64;
  static constexpr D table[kNumDTypes][kNumDTypes] = {
      /* b1 */ {b1, u1, i1, i2, i4, i8, f2, bf, f4, f8},
      /* u1 */ {u1, u1, i2, i2, i4, i8, f2, bf, f4, f8},
      /* i1 */ {i1, i2, i1, i2, i4, i8, f2, bf, f4, f8},
      /* i2 */ {i2, i2, i2, i2, i4, i8, f2, bf, f4, f8},
      /* i4 */ {i4, i4, i4, i4, i4, i8, f2, bf, f4, f8},
      /* i8 */ {i8, i8, i8, i8, i8, i8, f2, bf, f4, f8},
      /* f2 */ {f2, f2, f2, f2, f2, f2, f2, f4, f4, f8},
      /* bf */ {bf, bf, bf, bf, bf, bf, f4, bf, f4, f8},
      /* f4 */ {f4, f4, f4, f4, f4, f4, f4, f4, f4, f8},
      /* f8 */ {f8, f8, f8, f8, f8, f8, f8, f8, f8, f8},
  };
  return table[static_cast<int>(a)][static_cast<int>(b)];
}

bool can_cast(DType from, DType to) {
  // As torch.can_cast: no float → integral, no non-bool → bool.
  if (is_floating_point(from) && is_integral(to, true)) return false;
  if (from != DType::Bool && to == DType::Bool) return false;
  return true;
}

namespace {
DType& default_dtype_ref() {
  static DType t = DType::Float32;
  return t;
}
}  // namespace

DType default_dtype() { return default_dtype_ref(); }
void set_default_dtype(DType t) {
  KILN_CHECK(t == DType::Float32 || t == DType::Float64 || t == DType::Float16 || t == DType::BFloat16,
             "set_default_dtype: only floating dtypes are allowed, got ", t);
  default_dtype_ref() = t;
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

}  // namespace kiln
