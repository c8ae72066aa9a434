// Element types and PyTorch's type-promotion rules.
#pragma once
#include <cstdint>
#include <ostream>
#include <string_view>

namespace kiln {

enum class DType : uint8_t {
  Bool, UInt8, Int8, Int16, Int32, Int64, Float16, BFloat16, Float32, Float64,
};
inline constexpr int kNumDTypes = 10;

inline constexpr DType kBool = DType::Bool;
inline constexpr DType kUInt8 = DType::UInt8;
inline constexpr DType kInt8 = DType::Int8;
inline constexpr DType kInt16 = DType::Int16;
inline constexpr DType kInt32 = DType::Int32;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kInt = DType::Int32;
inline constexpr DType kLong = DType::Int64;
inline constexpr DType kFloat16 = DType::Float16;
inline constexpr DType kHalf = DType::Float16;
inline constexpr DType kBFloat16 = DType::BFloat16;
inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kDouble = DType::Float64;

size_t itemsize(DType t);
std::string_view dtype_name(DType t);  // "float32", "int64", ... as torch prints them
bool is_floating_point(DType t);
bool is_integral(DType t, bool include_bool = false);
inline bool is_bool(DType t) { return t == DType::Bool; }

// torch.promote_types: the smallest type both can be cast to without losing
// category (bool < integer < floating). float16 with bfloat16 gives float32.
DType promote_types(DType a, DType b);
// torch.can_cast: whether `from` may be written into `to` by an in-place op.
bool can_cast(DType from, DType to);
// The default floating dtype (float32), as torch.get_default_dtype().
DType default_dtype();
void set_default_dtype(DType t);

std::ostream& operator<<(std::ostream& os, DType t);

}  // namespace kiln
