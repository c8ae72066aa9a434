// 16-bit floating-point storage types: IEEE binary16 (Half) and bfloat16 (BFloat16).
// Arithmetic is done in float and rounded back (round to nearest even), as in
// PyTorch's c10::Half / c10::BFloat16. Usable from host, CUDA device and NVRTC code:
// every function is KILN_HD and the conversions are plain integer code, so every
// device rounds identically (no reliance on hardware conversion instructions).
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

// Marks functions callable from host and CUDA device code. Defined once here; the
// other numeric headers (scalar_math.h, philox.h) include this one.
#ifndef KILN_HD
#if defined(__CUDACC__) || defined(__CUDA_ARCH__)
#define KILN_HD __host__ __device__
#else
#define KILN_HD
#endif
#endif

namespace kiln {

namespace detail {

// Bit casts that work on host (memcpy) and device (intrinsics); not constexpr.
KILN_HD inline uint32_t f32_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

KILN_HD inline float f32_from_bits(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

KILN_HD inline uint64_t f64_bits(double d) {
#ifdef __CUDA_ARCH__
  return static_cast<uint64_t>(__double_as_longlong(d));
#else
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
#endif
}

KILN_HD inline double f64_from_bits(uint64_t u) {
#ifdef __CUDA_ARCH__
  return __longlong_as_double(static_cast<long long>(u));
#else
  double d;
  std::memcpy(&d, &u, sizeof d);
  return d;
#endif
}

// float -> binary16 bits, round to nearest even. NaN keeps its sign and top payload
// bits and is made quiet; values >= 65520 (halfway past the largest finite half,
// 65504, whose mantissa is odd) become infinity.
KILN_HD inline uint16_t float_to_half_bits(float f) {
  const uint32_t u = f32_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) {  // inf or NaN
    return static_cast<uint16_t>(a > 0x7f800000u ? sign | 0x7e00u | ((a >> 13) & 0x3ffu) : sign | 0x7c00u);
  }
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow
  if (a < 0x38800000u) {
    // Below 2^-14: a half subnormal (units of 2^-24) or zero. The float significand
    // (implicit bit included) shifted right by (126 - exponent) is the count of
    // 2^-24 units; round the dropped bits to nearest even. Float subnormals and
    // anything below 2^-25 round to zero (shift > 24 drops everything, never a tie).
    const uint32_t e = a >> 23;
    if (e < 102) return static_cast<uint16_t>(sign);
    const uint32_t mant = (a & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14..24
    uint32_t r = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (r & 1u))) ++r;  // may carry into 0x400: min normal
    return static_cast<uint16_t>(sign | r);
  }
  // Normal range: rebias the exponent (127 -> 15) and keep the top 10 mantissa bits;
  // a carry out of the mantissa correctly bumps the exponent.
  uint32_t h = ((a >> 23) - 112) << 10 | ((a >> 13) & 0x3ffu);
  const uint32_t rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

KILN_HD inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  // inf, or NaN made quiet (as hardware conversions do) with its payload kept.
  if (e == 0x1f) return f32_from_bits(sign | 0x7f800000u | (m ? 0x400000u : 0u) | (m << 13));
  if (e == 0) {
    // Zero or subnormal: m * 2^-24 is exact in float (a normal float).
    const float mag = static_cast<float>(m) * 5.9604644775390625e-8f;
    return f32_from_bits(sign | f32_bits(mag));
  }
  return f32_from_bits(sign | ((e + 112) << 23) | (m << 13));
}

// float -> bfloat16 bits, round to nearest even. Adding 0x7fff plus the lowest kept
// bit rounds ties to even; finite values past the largest bfloat16 carry into the
// exponent and land exactly on infinity. NaN is kept (made quiet) so the add cannot
// turn it into infinity.
KILN_HD inline uint16_t float_to_bf16_bits(float f) {
  const uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

KILN_HD inline float bf16_bits_to_float(uint16_t b) { return f32_from_bits(static_cast<uint32_t>(b) << 16); }

// double -> float rounded to odd: truncate, and set the lowest bit when inexact.
// Rounding that result to any format with at least two fewer significand bits than
// float (half: 11, bfloat16: 8) gives the correctly rounded double -> 16-bit result,
// avoiding the double-rounding error of double -> float -> 16-bit.
KILN_HD inline float double_to_float_round_odd(double d) {
  float f = static_cast<float>(d);
  const double back = static_cast<double>(f);
  if (back == d || d != d) return f;  // exact, or NaN
  uint32_t u = f32_bits(f);
  if ((u & 1u) == 0 && (u & 0x7fffffffu) != 0x7f800000u) {
    // f was rounded to an even neighbour; step to the odd neighbour on d's side
    // of f (the truncated value with its lowest bit set).
    const bool f_above = (back > d) == (d > 0);  // |f| > |d|
    u = f_above ? u - 1 : u + 1;
  }
  return f32_from_bits(u);
}

}  // namespace detail

struct Half {
  uint16_t x;

