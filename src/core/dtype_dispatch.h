// visit_dtype: calls a templated lambda with the C++ type of a dtype,
//   visit_dtype(t.dtype(), [&]<class T>() { ... });
#pragma once
#include <cstdint>

#include "core/half.h"
#include "kiln/dtype.h"
#include "kiln/error.h"

namespace kiln {

template <DType D> struct cpp_type;
template <> struct cpp_type<DType::Bool> { using type = bool; };
template <> struct cpp_type<DType::UInt8> { using type = uint8_t; };
template <> struct cpp_type<DType::Int8> { using type = int8_t; };
template <> struct cpp_type<DType::Int16> { using type = int16_t; };
template <> struct cpp_type<DType::Int32> { using type = int32_t; };
template <> struct cpp_type<DType::Int64> { using type = int64_t; };
template <> struct cpp_type<DType::Float16> { using type = Half; };
template <> struct cpp_type<DType::BFloat16> { using type = BFloat16; };
template <> struct cpp_type<DType::Float32> { using type = float; };
template <> struct cpp_type<DType::Float64> { using type = double; };

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<bool>() { return DType::Bool; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::UInt8; }
template <> constexpr DType dtype_of<int8_t>() { return DType::Int8; }
template <> constexpr DType dtype_of<int16_t>() { return DType::Int16; }
template <> constexpr DType dtype_of<int32_t>() { return DType::Int32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::Int64; }
template <> constexpr DType dtype_of<Half>() { return DType::Float16; }
template <> constexpr DType dtype_of<BFloat16>() { return DType::BFloat16; }
template <> constexpr DType dtype_of<float>() { return DType::Float32; }
template <> constexpr DType dtype_of<double>() { return DType::Float64; }

template <class F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::Bool: return f.template operator()<bool>();
    case DType::UInt8: return f.template operator()<uint8_t>();
    case DType::Int8: return f.template operator()<int8_t>();
    case DType::Int16: return f.template operator()<int16_t>();
    case DType::Int32: return f.template operator()<int32_t>();
    case DType::Int64: return f.template operator()<int64_t>();
    case DType::Float16: return f.template operator()<Half>();
    case DType::BFloat16: return f.template operator()<BFloat16>();
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
  }
  KILN_FAIL("internal: unknown dtype");
}

// Only floating types (others throw naming the op).
template <class F>
decltype(auto) visit_floating(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::Float16: return f.template operator()<Half>();
    case DType::BFloat16: return f.template operator()<BFloat16>();
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
    default: KILN_FAIL(op, ": not implemented for dtype ", t, " (expected a floating dtype)");
  }
}

}  // namespace kiln