  Half() = default;
  // Converting constructor from any arithmetic type, rounding to nearest even.
  // double is converted without double rounding (see double_to_float_round_odd).
  template <class U, std::enable_if_t<std::is_arithmetic_v<U>, int> = 0>
  KILN_HD Half(U v) : x(convert(v)) {}

  static constexpr KILN_HD Half from_bits(uint16_t bits) { return Half(bits, BitsTag{}); }
  KILN_HD operator float() const { return detail::half_bits_to_float(x); }

 private:
  struct BitsTag {};
  constexpr KILN_HD Half(uint16_t bits, BitsTag) : x(bits) {}
  template <class U>
  static KILN_HD uint16_t convert(U v) {
    if constexpr ((std::is_floating_point_v<U> && !std::is_same_v<U, float>) ||
                  (std::is_integral_v<U> && sizeof(U) > 2)) {
      return detail::float_to_half_bits(detail::double_to_float_round_odd(static_cast<double>(v)));
    } else {
      return detail::float_to_half_bits(static_cast<float>(v));
    }
  }
};

struct BFloat16 {
  uint16_t x;

  BFloat16() = default;
  template <class U, std::enable_if_t<std::is_arithmetic_v<U>, int> = 0>
  KILN_HD BFloat16(U v) : x(convert(v)) {}

  static constexpr KILN_HD BFloat16 from_bits(uint16_t bits) { return BFloat16(bits, BitsTag{}); }
  KILN_HD operator float() const { return detail::bf16_bits_to_float(x); }

 private:
  struct BitsTag {};
  constexpr KILN_HD BFloat16(uint16_t bits, BitsTag) : x(bits) {}
  template <class U>
  static KILN_HD uint16_t convert(U v) {
    // Integers wider than 16 bits may exceed float's 24-bit significand: go via double.
    if constexpr ((std::is_floating_point_v<U> && !std::is_same_v<U, float>) ||
                  (std::is_integral_v<U> && sizeof(U) > 2)) {
      return detail::float_to_bf16_bits(detail::double_to_float_round_odd(static_cast<double>(v)));
    } else {
      return detail::float_to_bf16_bits(static_cast<float>(v));
    }
  }
};

static_assert(sizeof(Half) == 2, "Half must be 2 bytes");
static_assert(sizeof(BFloat16) == 2, "BFloat16 must be 2 bytes");
static_assert(std::is_trivially_copyable_v<Half> && std::is_trivially_copyable_v<BFloat16>);
static_assert(std::is_trivially_default_constructible_v<Half>);

template <class T>
inline constexpr bool is_reduced_float_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// Operators. Following c10: H op H -> H; H op integer -> H; H op float -> float;
// H op double -> double (the mixed forms are templates so that every arithmetic type
// is an exact match and no call is ambiguous). Comparisons go through the implicit
// conversion to float, so NaN and signed-zero behave as in float.
#define KILN_HALF_OPERATORS(H)                                                                   \
  KILN_HD inline H operator+(H a, H b) { return H(float(a) + float(b)); }                        \
  KILN_HD inline H operator-(H a, H b) { return H(float(a) - float(b)); }                        \
  KILN_HD inline H operator*(H a, H b) { return H(float(a) * float(b)); }                        \
  KILN_HD inline H operator/(H a, H b) { return H(float(a) / float(b)); }                        \
  /* Negation flips the sign bit: exact, and keeps NaN payloads. */                              \
  KILN_HD inline H operator-(H a) { return H::from_bits(static_cast<uint16_t>(a.x ^ 0x8000u)); } \
  KILN_HD inline H operator+(H a) { return a; }                                                  \
  KILN_HD inline H& operator+=(H& a, H b) { return a = a + b; }                                  \
  KILN_HD inline H& operator-=(H& a, H b) { return a = a - b; }                                  \
  KILN_HD inline H& operator*=(H& a, H b) { return a = a * b; }                                  \
  KILN_HD inline H& operator/=(H& a, H b) { return a = a / b; }                                  \
  KILN_HALF_MIXED_OP(H, +)                                                                       \
  KILN_HALF_MIXED_OP(H, -)                                                                       \
  KILN_HALF_MIXED_OP(H, *)                                                                       \
  KILN_HALF_MIXED_OP(H, /)

#define KILN_HALF_MIXED_OP(H, OP)                                        \
  template <class U, std::enable_if_t<std::is_arithmetic_v<U>, int> = 0> \
  KILN_HD inline auto operator OP(H a, U b) {                            \
    if constexpr (std::is_floating_point_v<U>) {                         \
      using R = std::common_type_t<float, U>;                            \
      return static_cast<R>(float(a)) OP static_cast<R>(b);              \
    } else {                                                             \
      return H(float(a) OP float(b));                                    \
    }                                                                    \
  }                                                                      \
  template <class U, std::enable_if_t<std::is_arithmetic_v<U>, int> = 0> \
  KILN_HD inline auto operator OP(U a, H b) {                            \
    if constexpr (std::is_floating_point_v<U>) {                         \
      using R = std::common_type_t<float, U>;                            \
      return static_cast<R>(a) OP static_cast<R>(float(b));              \
    } else {                                                             \
      return H(float(a) OP float(b));                                    \
    }                                                                    \
  }

KILN_HALF_OPERATORS(Half)
KILN_HALF_OPERATORS(BFloat16)

#undef KILN_HALF_OPERATORS
#undef KILN_HALF_MIXED_OP

}  // namespace kiln

// Values match c10::Half / c10::BFloat16 (except BFloat16's signaling_NaN: c10 returns
// the infinity pattern 0x7F80; this returns a real signaling NaN, 0x7FA0).
namespace std {

template <>
class numeric_limits<kiln::Half> {
 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = true;
  static constexpr float_denorm_style has_denorm = denorm_present;
  static constexpr bool has_denorm_loss = false;
  static constexpr float_round_style round_style = round_to_nearest;
  static constexpr bool is_iec559 = true;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int digits = 11;
  static constexpr int digits10 = 3;
  static constexpr int max_digits10 = 5;
  static constexpr int radix = 2;
  static constexpr int min_exponent = -13;
  static constexpr int min_exponent10 = -4;
  static constexpr int max_exponent = 16;
  static constexpr int max_exponent10 = 4;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;
  static constexpr KILN_HD kiln::Half min() noexcept { return kiln::Half::from_bits(0x0400); }
  static constexpr KILN_HD kiln::Half lowest() noexcept { return kiln::Half::from_bits(0xFBFF); }
  static constexpr KILN_HD kiln::Half max() noexcept { return kiln::Half::from_bits(0x7BFF); }
  static constexpr KILN_HD kiln::Half epsilon() noexcept { return kiln::Half::from_bits(0x1400); }
  static constexpr KILN_HD kiln::Half round_error() noexcept { return kiln::Half::from_bits(0x3800); }
  static constexpr KILN_HD kiln::Half infinity() noexcept { return kiln::Half::from_bits(0x7C00); }
  static constexpr KILN_HD kiln::Half quiet_NaN() noexcept { return kiln::Half::from_bits(0x7E00); }
  static constexpr KILN_HD kiln::Half signaling_NaN() noexcept { return kiln::Half::from_bits(0x7D00); }
  static constexpr KILN_HD kiln::Half denorm_min() noexcept { return kiln::Half::from_bits(0x0001); }
};

template <>
class numeric_limits<kiln::BFloat16> {
 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = true;
  static constexpr float_denorm_style has_denorm = denorm_present;
  static constexpr bool has_denorm_loss = false;
  static constexpr float_round_style round_style = round_to_nearest;
  static constexpr bool is_iec559 = false;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int digits = 8;
  static constexpr int digits10 = 2;
  static constexpr int max_digits10 = 4;
  static constexpr int radix = 2;
  static constexpr int min_exponent = -125;
  static constexpr int min_exponent10 = -37;
  static constexpr int max_exponent = 128;
  static constexpr int max_exponent10 = 38;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;
  static constexpr KILN_HD kiln::BFloat16 min() noexcept { return kiln::BFloat16::from_bits(0x0080); }
  static constexpr KILN_HD kiln::BFloat16 lowest() noexcept { return kiln::BFloat16::from_bits(0xFF7F); }
  static constexpr KILN_HD kiln::BFloat16 max() noexcept { return kiln::BFloat16::from_bits(0x7F7F); }
  static constexpr KILN_HD kiln::BFloat16 epsilon() noexcept { return kiln::BFloat16::from_bits(0x3C00); }
  static constexpr KILN_HD kiln::BFloat16 round_error() noexcept { return kiln::BFloat16::from_bits(0x3F00); }
  static constexpr KILN_HD kiln::BFloat16 infinity() noexcept { return kiln::BFloat16::from_bits(0x7F80); }
  static constexpr KILN_HD kiln::BFloat16 quiet_NaN() noexcept { return kiln::BFloat16::from_bits(0x7FC0); }
  static constexpr KILN_HD kiln::BFloat16 signaling_NaN() noexcept {
    return kiln::BFloat16::from_bits(0x7FA0);
  }
  static constexpr KILN_HD kiln::BFloat16 denorm_min() noexcept { return kiln::BFloat16::from_bits(0x0001); }
};

}  // namespace std
