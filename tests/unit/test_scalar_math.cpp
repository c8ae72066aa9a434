// Tests for src/core/half.h, scalar_math.h and philox.h. Each functor is compared with
// an independent computation: long double std:: math for double inputs, double for
// float/Half/BFloat16, exact 128-bit integer arithmetic for integers; PyTorch-specific
// edge semantics are spelled out in tables.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "core/half.h"
#include "core/philox.h"
#include "core/scalar_math.h"

namespace {

using kiln::BFloat16;
using kiln::Half;
namespace km = kiln::math;
using i128 = __int128;

template <class T>
struct Tag {
  using type = T;
};
template <class... Ts, class F>
void for_types(F&& f) {
  (f(Tag<Ts>{}), ...);
}

// ---------------------------------------------------------------------------------
// Value helpers

template <class T>
long double to_ld(T x) {
  return static_cast<long double>(static_cast<double>(static_cast<km::opmath_t<T>>(x)));
}

template <class T>
bool is_nan(T x) {
  const double d = static_cast<double>(static_cast<km::opmath_t<T>>(x));
  return std::isnan(d);
}

template <class T>
uint64_t bits_of(T x) {
  if constexpr (kiln::is_reduced_float_v<T>)
    return x.x;
  else if constexpr (std::is_same_v<T, float>) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    return u;
  } else {
    uint64_t u;
    std::memcpy(&u, &x, 8);
    return u;
  }
}

// Exact equality including the sign of zero; any NaN equals any NaN.
template <class T>
bool same(T a, T b) {
  if constexpr (km::is_floating_v<T>) {
    if (is_nan(a) || is_nan(b)) return is_nan(a) && is_nan(b);
    const double da = static_cast<double>(static_cast<km::opmath_t<T>>(a));
    const double db = static_cast<double>(static_cast<km::opmath_t<T>>(b));
    return da == db && std::signbit(da) == std::signbit(db);
  } else {
    return a == b;
  }
}

template <class T>
constexpr long double eps_of() {
  if constexpr (std::is_same_v<T, Half>)
    return 0.0009765625L;
  else if constexpr (std::is_same_v<T, BFloat16>)
    return 0.0078125L;
  else
    return std::numeric_limits<T>::epsilon();
}
template <class T>
constexpr long double min_normal_of() {
  if constexpr (std::is_same_v<T, Half>)
    return 6.103515625e-05L;
  else if constexpr (std::is_same_v<T, BFloat16>)
    return std::numeric_limits<float>::min();
  else
    return std::numeric_limits<T>::min();
}

// actual (in T) against an exact expected value: within `ulps` units in the last place
// of T plus an absolute slack `abs_tol`. NaN must match NaN; infinities must match,
// except that an expected value that rounds to infinity in T accepts infinity.
template <class T>
::testing::AssertionResult close_to(T actual, long double expected, double ulps, long double abs_tol = 0) {
  const long double a = to_ld(actual);
  if (std::isnan(expected) || std::isnan(a)) {
    if (std::isnan(expected) && std::isnan(a)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << "got " << static_cast<double>(a) << " expected " << static_cast<double>(expected);
  }
  const long double rounded = to_ld(T(static_cast<double>(expected)));
  if (std::isinf(a) || std::isinf(expected)) {
    if (a == expected || a == rounded) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << "got " << static_cast<double>(a) << " expected " << static_cast<double>(expected);
  }
  const long double ulp = eps_of<T>() * std::max(std::fabs(expected), min_normal_of<T>());
  const long double diff = std::fabs(a - expected);
  if (diff <= ulps * ulp + abs_tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << std::hexfloat << "got " << static_cast<double>(a) << " expected " << static_cast<double>(expected)
         << std::defaultfloat << " (" << static_cast<double>(diff / ulp) << " ulp)";
}

// A grid of interesting floating values (in double; converted to T by the caller).
std::vector<double> float_grid(bool sweep = true) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> v = {0.0,
                           1e-310,
                           1.4e-45,
                           1e-40,
                           1.1754943508222875e-38,
                           6e-8,
                           6.1035e-05,
                           1e-30,
                           1e-7,
                           1e-3,
                           0.1,
                           0.25,
                           0.5,
                           0.75,
                           0.999,
                           1.0,
                           1.0000001,
                           1.5,
                           2.0,
                           2.5,
                           3.0,
                           3.14159265358979,
                           7.0,
                           10.0,
                           20.0,
                           50.0,
                           88.7,
                           89.5,
                           100.0,
                           700.0,
                           710.0,
                           65504.0,
                           65520.0,
                           1e10,
                           1e30,
                           3.4028234663852886e38,
                           1e300,
                           1.7976931348623157e308,
                           inf,
                           std::numeric_limits<double>::quiet_NaN()};
  const size_t n = v.size();
  for (size_t i = 0; i < n; ++i) v.push_back(-v[i]);
  if (sweep) {
    for (double x = -30; x <= 30; x += 0.173) v.push_back(x);
    std::mt19937_64 rng(42);
    std::uniform_real_distribution<double> e(-40, 40), s(1, 2);
    for (int i = 0; i < 300; ++i) v.push_back((rng() & 1 ? -1 : 1) * s(rng) * std::exp2(std::floor(e(rng))));
  }
  return v;
}

template <class T>
std::vector<T> grid_as() {
  std::vector<T> out;
  for (double d : float_grid()) out.push_back(T(d));
  return out;
}

template <class T>
std::vector<T> all_16bit() {
  std::vector<T> out;
  for (uint32_t b = 0; b < 65536; ++b) out.push_back(T::from_bits(static_cast<uint16_t>(b)));
  return out;
}

// Floating inputs to test a unary op on: a grid for float/double, every value for 16-bit.
template <class T>
std::vector<T> unary_inputs() {
  if constexpr (kiln::is_reduced_float_v<T>)
    return all_16bit<T>();
  else
    return grid_as<T>();
}

// Checks f(x) against ref(x) for x in unary_inputs<T>(). ref receives long double for
// double inputs and double otherwise (so references are computed more precisely than T).
template <class T, class F, class Ref>
void check_unary(const char* name, F f, Ref ref, double ulps, double abs_k = 0) {
  using R = std::conditional_t<std::is_same_v<T, double>, long double, double>;
  using C = km::opmath_t<T>;
  int failures = 0;
  for (T x : unary_inputs<T>()) {
    const T got = f(x);
    const long double want = static_cast<long double>(ref(static_cast<R>(to_ld(x))));
    const long double xa = std::fabs(to_ld(x));
    const long double abs_tol =
        abs_k * eps_of<C>() * std::max(1.0L, std::isfinite(xa) ? xa : 1.0L) + 4 * min_normal_of<C>();
    auto r = close_to(got, want, ulps, abs_tol);
    if (!r && ++failures <= 5)
      ADD_FAILURE() << name << "<" << sizeof(T) << ">(" << static_cast<double>(to_ld(x))
                    << "): " << r.message();
  }
  EXPECT_EQ(failures, 0) << name;
}

template <class F, class Ref>
void check_unary_all_float(const char* name, F f, Ref ref, double ulps, double abs_k = 0) {
  check_unary<float>(name, f, ref, ulps, abs_k);
  check_unary<double>(name, f, ref, ulps, abs_k);
  check_unary<Half>(name, f, ref, 1.0, abs_k);
  check_unary<BFloat16>(name, f, ref, 1.0, abs_k);
}

// ---------------------------------------------------------------------------------
// Half / BFloat16

// Independent decoding of a binary16 value: (-1)^s 2^(e-15) (1 + m/1024).
double decode_half(uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v;
  if (e == 31)
    v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (e == 0)
    v = std::ldexp(m, -24);
  else
    v = std::ldexp(1024 + m, e - 25);
  return s ? -v : v;
}

TEST(Half, DecodesEveryPatternAndRoundTrips) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const Half h = Half::from_bits(static_cast<uint16_t>(b));
    const float f = h;
    const double want = decode_half(static_cast<uint16_t>(b));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(f)) << b;
      ASSERT_TRUE(std::isnan(static_cast<float>(Half(f))));
      if (b & 0x200) {
        ASSERT_EQ(Half(f).x, b) << "quiet NaN payload kept";
      }
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), want) << b;
    ASSERT_EQ(std::signbit(f), (b & 0x8000) != 0) << b;
    ASSERT_EQ(Half(f).x, b) << "round trip " << b;
    ASSERT_EQ(Half(static_cast<double>(f)).x, b) << "round trip via double " << b;
  }
}

TEST(BFloat16, DecodesEveryPatternAndRoundTrips) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const BFloat16 h = BFloat16::from_bits(static_cast<uint16_t>(b));
    const float f = h;
    uint32_t u;
    std::memcpy(&u, &f, 4);
    ASSERT_EQ(u, b << 16);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(static_cast<float>(BFloat16(f))));
      if (b & 0x40) {
        ASSERT_EQ(BFloat16(f).x, b);
      }
      continue;
    }
    ASSERT_EQ(BFloat16(f).x, b) << b;
    ASSERT_EQ(BFloat16(static_cast<double>(f)).x, b) << b;
  }
}

// Property check of round-to-nearest-even: the result is no farther from x than either
// neighbour, and an exact tie picks the even pattern. Neighbours are found in the
// sorted list of finite values.
template <class H>
void check_rounding(double x, H got, double overflow_at, double (*dec)(uint16_t)) {
  const double g = dec(got.x);
  if (std::fabs(x) >= overflow_at) {  // max + half an ulp and beyond: inf
    ASSERT_TRUE(std::isinf(g) && (g > 0) == (x > 0)) << x;
    return;
  }
  ASSERT_TRUE(std::isfinite(g)) << x;
  // Neighbour patterns by magnitude (patterns are ordered like magnitudes).
  const uint16_t mag = got.x & 0x7fff, sign = got.x & 0x8000;
  const double d = std::fabs(x - g);
  if (mag > 0) {
    ASSERT_LE(d, std::fabs(x - dec(static_cast<uint16_t>(sign | (mag - 1))))) << x;
  }
  const double up = dec(static_cast<uint16_t>(sign | (mag + 1)));
  if (std::isfinite(up)) {
    ASSERT_LE(d, std::fabs(x - up)) << x;
  }
  if (mag > 0 && d == std::fabs(x - dec(static_cast<uint16_t>(sign | (mag - 1))))) {
    ASSERT_EQ(mag & 1, 0) << x;
  }
  if (std::isfinite(up) && d != 0 && d == std::fabs(x - up)) {
    ASSERT_EQ(mag & 1, 0) << x;
  }
  if (x == 0) {
    ASSERT_EQ(std::signbit(g), std::signbit(x));
  }
}

double decode_bf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(Half, RoundsToNearestEven) {
  // A stride through all float bit patterns, plus every tie and its neighbours.
  for (uint64_t u = 0; u < (1ull << 32); u += 4099) {
    float f;
    const uint32_t w = static_cast<uint32_t>(u);
    std::memcpy(&f, &w, 4);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(static_cast<float>(Half(f))));
      ASSERT_TRUE(std::isnan(static_cast<float>(BFloat16(f))));
      continue;
    }
    check_rounding(f, Half(f), 65520.0, decode_half);
    check_rounding(f, BFloat16(f), 3.3895313892515355e38 + std::ldexp(1.0, 119), decode_bf16);
  }
  for (uint32_t b = 0; b < 0x7bff; ++b) {
    for (double s : {1.0, -1.0}) {
      const double lo = decode_half(static_cast<uint16_t>(b)), hi = decode_half(static_cast<uint16_t>(b + 1));
      const double mid = s * (lo + hi) / 2;  // exact in float (one more bit than half)
      const Half h(static_cast<float>(mid));
      ASSERT_EQ(h.x & 0x7fff, (b & 1) ? b + 1 : b) << "tie at " << mid;
      const float above = std::nextafter(static_cast<float>(mid), static_cast<float>(s * 1e9));
      const float below = std::nextafter(static_cast<float>(mid), static_cast<float>(-s * 1e9));
      ASSERT_EQ(Half(above).x & 0x7fff, b + 1);
      ASSERT_EQ(Half(below).x & 0x7fff, b);
    }
  }
  EXPECT_EQ(Half(65519.996f).x, 0x7bff);
  EXPECT_EQ(Half(65520.0f).x, 0x7c00);
  EXPECT_EQ(Half(-1e6f).x, 0xfc00);
  EXPECT_EQ(Half(std::ldexp(1.0f, -25)).x, 0x0000);  // tie with 0 -> even (0)
  EXPECT_EQ(Half(std::nextafter(std::ldexp(1.0f, -25), 1.0f)).x, 0x0001);
  EXPECT_EQ(Half(std::ldexp(3.0f, -25)).x, 0x0002);  // 1.5 units -> 2
  EXPECT_EQ(Half(-0.0f).x, 0x8000);
  EXPECT_EQ(BFloat16(3.4e38f).x, 0x7f80);      // past bf16 max + half ulp
  EXPECT_EQ(BFloat16(1.00390625f).x, 0x3f80);  // tie 1 + 2^-8 -> 1.0 (even)
  EXPECT_EQ(BFloat16(1.01171875f).x, 0x3f82);  // tie 1 + 3*2^-8 -> 1 + 2^-6 (even)
  // double -> Half rounds once: 1 + 2^-11 + 2^-40 is just above a tie, but rounding to
  // float first would land on the tie and then go to even.
  EXPECT_EQ(Half(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)).x, 0x3c01);
  EXPECT_EQ(Half(1.0 + std::ldexp(1.0, -11) - std::ldexp(1.0, -40)).x, 0x3c00);
  EXPECT_EQ(BFloat16(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40)).x, 0x3f81);
  EXPECT_EQ(Half(int64_t{70000}).x, 0x7c00);
  EXPECT_EQ(BFloat16(int64_t{16777217 + 65536}).x, BFloat16(16842752.0 + 1).x);
}

TEST(Half, NumericLimitsMatchC10) {
  using LH = std::numeric_limits<Half>;
  using LB = std::numeric_limits<BFloat16>;
  EXPECT_EQ(static_cast<float>(LH::max()), 65504.0f);
  EXPECT_EQ(static_cast<float>(LH::lowest()), -65504.0f);
  EXPECT_EQ(static_cast<float>(LH::min()), 6.103515625e-05f);
  EXPECT_EQ(static_cast<float>(LH::epsilon()), 0.0009765625f);
  EXPECT_EQ(static_cast<float>(LH::round_error()), 0.5f);
  EXPECT_EQ(static_cast<float>(LH::denorm_min()), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(static_cast<float>(LH::infinity())));
  EXPECT_TRUE(std::isnan(static_cast<float>(LH::quiet_NaN())));
  EXPECT_TRUE(std::isnan(static_cast<float>(LH::signaling_NaN())));
  EXPECT_EQ(LH::digits, 11);
  EXPECT_EQ(static_cast<float>(LB::max()), 3.3895313892515355e38f);
  EXPECT_EQ(static_cast<float>(LB::lowest()), -3.3895313892515355e38f);
  EXPECT_EQ(static_cast<float>(LB::min()), std::numeric_limits<float>::min());
  EXPECT_EQ(static_cast<float>(LB::epsilon()), 0.0078125f);
  EXPECT_EQ(static_cast<float>(LB::denorm_min()), std::ldexp(1.0f, -133));
  EXPECT_TRUE(std::isinf(static_cast<float>(LB::infinity())));
  EXPECT_TRUE(std::isnan(static_cast<float>(LB::quiet_NaN())));
  EXPECT_TRUE(std::isnan(static_cast<float>(LB::signaling_NaN())));
  EXPECT_EQ(LB::digits, 8);
  static_assert(LH::is_specialized && LB::is_specialized);
  constexpr Half c = Half::from_bits(0x3c00);  // constexpr construction from bits
  static_assert(c.x == 0x3c00);
}

TEST(Half, Operators) {
  const Half a(1.5f), b(2.25f);
  static_assert(std::is_same_v<decltype(a + b), Half>);
  static_assert(std::is_same_v<decltype(a * 2), Half>);
  static_assert(std::is_same_v<decltype(2 * a), Half>);
  static_assert(std::is_same_v<decltype(a + 1.0f), float>);
  static_assert(std::is_same_v<decltype(1.0 / a), double>);
  static_assert(std::is_same_v<decltype(-a), Half>);
  static_assert(std::is_same_v<decltype(BFloat16(1.0f) - BFloat16(2.0f)), BFloat16>);
  EXPECT_EQ(static_cast<float>(a + b), 3.75f);
  EXPECT_EQ(static_cast<float>(a - b), -0.75f);
  EXPECT_EQ(static_cast<float>(a * b), 3.375f);
  EXPECT_EQ((a / Half(3.0f)).x, Half(0.5f).x);
  EXPECT_EQ((Half(1.0f) / Half(3.0f)).x, Half(1.0f / 3.0f).x);  // rounded once from float
  EXPECT_EQ((Half(2048.0f) + Half(1.0f)).x, Half(2048.0f).x);   // 2049 ties to even 2048
  EXPECT_EQ((-Half(0.0f)).x, 0x8000);
  EXPECT_EQ(static_cast<float>(a + 1), 2.5f);
  Half c = a;
  c += b;
  EXPECT_EQ(static_cast<float>(c), 3.75f);
  c -= 1;
  c *= Half(2.0f);
  c /= 2.75f;
  EXPECT_EQ(static_cast<float>(c), 2.0f);
  float f = 1.0f;
  f += a;
  EXPECT_EQ(f, 2.5f);
  const Half nan = std::numeric_limits<Half>::quiet_NaN();
  EXPECT_FALSE(nan == nan);
  EXPECT_TRUE(nan != nan);
  EXPECT_FALSE(nan < a);
  EXPECT_TRUE(Half(-0.0f) == Half(0.0f));
  EXPECT_TRUE(a < b && b > a && a <= a && b >= a && a == 1.5f && a < 2);
  EXPECT_TRUE(std::isnan(static_cast<float>(-nan)));
  EXPECT_TRUE(BFloat16(1.0f) < BFloat16(2.0f));
  EXPECT_EQ(static_cast<float>(BFloat16(1.0f) + BFloat16(std::ldexp(1.0f, -9))), 1.0f);
}

// ---------------------------------------------------------------------------------
// Unary float functors

template <class R>
R ref_erfinv(R x) {
  // Bisection in R (long double for double inputs): independent of the implementation's
  // initial guess and iteration. erfc in the upper half keeps the tail accurate.
  if (std::isnan(x) || std::fabs(x) > 1) return std::numeric_limits<R>::quiet_NaN();
  if (std::fabs(x) == 1) return std::copysign(std::numeric_limits<R>::infinity(), x);
  const R ax = std::fabs(x);
  if (ax < R(1e-3)) {  // series; bisection's absolute resolution is too coarse here
    const R pi = R(3.14159265358979323846264338327950288L), x2 = x * x;
    return std::sqrt(pi) / 2 * x * (1 + x2 * (pi / 12 + x2 * (7 * pi * pi / 480)));
  }
  R lo = 0, hi = 10;
  for (int i = 0; i < 200; ++i) {
    const R mid = (lo + hi) / 2;
    const bool below = ax <= R(0.5) ? std::erf(mid) < ax : std::erfc(mid) > 1 - ax;
    (below ? lo : hi) = mid;
  }
  return std::copysign((lo + hi) / 2, x);
}

TEST(ScalarMath, UnaryTranscendental) {
  check_unary_all_float(
      "Exp", km::Exp{}, [](auto x) { return std::exp(x); }, 2);
  check_unary_all_float(
      "Exp2", km::Exp2{}, [](auto x) { return std::exp2(x); }, 2);
  check_unary_all_float(
      "Expm1", km::Expm1{}, [](auto x) { return std::expm1(x); }, 2);
  check_unary_all_float(
      "Log", km::Log{}, [](auto x) { return std::log(x); }, 2);
  check_unary_all_float(
      "Log2", km::Log2{}, [](auto x) { return std::log2(x); }, 2);
  check_unary_all_float(
      "Log10", km::Log10{}, [](auto x) { return std::log10(x); }, 2);
  check_unary_all_float(
      "Log1p", km::Log1p{}, [](auto x) { return std::log1p(x); }, 2);
  check_unary_all_float(
      "Sqrt", km::Sqrt{}, [](auto x) { return std::sqrt(x); }, 1);
  check_unary_all_float(
      "Rsqrt", km::Rsqrt{}, [](auto x) { return 1 / std::sqrt(x); }, 2);
  check_unary_all_float(
      "Reciprocal", km::Reciprocal{}, [](auto x) { return 1 / x; }, 1);
  check_unary_all_float(
      "Sin", km::Sin{}, [](auto x) { return std::sin(x); }, 2);
  check_unary_all_float(
      "Cos", km::Cos{}, [](auto x) { return std::cos(x); }, 2);
  check_unary_all_float(
      "Tan", km::Tan{}, [](auto x) { return std::tan(x); }, 2);
  check_unary_all_float(
      "Tanh", km::Tanh{}, [](auto x) { return std::tanh(x); }, 2);
  check_unary_all_float(
      "Erf", km::Erf{}, [](auto x) { return std::erf(x); }, 2);
  check_unary_all_float(
      "Sigmoid", km::Sigmoid{}, [](auto x) { return 1 / (1 + std::exp(-x)); }, 4);
  // Exact gelu written with erfc: well conditioned where the 1 + erf(x) form cancels, so
  // the slack is absolute, proportional to |x| eps. Both give NaN at -inf (0 * inf).
  check_unary_all_float(
      "Gelu", km::Gelu{},
      [](auto x) {
        return std::isinf(x) && x < 0 ? std::nan("") : x / 2 * std::erfc(-x / std::sqrt(decltype(x)(2)));
      },
      4, 4);
  check_unary_all_float(
      "GeluTanh", km::GeluTanh{},
      [](auto x) {
        using R = decltype(x);
        const R k = std::sqrt(R(2) / R(3.14159265358979323846264338327950288L));
        return x / 2 * (1 + std::tanh(k * (x + R(0.044715) * x * x * x)));
      },
      8, 16);
  check_unary_all_float(
      "Silu", km::Silu{}, [](auto x) { return x / (1 + std::exp(-x)); }, 4, 2);
  check_unary_all_float(
      "Erfinv", km::Erfinv{}, [](auto x) { return ref_erfinv(x); }, 4);
}

// Error of a float result in units of the float spacing at the exact (double) value,
// 2^-149 in the subnormal range; an infinite result must match an infinite reference.
double float_ulp_error(float got, double ref) {
  if (std::isnan(ref)) return std::isnan(got) ? 0 : 1e30;
  const double max_plus_half_ulp = std::ldexp(2.0 - std::ldexp(1.0, -24), 127);
  if (std::fabs(ref) >= max_plus_half_ulp) return got == static_cast<float>(ref) ? 0 : 1e30;
  if (!std::isfinite(got)) return 1e30;
  int e = 0;
  std::frexp(ref, &e);  // |ref| in [2^(e-1), 2^e)
  const double ulp = std::ldexp(1.0, std::max(e - 24, -149));
  return std::fabs(static_cast<double>(got) - ref) / ulp;
}

// km::exp_float (behind Exp for float, Half and BFloat16) is a polynomial, not expf:
// check it within 2 ulp of double exp on a dense sweep of the range where exp(x) is
// neither 0 nor inf (the bit patterns stepped evenly, ~20M points including the
// subnormal results), on 10^7 uniform random points, and on the edges and specials.
// (An exhaustive run over all of [-104, 89] measured a max error of 0.95 ulp.)
TEST(ScalarMath, ExpFloatAccuracy) {
  double worst = 0;
  float worst_x = 0;
  auto check = [&](float x) {
    const double err = float_ulp_error(km::exp_float(x), std::exp(static_cast<double>(x)));
    if (err > worst) {
      worst = err;
      worst_x = x;
    }
  };
  auto bits_to_float = [](uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  // Positive side: bit patterns 0 .. bits(89); negative: 0x80000000 .. bits(-104).
  const uint32_t pos_end = static_cast<uint32_t>(bits_of(89.0f));
  const uint32_t neg_end = static_cast<uint32_t>(bits_of(-104.0f));
  for (uint32_t u = 0; u <= pos_end; u += 97) check(bits_to_float(u));
  for (uint32_t u = 0x80000000u; u <= neg_end; u += 101) check(bits_to_float(u));
  std::mt19937_64 rng(20261202);
  std::uniform_real_distribution<float> dist(-104.0f, 89.0f);
  for (int i = 0; i < 10'000'000; ++i) check(dist(rng));
  // Around the overflow and underflow thresholds and the reduction's rounding points.
  for (float x : {88.0f, 88.5f, 88.72283f, -87.33654f, -103.0f, -103.972f, -103.98f, 0.5f * 0.6931472f}) {
    float y = x;
    for (int i = 0; i < 1000; ++i) {
      check(y);
      y = std::nextafter(y, std::numeric_limits<float>::infinity());
    }
    y = x;
    for (int i = 0; i < 1000; ++i) {
      check(y);
      y = std::nextafter(y, -std::numeric_limits<float>::infinity());
    }
  }
  EXPECT_LE(worst, 2.0) << "at x = " << std::hexfloat << worst_x;

  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(km::exp_float(0.0f), 1.0f);
  EXPECT_EQ(km::exp_float(-0.0f), 1.0f);
  EXPECT_EQ(km::exp_float(inf), inf);
  EXPECT_EQ(bits_of(km::exp_float(-inf)), 0u);  // +0
  EXPECT_TRUE(std::isnan(km::exp_float(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(km::exp_float(-std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(km::exp_float(88.8f), inf);
  EXPECT_EQ(km::exp_float(1e30f), inf);
  EXPECT_EQ(km::exp_float(std::numeric_limits<float>::max()), inf);
  EXPECT_EQ(bits_of(km::exp_float(-104.0f)), 0u);
  EXPECT_EQ(bits_of(km::exp_float(-1e30f)), 0u);
  EXPECT_EQ(bits_of(km::exp_float(-std::numeric_limits<float>::max())), 0u);
  EXPECT_EQ(km::exp_float(-103.9f), std::ldexp(1.0f, -149));  // smallest subnormal
  EXPECT_EQ(km::exp_float(1.0f), static_cast<float>(std::exp(1.0)));
  // Monotone (non-decreasing) across the subnormal and overflow edges.
  for (float start : {-104.0f, 88.0f}) {
    float x = start, prev = km::exp_float(x);
    for (int i = 0; i < 200000; ++i) {
      x = std::nextafter(x, inf);
      const float y = km::exp_float(x);
      ASSERT_LE(prev, y) << std::hexfloat << x;
      prev = y;
    }
  }
  // Exp uses it for float and, through float, for Half and BFloat16; double stays ::exp.
  EXPECT_EQ(bits_of(km::Exp{}(0.75f)), bits_of(km::exp_float(0.75f)));
  EXPECT_EQ(bits_of(km::Exp{}(Half(0.75f))), bits_of(Half(km::exp_float(0.75f))));
  EXPECT_EQ(bits_of(km::Exp{}(BFloat16(0.75f))), bits_of(BFloat16(km::exp_float(0.75f))));
  EXPECT_EQ(km::Exp{}(0.75), std::exp(0.75));
}

// Max ulp error of f against ref (double libm) over every float bit pattern stepped by
// `stride` (both signs, subnormals, infinities and NaNs included: ~2^32/stride points).
template <class F, class Ref>
double float_fn_max_ulp(F f, Ref ref, uint32_t stride, float* worst_x) {
  double worst = 0;
  for (uint64_t u = 0; u <= 0xffffffffull; u += stride) {
    const uint32_t b = static_cast<uint32_t>(u);
    float x;
    std::memcpy(&x, &b, 4);
    const double err = float_ulp_error(f(x), ref(static_cast<double>(x)));
    if (err > worst) {
      worst = err;
      *worst_x = x;
    }
  }
  return worst;
}

// The other branch-free float functions (log_float, tanh_float, erf_float, log1p_float,
// expm1_float: behind Log, Tanh, Erf, Log1p, Expm1, Sigmoid, Silu, Gelu, GeluTanh, ... for
// float, Half and BFloat16 on the host) against double libm over ~20M bit patterns each
// (stride 211 covers every binade of both signs). Max errors measured over every 101st bit
// pattern: log 0.81, tanh 1.29, erf 1.28, log1p 2.20, expm1 2.36 ulp.
TEST(ScalarMath, VectorizableFloatFunctionsAccuracy) {
  struct Case {
    const char* name;
    float (*f)(float);
    double (*ref)(double);
    double max_ulp;
  };
  const Case cases[] = {
      {"log_float", km::log_float, [](double x) { return std::log(x); }, 1.0},
      {"tanh_float", km::tanh_float, [](double x) { return std::tanh(x); }, 1.5},
      {"erf_float", km::erf_float, [](double x) { return std::erf(x); }, 1.5},
      {"log1p_float", km::log1p_float, [](double x) { return std::log1p(x); }, 2.5},
      {"expm1_float", km::expm1_float, [](double x) { return std::expm1(x); }, 2.5},
  };
  for (const Case& c : cases) {
    float worst_x = 0;
    const double worst = float_fn_max_ulp(c.f, c.ref, 211, &worst_x);
    EXPECT_LE(worst, c.max_ulp) << c.name << " at x = " << std::hexfloat << worst_x;
  }
}

TEST(ScalarMath, VectorizableFloatFunctionsSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float tiny = std::numeric_limits<float>::denorm_min();
  const float fmax = std::numeric_limits<float>::max();
  // Each function's NaN, infinities, signed zeros and subnormals as libm's (bit for bit
  // where libm's result is exact).
  for (auto f : {km::log_float, km::tanh_float, km::erf_float, km::log1p_float, km::expm1_float}) {
    EXPECT_TRUE(std::isnan(f(nan)));
    EXPECT_TRUE(std::isnan(f(-nan)));
  }
  EXPECT_EQ(bits_of(km::log_float(1.0f)), 0u);
  EXPECT_EQ(km::log_float(0.0f), -inf);
  EXPECT_EQ(km::log_float(-0.0f), -inf);
  EXPECT_EQ(km::log_float(inf), inf);
  EXPECT_TRUE(std::isnan(km::log_float(-inf)));
  EXPECT_TRUE(std::isnan(km::log_float(-1.0f)));
  EXPECT_TRUE(std::isnan(km::log_float(-tiny)));
  EXPECT_EQ(km::log_float(tiny), static_cast<float>(std::log(static_cast<double>(tiny))));
  EXPECT_EQ(km::log_float(fmax), static_cast<float>(std::log(static_cast<double>(fmax))));
  EXPECT_EQ(km::log_float(2.0f), static_cast<float>(std::log(2.0)));

  for (auto f : {km::tanh_float, km::erf_float, km::log1p_float, km::expm1_float}) {
    EXPECT_EQ(bits_of(f(0.0f)), bits_of(0.0f));
    EXPECT_EQ(bits_of(f(-0.0f)), bits_of(-0.0f));
  }
  EXPECT_EQ(km::tanh_float(inf), 1.0f);
  EXPECT_EQ(km::tanh_float(-inf), -1.0f);
  EXPECT_EQ(km::tanh_float(10.0f), 1.0f);
  EXPECT_EQ(km::tanh_float(-1e30f), -1.0f);
  EXPECT_EQ(km::tanh_float(tiny), tiny);
  EXPECT_EQ(km::tanh_float(-1e-20f), -1e-20f);
  EXPECT_EQ(km::erf_float(inf), 1.0f);
  EXPECT_EQ(km::erf_float(-inf), -1.0f);
  EXPECT_EQ(km::erf_float(4.0f), 1.0f);
  EXPECT_EQ(km::erf_float(-fmax), -1.0f);
  EXPECT_LE(float_ulp_error(km::erf_float(1e-30f), std::erf(static_cast<double>(1e-30f))), 1.0);
  EXPECT_EQ(km::erf_float(tiny), tiny);  // 2/sqrt(pi) * 2^-149 rounds to 2^-149
  EXPECT_EQ(km::log1p_float(-1.0f), -inf);
  EXPECT_TRUE(std::isnan(km::log1p_float(-2.0f)));
  EXPECT_TRUE(std::isnan(km::log1p_float(-inf)));
  EXPECT_EQ(km::log1p_float(inf), inf);
  EXPECT_EQ(km::log1p_float(tiny), tiny);
  EXPECT_EQ(km::log1p_float(fmax), static_cast<float>(std::log1p(static_cast<double>(fmax))));
  EXPECT_EQ(km::expm1_float(-inf), -1.0f);
  EXPECT_EQ(km::expm1_float(-100.0f), -1.0f);
  EXPECT_EQ(km::expm1_float(inf), inf);
  EXPECT_EQ(km::expm1_float(89.0f), inf);
  EXPECT_EQ(km::expm1_float(tiny), tiny);
  EXPECT_EQ(km::expm1_float(-1e-20f), -1e-20f);
  // tanh and erf are odd, bit for bit (both halves build |f| and put the sign back).
  for (float x = 1e-6f; x < 20.0f; x *= 1.01f) {
    ASSERT_EQ(bits_of(km::tanh_float(-x)), bits_of(-km::tanh_float(x))) << x;
    ASSERT_EQ(bits_of(km::erf_float(-x)), bits_of(-km::erf_float(x))) << x;
  }

  // The functors use them for float and, through float, Half and BFloat16; double stays libm.
  EXPECT_EQ(bits_of(km::Tanh{}(0.3f)), bits_of(km::tanh_float(0.3f)));
  EXPECT_EQ(bits_of(km::Erf{}(Half(0.75f))), bits_of(Half(km::erf_float(0.75f))));
  EXPECT_EQ(bits_of(km::Log{}(BFloat16(3.0f))), bits_of(BFloat16(km::log_float(3.0f))));
  EXPECT_EQ(bits_of(km::Log1p{}(0.25f)), bits_of(km::log1p_float(0.25f)));
  EXPECT_EQ(bits_of(km::Expm1{}(0.25f)), bits_of(km::expm1_float(0.25f)));
  EXPECT_EQ(bits_of(km::Sigmoid{}(0.5f)), bits_of(1.0f / (1.0f + km::exp_float(-0.5f))));
  EXPECT_EQ(km::Tanh{}(0.3), std::tanh(0.3));
  EXPECT_EQ(km::Erf{}(0.3), std::erf(0.3));
  EXPECT_EQ(km::Log{}(0.3), std::log(0.3));
  EXPECT_EQ(km::Log1p{}(0.3), std::log1p(0.3));
  EXPECT_EQ(km::Expm1{}(0.3), std::expm1(0.3));
}

TEST(ScalarMath, ErfinvDoubleAccuracy) {
  // Double results against high-precision values (mpmath), to ~1e-15 relative.
  struct Case {
    double x, y;
  };
  const Case cases[] = {{0.5, 0.47693627620446987338},
                        {0.9, 1.1630871536766741628},
                        {0.999, 2.3267537655135244939},
                        {-0.3, -0.27246271472675434502},
                        {1e-10, 8.8622692545275804594e-11},
                        {0.9999999999, 4.5728249585449249378},
                        {0.1, 0.088855990494257691974},
                        {1 - std::ldexp(1.0, -53), 5.8635847487551679272},
                        {1 - std::ldexp(1.0, -24), 3.8325068569007109095}};
  for (const Case& c : cases) EXPECT_NEAR(km::Erfinv{}(c.x), c.y, 2e-15 * std::fabs(c.y)) << c.x;
  EXPECT_EQ(km::Erfinv{}(std::ldexp(1.0, -1074)), std::ldexp(1.0, -1074));  // 0.886 * denorm_min
  // Dense sweep: erf(erfinv(x)) returns x, and erfinv matches the bisection reference.
  double worst = 0;
  for (double x = -0.99999; x < 1; x += 0.0013) {
    const double y = km::Erfinv{}(x);
    const long double ref = ref_erfinv(static_cast<long double>(x));
    worst = std::max(worst, static_cast<double>(std::fabs((y - ref) / ref)));
  }
  for (int k = 1; k <= 52; ++k) {  // the tail, 1 - 2^-k
    const double x = 1 - std::ldexp(1.0, -k);
    const long double ref = ref_erfinv(static_cast<long double>(x));
    worst = std::max(worst, static_cast<double>(std::fabs((km::Erfinv{}(x)-ref) / ref)));
    worst = std::max(worst, static_cast<double>(std::fabs((km::Erfinv{}(-x) + ref) / ref)));
  }
  EXPECT_LT(worst, 1e-14);
  EXPECT_EQ(km::Erfinv{}(1.0), std::numeric_limits<double>::infinity());
  EXPECT_EQ(km::Erfinv{}(-1.0), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(km::Erfinv{}(1.0f), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(km::Erfinv{}(1.0000001)));
  EXPECT_TRUE(std::isnan(km::Erfinv{}(-2.0f)));
  EXPECT_TRUE(std::isnan(km::Erfinv{}(std::nan(""))));
  EXPECT_TRUE(same(km::Erfinv{}(-0.0), -0.0));
}

// Ops whose result is exact: compared bit for bit (NaN to any NaN) on every input.
template <class T, class F, class Ref>
void check_exact_unary(const char* name, F f, Ref ref) {
  int failures = 0;
  for (T x : unary_inputs<T>()) {
    const T want = T(ref(static_cast<double>(to_ld(x))));
    if (!same(f(x), want) && ++failures <= 5)
      ADD_FAILURE() << name << "(" << static_cast<double>(to_ld(x))
                    << ") = " << static_cast<double>(to_ld(f(x))) << ", expected "
                    << static_cast<double>(to_ld(want));
  }
  EXPECT_EQ(failures, 0) << name;
}

template <class F, class Ref>
void check_exact_unary_all_float(const char* name, F f, Ref ref) {
  check_exact_unary<float>(name, f, ref);
  check_exact_unary<double>(name, f, ref);
  check_exact_unary<Half>(name, f, ref);
  check_exact_unary<BFloat16>(name, f, ref);
}

TEST(ScalarMath, UnaryExactFloat) {
  check_exact_unary_all_float("Neg", km::Neg{}, [](double x) { return -x; });
  check_exact_unary_all_float("Abs", km::Abs{}, [](double x) { return std::fabs(x); });
  check_exact_unary_all_float("Sign", km::Sign{}, [](double x) {
    return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0;  // NaN -> 0 and -0 -> +0, as PyTorch
  });
  check_exact_unary_all_float("Relu", km::Relu{}, [](double x) { return x < 0 ? 0.0 : x; });  // relu(-0) = -0
  check_exact_unary_all_float("Floor", km::Floor{}, [](double x) { return std::floor(x); });
  check_exact_unary_all_float("Ceil", km::Ceil{}, [](double x) { return std::ceil(x); });
  check_exact_unary_all_float("Trunc", km::Trunc{}, [](double x) { return std::trunc(x); });
  check_exact_unary_all_float("Round", km::Round{}, [](double x) {
    // Half to even written out: round half away from zero, then fix the exact ties.
    const double r = std::round(x);
    return std::fabs(x - std::trunc(x)) == 0.5 ? 2 * std::round(x / 2) : r;
  });
  check_exact_unary_all_float("Frac", km::Frac{},
                              [](double x) { return std::isinf(x) ? std::nan("") : x - std::trunc(x); });
  check_exact_unary<float>("Square", km::Square{}, [](double x) { return x * x; });
  check_exact_unary<Half>("Square", km::Square{}, [](double x) { return static_cast<float>(x * x); });
  for (double x : float_grid()) {
    const float f = static_cast<float>(x);
    EXPECT_EQ(km::IsNan{}(f), std::isnan(f));
    EXPECT_EQ(km::IsInf{}(f), std::isinf(f));
    EXPECT_EQ(km::IsFinite{}(f), std::isfinite(f));
    EXPECT_EQ(km::IsNan{}(x), std::isnan(x));
    EXPECT_EQ(km::IsInf{}(x), std::isinf(x));
    EXPECT_EQ(km::IsFinite{}(Half(x)), std::isfinite(static_cast<float>(Half(x))));
    EXPECT_EQ(km::IsInf{}(BFloat16(x)), std::isinf(static_cast<float>(BFloat16(x))));
    EXPECT_EQ(km::LogicalNot{}(x), !(x != 0));
    EXPECT_EQ(km::LogicalNot{}(Half(x)), !(static_cast<float>(Half(x)) != 0));
  }
  EXPECT_FALSE(km::LogicalNot{}(std::nanf("")));  // NaN is truthy
  EXPECT_TRUE(km::LogicalNot{}(-0.0));
}

TEST(ScalarMath, RoundEdgeCases) {
  const float ties[] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 0.49999997f, 8388609.0f};
  const float want[] = {0.0f, 2.0f, 2.0f, -0.0f, -2.0f, -2.0f, 0.0f, 8388609.0f};
  for (size_t i = 0; i < 8; ++i) EXPECT_TRUE(same(km::Round{}(ties[i]), want[i])) << ties[i];
  EXPECT_TRUE(same(km::Frac{}(-1.5), -0.5));
  EXPECT_TRUE(same(km::Frac{}(-2.0f), 0.0f));  // -2 - (-2) = +0
  // torch.round(x, decimals)
  EXPECT_FLOAT_EQ(km::RoundDecimals{2}(1.2345f), 1.23f);
  EXPECT_EQ(km::RoundDecimals{0}(2.5), 2.0);
  EXPECT_EQ(km::RoundDecimals{-1}(1234.5), 1230.0);
  EXPECT_EQ(km::RoundDecimals{-1}(1235.0), 1240.0);  // 123.5 -> 124 (even)
  EXPECT_EQ(km::RoundDecimals{-2}(-250.0), -200.0);
  EXPECT_FLOAT_EQ(km::RoundDecimals{2}(-0.125f), -0.12f);
  EXPECT_EQ(km::RoundDecimals{2}(1.005), 1.0);     // 1.005 is below 1.005 in binary
  EXPECT_EQ(km::RoundDecimals{3}(2.0005), 2.001);  // 2.0005 * 1000 = 2000.5000000000002
  EXPECT_TRUE(std::isnan(km::RoundDecimals{1}(std::nan(""))));
  EXPECT_EQ(static_cast<float>(km::RoundDecimals{1}(Half(0.25f))), static_cast<float>(Half(0.2f)));
}

TEST(ScalarMath, NanToNum) {
  const km::NanToNum f{0.0, 3.4028234663852886e38, -3.4028234663852886e38};
  EXPECT_EQ(f(std::nanf("")), 0.0f);
  EXPECT_EQ(f(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::max());
  EXPECT_EQ(f(-std::numeric_limits<float>::infinity()), std::numeric_limits<float>::lowest());
  EXPECT_EQ(f(1.5f), 1.5f);
  EXPECT_TRUE(same(f(-0.0f), -0.0f));
  const km::NanToNum g{1.0, 65504.0, -65504.0};
  EXPECT_EQ(g(std::numeric_limits<Half>::quiet_NaN()).x, Half(1.0f).x);
  EXPECT_EQ(g(std::numeric_limits<Half>::infinity()).x, std::numeric_limits<Half>::max().x);
  EXPECT_EQ(g(-std::numeric_limits<Half>::infinity()).x, std::numeric_limits<Half>::lowest().x);
  EXPECT_EQ(f(int64_t{7}), 7);
  EXPECT_EQ(f(true), true);
}

// ---------------------------------------------------------------------------------
// Integers

template <class T>
std::vector<T> int_grid() {
  using L = std::numeric_limits<T>;
  std::vector<int64_t> raw = {0, 1, -1, 2, -2, 3, -3, 5, -5, 7, -7, 8, 31, 63, 100, -100, 127, -128, 255};
  std::vector<T> v;
  for (int64_t r : raw) v.push_back(static_cast<T>(r));
  for (T x : {L::min(), static_cast<T>(L::min() + 1), L::max(), static_cast<T>(L::max() - 1),
              static_cast<T>(L::max() / 2), static_cast<T>(L::min() / 2), static_cast<T>(L::max() / 3)})
    v.push_back(x);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20; ++i) v.push_back(static_cast<T>(rng()));
  return v;
}

// i128 -> T keeps the low bits (two's complement wrap), an independent model of
// PyTorch's wrapping integer arithmetic.
template <class T>
T wrap(i128 v) {
  return static_cast<T>(v);
}

TEST(ScalarMath, IntegerUnary) {
  for_types<int8_t, int16_t, int32_t, int64_t, uint8_t>([](auto tag) {
    using T = typename decltype(tag)::type;
    for (T x : int_grid<T>()) {
      const i128 w = x;
      EXPECT_EQ(km::Neg{}(x), wrap<T>(-w));
      EXPECT_EQ(km::Abs{}(x), wrap<T>(w < 0 ? -w : w));
      EXPECT_EQ(km::Sign{}(x), static_cast<T>(w > 0 ? 1 : w < 0 ? -1 : 0));
      EXPECT_EQ(km::Square{}(x), wrap<T>(w * w));
      EXPECT_EQ(km::Relu{}(x), static_cast<T>(w < 0 ? 0 : w));
      EXPECT_EQ(km::BitwiseNot{}(x), wrap<T>(-w - 1));
      EXPECT_EQ(km::Floor{}(x), x);
      EXPECT_EQ(km::Ceil{}(x), x);
      EXPECT_EQ(km::Round{}(x), x);
      EXPECT_EQ(km::Trunc{}(x), x);
      EXPECT_FALSE(km::IsNan{}(x));
      EXPECT_FALSE(km::IsInf{}(x));
      EXPECT_TRUE(km::IsFinite{}(x));
      EXPECT_EQ(km::LogicalNot{}(x), w == 0);
    }
  });
  EXPECT_EQ(km::Abs{}(int8_t{-128}), int8_t{-128});  // wraps, as torch.abs
  EXPECT_EQ(km::BitwiseNot{}(true), false);
  EXPECT_EQ(km::Sign{}(true), true);
  EXPECT_EQ(km::Abs{}(false), false);
  EXPECT_EQ(km::Square{}(true), true);
}

template <class T>
i128 floor_div(i128 a, i128 b) {  // Python's //, from truncating division
  i128 q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

TEST(ScalarMath, IntegerBinary) {
  for_types<int8_t, int16_t, int32_t, int64_t, uint8_t>([](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int kBits = sizeof(T) * 8;
    for (T a : int_grid<T>()) {
      for (T b : int_grid<T>()) {
        const i128 x = a, y = b;
        EXPECT_EQ(km::Add{}(a, b), wrap<T>(x + y));
        EXPECT_EQ(km::Sub{}(a, b), wrap<T>(x - y));
        EXPECT_EQ(km::Mul{}(a, b), wrap<T>(x * y));
        EXPECT_EQ(km::AddAlpha<int64_t>{3}(a, b), wrap<T>(x + 3 * y));
        EXPECT_EQ(km::AddAlpha<int64_t>{-1}(a, b), wrap<T>(x - y));
        EXPECT_EQ(km::Maximum{}(a, b), static_cast<T>(x > y ? x : y));
        EXPECT_EQ(km::Minimum{}(a, b), static_cast<T>(x < y ? x : y));
        EXPECT_EQ(km::Fmax{}(a, b), static_cast<T>(x > y ? x : y));
        EXPECT_EQ(km::Fmin{}(a, b), static_cast<T>(x < y ? x : y));
        EXPECT_EQ(km::Eq{}(a, b), x == y);
        EXPECT_EQ(km::Ne{}(a, b), x != y);
        EXPECT_EQ(km::Lt{}(a, b), x < y);
        EXPECT_EQ(km::Le{}(a, b), x <= y);
        EXPECT_EQ(km::Gt{}(a, b), x > y);
        EXPECT_EQ(km::Ge{}(a, b), x >= y);
        EXPECT_EQ(km::LogicalAnd{}(a, b), x != 0 && y != 0);
        EXPECT_EQ(km::LogicalOr{}(a, b), x != 0 || y != 0);
        EXPECT_EQ(km::LogicalXor{}(a, b), (x != 0) != (y != 0));
        EXPECT_EQ(km::BitwiseAnd{}(a, b), static_cast<T>(x & y));
        EXPECT_EQ(km::BitwiseOr{}(a, b), static_cast<T>(x | y));
        EXPECT_EQ(km::BitwiseXor{}(a, b), static_cast<T>(x ^ y));
        // Division family. Division by zero returns 0 (the caller raises).
        if (y == 0) {
          EXPECT_EQ(km::DivTrunc{}(a, b), 0);
          EXPECT_EQ(km::DivFloor{}(a, b), 0);
          EXPECT_EQ(km::Fmod{}(a, b), 0);
          EXPECT_EQ(km::Remainder{}(a, b), 0);
        } else {
          EXPECT_EQ(km::DivTrunc{}(a, b), wrap<T>(x / y)) << +a << " " << +b;  // MIN / -1 wraps
          EXPECT_EQ(km::Fmod{}(a, b), wrap<T>(x % y)) << +a << " " << +b;
          const T q = km::DivFloor{}(a, b), r = km::Remainder{}(a, b);
          EXPECT_EQ(q, wrap<T>(floor_div<T>(x, y))) << +a << " " << +b;
          // Python's invariants: a == q*b + r, r has the sign of b, |r| < |b|.
          EXPECT_EQ(wrap<T>(i128(q) * y + r), a);
          EXPECT_TRUE(r == 0 || ((r < 0) == (y < 0))) << +a << " " << +b;
          EXPECT_LT(r < 0 ? -i128(r) : i128(r), y < 0 ? -y : y);
        }
        // Shifts: out-of-range counts (negative or >= width) give 0 / sign fill.
        const i128 sh = static_cast<std::make_signed_t<T>>(b);
        if (sh < 0 || sh >= kBits) {
          EXPECT_EQ(km::BitwiseLeftShift{}(a, b), 0);
          EXPECT_EQ(km::BitwiseRightShift{}(a, b), static_cast<T>(x < 0 ? -1 : 0));
        } else {
          EXPECT_EQ(km::BitwiseLeftShift{}(a, b), wrap<T>(x * (i128(1) << sh)));
          EXPECT_EQ(km::BitwiseRightShift{}(a, b), wrap<T>(floor_div<T>(x, i128(1) << sh)));
        }
      }
    }
    // Pow: exact, wrapping; negative exponents follow torch (1, +-1, else 0).
    for (T a : int_grid<T>()) {
      for (int64_t e : {0, 1, 2, 3, 5, 7, 8, 15, 16, 31, 33, 63, 64, 70, -1, -2, -3}) {
        const T b = static_cast<T>(e);
        const i128 eb = b;
        T want;
        if (eb < 0) {
          want = a == 1                                             ? T(1)
                 : (std::is_signed_v<T> && a == static_cast<T>(-1)) ? static_cast<T>((eb % 2) ? -1 : 1)
                                                                    : T(0);
        } else {
          T p = 1;
          for (i128 k = 0; k < eb; ++k) p = wrap<T>(i128(p) * a);
          want = p;
        }
        EXPECT_EQ(km::Pow{}(a, b), want) << +a << "^" << e;
      }
    }
  });
  // Python's results, verified with CPython.
  EXPECT_EQ(km::DivFloor{}(int64_t{-7}, int64_t{2}), -4);
  EXPECT_EQ(km::Remainder{}(int64_t{-7}, int64_t{2}), 1);
  EXPECT_EQ(km::DivFloor{}(int64_t{7}, int64_t{-2}), -4);
  EXPECT_EQ(km::Remainder{}(int64_t{7}, int64_t{-2}), -1);
  EXPECT_EQ(km::DivFloor{}(int64_t{-7}, int64_t{-2}), 3);
  EXPECT_EQ(km::Remainder{}(int64_t{-7}, int64_t{-2}), -1);
  EXPECT_EQ(km::DivFloor{}(INT64_MIN, int64_t{3}), -3074457345618258603);
  EXPECT_EQ(km::Remainder{}(INT64_MIN, int64_t{3}), 1);
  EXPECT_EQ(km::DivFloor{}(INT64_MIN, int64_t{7}), -1317624576693539402);
  EXPECT_EQ(km::Remainder{}(INT64_MIN, int64_t{-7}), -1);
  EXPECT_EQ(km::DivFloor{}(int8_t{-128}, int8_t{3}), -43);
  EXPECT_EQ(km::Remainder{}(int8_t{-128}, int8_t{3}), 1);
  EXPECT_EQ(km::Fmod{}(int32_t{-7}, int32_t{2}), -1);
  EXPECT_EQ(km::Fmod{}(int32_t{7}, int32_t{-2}), 1);
  EXPECT_EQ(km::Pow{}(int64_t{3}, int64_t{40}), static_cast<int64_t>(12157665459056928801ull));  // wraps
  EXPECT_EQ(km::Pow{}(int64_t{-1}, int64_t{-3}), -1);
  EXPECT_EQ(km::Pow{}(int64_t{-1}, INT64_MIN), 1);  // even, no overflow in the parity test
  EXPECT_EQ(km::Pow{}(int64_t{2}, int64_t{-1}), 0);
  EXPECT_EQ(km::Pow{}(int64_t{0}, int64_t{-1}), 0);
  EXPECT_EQ(km::Pow{}(uint8_t{2}, uint8_t{9}), 0);
  EXPECT_EQ(km::Pow{}(int32_t{2}, int32_t{31}), INT32_MIN);
  EXPECT_EQ(km::BitwiseRightShift{}(uint8_t{200}, uint8_t{9}), 0);
  EXPECT_EQ(km::BitwiseRightShift{}(int8_t{-100}, int8_t{-1}), -1);
  EXPECT_EQ(km::BitwiseLeftShift{}(int32_t{1}, int32_t{31}), INT32_MIN);
  // bool
  EXPECT_EQ(km::Add{}(true, true), true);
  EXPECT_EQ(km::Mul{}(true, false), false);
  EXPECT_EQ(km::AddAlpha<double>{2.0}(false, true), true);
  EXPECT_EQ(km::Pow{}(false, false), true);
  EXPECT_EQ(km::Maximum{}(false, true), true);
  EXPECT_EQ(km::Minimum{}(false, true), false);
  EXPECT_EQ(km::BitwiseXor{}(true, true), false);
  EXPECT_EQ(km::DivTrunc{}(true, true), true);
  EXPECT_EQ(km::DivFloor{}(true, false), false);
}

// ---------------------------------------------------------------------------------
// Binary float functors

template <class T>
std::vector<T> pair_grid() {
  if constexpr (kiln::is_reduced_float_v<T>) {
    std::vector<T> v;
    for (double d : float_grid(false)) v.push_back(T(d));
    for (uint32_t b = 0; b < 65536; b += 331) {
      // BFloat16 -> float is a plain shift and keeps signaling NaNs signaling; C math
      // may then differ from quiet NaN rules (pow(1, sNaN) is NaN), so skip them.
      const bool snan = std::is_same_v<T, BFloat16> && (b & 0x7f80) == 0x7f80 && (b & 0x7f) && !(b & 0x40);
      if (!snan) v.push_back(T::from_bits(static_cast<uint16_t>(b)));
    }
    return v;
  } else {
    std::vector<T> v;
    for (double d : float_grid(false)) v.push_back(T(d));
    for (double x = -7; x <= 7; x += 0.61) v.push_back(T(x));
    return v;
  }
}

template <class T, class F, class Ref>
void check_binary(const char* name, F f, Ref ref, double ulps) {
  using R = std::conditional_t<std::is_same_v<T, double>, long double, double>;
  int failures = 0;
  const auto g = pair_grid<T>();
  for (T a : g) {
    for (T b : g) {
      const T got = f(a, b);
      const long double want =
          static_cast<long double>(ref(static_cast<R>(to_ld(a)), static_cast<R>(to_ld(b))));
      auto r = close_to(got, want, ulps, 4 * min_normal_of<km::opmath_t<T>>());
      if (!r && ++failures <= 5)
        ADD_FAILURE() << name << "<" << sizeof(T) << ">(" << static_cast<double>(to_ld(a)) << ", "
                      << static_cast<double>(to_ld(b)) << "): " << r.message();
    }
  }
  EXPECT_EQ(failures, 0) << name;
}

template <class F, class Ref>
void check_binary_all_float(const char* name, F f, Ref ref, double ulps) {
  check_binary<float>(name, f, ref, ulps);
  check_binary<double>(name, f, ref, ulps);
  check_binary<Half>(name, f, ref, 1.0);
  check_binary<BFloat16>(name, f, ref, 1.0);
}

TEST(ScalarMath, BinaryFloat) {
  check_binary_all_float(
      "Add", km::Add{}, [](auto a, auto b) { return a + b; }, 0.5);
  check_binary_all_float(
      "Sub", km::Sub{}, [](auto a, auto b) { return a - b; }, 0.5);
  check_binary_all_float(
      "Mul", km::Mul{}, [](auto a, auto b) { return a * b; }, 0.5);
  check_binary_all_float(
      "Div", km::Div{}, [](auto a, auto b) { return a / b; }, 0.5);
  check_binary_all_float(
      "Fmod", km::Fmod{}, [](auto a, auto b) { return std::fmod(a, b); }, 0);
  check_binary_all_float(
      "Pow", km::Pow{}, [](auto a, auto b) { return std::pow(a, b); }, 2);
  check_binary_all_float(
      "Atan2", km::Atan2{}, [](auto a, auto b) { return std::atan2(a, b); }, 2);
  check_binary_all_float(
      "Hypot", km::Hypot{}, [](auto a, auto b) { return std::hypot(a, b); }, 1);
  check_binary_all_float(
      "CopySign", km::CopySign{}, [](auto a, auto b) { return std::copysign(a, b); }, 0);
  check_binary_all_float(
      "Xlogy", km::Xlogy{},
      [](auto a, auto b) {
        using R = decltype(a);
        return std::isnan(b) ? R(NAN) : a == 0 ? R(0) : a * std::log(b);
      },
      2);
  // Python floor division / modulo: the exact floor of the quotient, and the exact
  // remainder fmod moved into the divisor's sign. Zero results keep fmod's sign (PyTorch).
  check_binary_all_float(
      "DivFloor", km::DivFloor{},
      [](auto a, auto b) {
        using R = decltype(a);
        if (b == 0 || std::isnan(a) || std::isnan(b)) return a / b;
        if (std::isinf(a)) return R(NAN);  // Python: inf // 5 is nan
        if (std::isinf(b)) return (a == 0 || (a < 0) == (b < 0)) ? std::copysign(R(0), a / b) : R(-1);
        const R m = std::fmod(a, b);
        R q = std::round((a - m) / b);  // exact integer quotient of the truncation
        if (m != 0 && ((m < 0) != (b < 0))) q -= 1;
        return q == 0 ? std::copysign(R(0), a / b) : q;
      },
      2);  // PyTorch's algorithm, run in float, can miss by one when the quotient nears 2^24
  check_binary_all_float(
      "Remainder", km::Remainder{},
      [](auto a, auto b) {
        const auto m = std::fmod(a, b);
        return (m != 0 && ((m < 0) != (b < 0))) ? m + b : m;
      },
      1);
  check_binary_all_float(
      "Maximum", km::Maximum{},
      [](auto a, auto b) {
        using R = decltype(a);
        return std::isnan(a) || std::isnan(b) ? R(NAN) : a > b ? a : b;
      },
      0);
  check_binary_all_float(
      "Fmin", km::Fmin{}, [](auto a, auto b) { return std::fmin(a, b); }, 0);
  for_types<float, double, Half, BFloat16>([](auto tag) {
    using T = typename decltype(tag)::type;
    using C = km::opmath_t<T>;
    for (T a : pair_grid<T>()) {
      for (T b : pair_grid<T>()) {
        // trunc of the quotient as rounded in the compute type (PyTorch's div_trunc).
        ASSERT_TRUE(same(km::DivTrunc{}(a, b), T(std::trunc(C(a) / C(b)))));
        // a + alpha*b, unfused: the product is rounded in the compute type first.
        const long double prod = to_ld(C(C(-2.5) * C(b)));
        ASSERT_TRUE(close_to(km::AddAlpha<double>{-2.5}(a, b), to_ld(a) + prod,
                             std::is_same_v<T, C> ? 0.5 : 1.0, 4 * min_normal_of<C>()));
        const double x = static_cast<double>(to_ld(a)), y = static_cast<double>(to_ld(b));
        ASSERT_EQ(km::Eq{}(a, b), x == y);
        ASSERT_EQ(km::Ne{}(a, b), x != y);
        ASSERT_EQ(km::Lt{}(a, b), x < y);
        ASSERT_EQ(km::Le{}(a, b), x <= y);
        ASSERT_EQ(km::Gt{}(a, b), x > y);
        ASSERT_EQ(km::Ge{}(a, b), x >= y);
        ASSERT_EQ(km::LogicalAnd{}(a, b), x != 0 && y != 0);
        ASSERT_EQ(km::LogicalOr{}(a, b), x != 0 || y != 0);
        ASSERT_EQ(km::LogicalXor{}(a, b), (x != 0) != (y != 0));
        // max/min are commutative, including for signed zeros.
        ASSERT_TRUE(same(km::Maximum{}(a, b), km::Maximum{}(b, a)));
        ASSERT_TRUE(same(km::Minimum{}(a, b), km::Minimum{}(b, a)));
        ASSERT_TRUE(same(km::Fmax{}(a, b), km::Fmax{}(b, a)));
      }
    }
  });
}

TEST(ScalarMath, BinaryFloatTables) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  struct Case {
    double a, b, floor_q, rem;
  };
  // From CPython (a // b, a % b), except where PyTorch differs: division by zero gives
  // IEEE results instead of raising, and a zero remainder keeps the dividend's sign.
  const Case cases[] = {{1.0, 0.1, 9.0, 0.09999999999999995},
                        {-1.0, 0.1, -10.0, 5.551115123125783e-17},
                        {7.5, 2.0, 3.0, 1.5},
                        {-7.5, 2.0, -4.0, 0.5},
                        {7.5, -2.0, -4.0, -0.5},
                        {-7.5, -2.0, 3.0, -1.5},
                        {0.0, -1.0, -0.0, 0.0},   // CPython: -0.0 (sign of divisor)
                        {-0.0, 1.0, -0.0, -0.0},  // CPython: 0.0
                        {5.0, inf, 0.0, 5.0},
                        {-5.0, inf, -1.0, inf},
                        {5.0, -inf, -1.0, -inf},
                        {inf, 5.0, nan, nan},
                        {3.0, 0.3, 10.0, 1.1102230246251565e-16},
                        {-3.0, 0.3, -11.0, 0.2999999999999999},
                        {1e300, 1e-300, inf, 4.891554850853602e-301},
                        {1e30, 3.0, 3.333333333333333e+29, 1.0},
                        {1.0, 0.0, inf, nan},
                        {-1.0, 0.0, -inf, nan},
                        {0.0, 0.0, nan, nan}};
  for (const Case& c : cases) {
    EXPECT_TRUE(same(km::DivFloor{}(c.a, c.b), c.floor_q))
        << c.a << " // " << c.b << " = " << km::DivFloor{}(c.a, c.b);
    EXPECT_TRUE(same(km::Remainder{}(c.a, c.b), c.rem))
        << c.a << " % " << c.b << " = " << km::Remainder{}(c.a, c.b);
  }
  EXPECT_TRUE(same(km::DivTrunc{}(-1.0, 3.0), -0.0));
  // Maximum/minimum: NaN wins; -0 < +0 whichever the order.
  EXPECT_TRUE(std::isnan(km::Maximum{}(nan, 1.0)));
  EXPECT_TRUE(std::isnan(km::Minimum{}(1.0f, std::nanf(""))));
  EXPECT_TRUE(same(km::Maximum{}(-0.0, 0.0), 0.0));
  EXPECT_TRUE(same(km::Maximum{}(0.0, -0.0), 0.0));
  EXPECT_TRUE(same(km::Minimum{}(0.0, -0.0), -0.0));
  EXPECT_TRUE(same(km::Minimum{}(-0.0, 0.0), -0.0));
  EXPECT_EQ(km::Fmax{}(nan, 1.0), 1.0);
  EXPECT_EQ(km::Fmin{}(2.0, nan), 2.0);
  EXPECT_TRUE(std::isnan(km::Fmax{}(nan, nan)));
  EXPECT_EQ(static_cast<float>(km::Fmax{}(std::numeric_limits<Half>::quiet_NaN(), Half(3.0f))), 3.0f);
  EXPECT_TRUE(same(km::Fmin{}(Half(0.0f), Half(-0.0f)), Half(-0.0f)));
  // Pow specials (C semantics).
  EXPECT_EQ(km::Pow{}(nan, 0.0), 1.0);
  EXPECT_EQ(km::Pow{}(1.0f, std::nanf("")), 1.0f);
  EXPECT_TRUE(std::isnan(km::Pow{}(-8.0, 1.0 / 3)));
  EXPECT_EQ(km::Pow{}(-inf, 0.5), inf);
  EXPECT_EQ(km::Pow{}(0.0, -1.0), inf);
  // Xlogy
  EXPECT_EQ(km::Xlogy{}(0.0, 0.0), 0.0);
  EXPECT_EQ(km::Xlogy{}(0.0, inf), 0.0);
  EXPECT_TRUE(std::isnan(km::Xlogy{}(0.0, nan)));
  EXPECT_EQ(km::Xlogy{}(2.0, 0.0), -inf);
  // Hypot with inf and NaN is inf.
  EXPECT_EQ(km::Hypot{}(inf, nan), inf);
}

// ---------------------------------------------------------------------------------
// Ternary

TEST(ScalarMath, Lerp) {
  for_types<float, double, Half, BFloat16>([](auto tag) {
    using T = typename decltype(tag)::type;
    using R = std::conditional_t<std::is_same_v<T, double>, long double, double>;
    const double ws[] = {0.0, 0.1, 0.25, 0.4999, 0.5, 0.75, 1.0, -0.5, -0.4, 1.5, 2.0, 0.3333};
    for (double a : {0.0, 1.0, -3.5, 100.0, 1e-5, 7.25}) {
      for (double b : {0.0, 2.0, -1.0, 1e4, 7.25}) {
        for (double w : ws) {
          const T ta(a), tb(b), tw(w);
          const R ra = static_cast<R>(to_ld(ta)), rb = static_cast<R>(to_ld(tb)),
                  rw = static_cast<R>(to_ld(tw));
          const T got = km::Lerp{}(ta, tb, tw);
          // Two roundings in the compute type, then the conversion to T.
          EXPECT_TRUE(close_to(got, ra + rw * (rb - ra), 3,
                               4 * eps_of<km::opmath_t<T>>() * (std::fabs(ra) + std::fabs(rb))))
              << a << " " << b << " " << w;
        }
        EXPECT_TRUE(same(km::Lerp{}(T(a), T(b), T(0.0)), T(a)));
        EXPECT_TRUE(same(km::Lerp{}(T(a), T(b), T(1.0)), T(b)));  // exact at w = 1
      }
    }
  });
  EXPECT_TRUE(std::isnan(km::Lerp{}(1.0, 2.0, std::nan(""))));
  EXPECT_TRUE(std::isnan(km::Lerp{}(std::nanf(""), 2.0f, 0.0f)));
}

TEST(ScalarMath, WhereAndClamp) {
  EXPECT_EQ(km::Where{}(true, 1.0f, 2.0f), 1.0f);
  EXPECT_EQ(km::Where{}(false, int8_t{1}, int8_t{2}), 2);
  EXPECT_EQ(km::Where{}(false, Half(1.0f), Half(2.0f)).x, Half(2.0f).x);
  const double nan = std::nan("");
  struct Case {
    double x, lo, hi, want;
  };
  const Case cases[] = {{5, 0, 3, 3},       {-1, 0, 3, 0},
                        {2, 0, 3, 2},       {2, 3, 1, 1},  // lo > hi -> hi
                        {nan, 0, 1, nan},   {0.5, nan, 1, nan},
                        {0.5, 0, nan, nan}, {-std::numeric_limits<double>::infinity(), -1, 1, -1}};
  for (const Case& c : cases) {
    EXPECT_TRUE(same(km::Clamp{}(c.x, c.lo, c.hi), c.want)) << c.x << " " << c.lo << " " << c.hi;
    EXPECT_TRUE(same(km::Clamp{}(static_cast<float>(c.x), static_cast<float>(c.lo), static_cast<float>(c.hi)),
                     static_cast<float>(c.want)));
    EXPECT_TRUE(same(km::Clamp{}(BFloat16(c.x), BFloat16(c.lo), BFloat16(c.hi)), BFloat16(c.want)));
  }
  for_types<int8_t, int16_t, int32_t, int64_t, uint8_t>([](auto tag) {
    using T = typename decltype(tag)::type;
    for (T x : int_grid<T>()) EXPECT_EQ(km::Clamp{}(x, T(2), T(100)), x < 2 ? T(2) : x > 100 ? T(100) : x);
  });
  EXPECT_EQ(km::Clamp{}(true, false, false), false);
}

// ---------------------------------------------------------------------------------
// Gradient helpers: against central differences of long double references.

template <class F>
long double deriv(F f, long double x) {
  const long double h = 1e-6L * std::max(1.0L, std::fabs(x));
  return (f(x + h) - f(x - h)) / (2 * h);
}

TEST(ScalarMath, GradientHelpers) {
  auto sigmoid = [](long double x) { return 1 / (1 + std::exp(-x)); };
  auto gelu = [](long double x) { return x / 2 * std::erfc(-x / std::sqrt(2.0L)); };
  auto gelu_tanh = [](long double x) {
    const long double k = std::sqrt(2 / 3.14159265358979323846264338327950288L);
    return x / 2 * (1 + std::tanh(k * (x + 0.044715L * x * x * x)));
  };
  auto silu = [&](long double x) { return x * sigmoid(x); };
  auto tanh_ = [](long double x) { return std::tanh(x); };
  const double g = 0.75;
  for (double x = -8; x <= 8; x += 0.37) {
    const double y_sig = km::Sigmoid{}(x), y_tanh = km::Tanh{}(x);
    const double tol = 1e-8;
    EXPECT_NEAR(km::SigmoidBackward{}(g, y_sig), g * deriv(sigmoid, x), tol) << x;
    EXPECT_NEAR(km::TanhBackward{}(g, y_tanh), g * deriv(tanh_, x), tol) << x;
    EXPECT_NEAR(km::GeluBackward{}(g, x), g * deriv(gelu, x), tol) << x;
    EXPECT_NEAR(km::GeluTanhBackward{}(g, x), g * deriv(gelu_tanh, x), tol) << x;
    EXPECT_NEAR(km::SiluBackward{}(g, x), g * deriv(silu, x), tol) << x;
    // float and Half agree with double to their precision
    EXPECT_NEAR(km::GeluBackward{}(0.75f, static_cast<float>(x)), km::GeluBackward{}(g, x), 1e-5);
    EXPECT_NEAR(km::SiluBackward{}(0.75f, static_cast<float>(x)), km::SiluBackward{}(g, x), 1e-5);
    EXPECT_NEAR(km::GeluTanhBackward{}(0.75f, static_cast<float>(x)), km::GeluTanhBackward{}(g, x), 1e-5);
    EXPECT_NEAR(static_cast<float>(km::GeluBackward{}(Half(0.75f), Half(x))),
                km::GeluBackward{}(g, static_cast<double>(static_cast<float>(Half(x)))), 4e-3);
  }
  for (double x = -0.995; x < 0.999; x += 0.0175) {
    const long double d = deriv([](long double v) { return ref_erfinv(v); }, x);
    EXPECT_NEAR(km::ErfinvDerivative{}(x), d, 1e-7 * d) << x;
    EXPECT_NEAR(km::ErfinvDerivative{}(static_cast<float>(x)), d, 1e-5 * d) << x;
  }
  EXPECT_EQ(km::ErfinvDerivative{}(1.0), std::numeric_limits<double>::infinity());
}

TEST(ScalarMath, TypeTraits) {
  static_assert(std::is_same_v<km::acc_t<double>, double>);
  static_assert(std::is_same_v<km::acc_t<float>, float>);
  static_assert(std::is_same_v<km::acc_t<Half>, float>);
  static_assert(std::is_same_v<km::acc_t<BFloat16>, float>);
  static_assert(std::is_same_v<km::acc_t<int8_t>, int64_t>);
  static_assert(std::is_same_v<km::acc_t<uint8_t>, int64_t>);
  static_assert(std::is_same_v<km::acc_t<bool>, int64_t>);
  static_assert(std::is_same_v<km::opmath_t<Half>, float>);
  static_assert(std::is_same_v<km::opmath_t<int16_t>, int16_t>);
  static_assert(std::is_same_v<decltype(km::Eq{}(Half(1.0f), Half(1.0f))), bool>);
  static_assert(std::is_same_v<decltype(km::IsNan{}(1.0)), bool>);
  static_assert(std::is_same_v<decltype(km::Exp{}(BFloat16(1.0f))), BFloat16>);
}

// ---------------------------------------------------------------------------------
// Philox

TEST(Philox, KnownAnswerVectors) {
  // Random123 kat_vectors for philox4x32_10.
  struct Kat {
    uint32_t ctr[4], key[2], out[4];
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    const kiln::uint4x32 r =
        kiln::philox4x32_10({k.ctr[0], k.ctr[1], k.ctr[2], k.ctr[3]}, k.key[0], k.key[1]);
    EXPECT_EQ(r.x, k.out[0]);
    EXPECT_EQ(r.y, k.out[1]);
    EXPECT_EQ(r.z, k.out[2]);
    EXPECT_EQ(r.w, k.out[3]);
    // The 64-bit API packs words little-endian.
    const uint64_t key = static_cast<uint64_t>(k.key[1]) << 32 | k.key[0];
    const uint64_t lo = static_cast<uint64_t>(k.ctr[1]) << 32 | k.ctr[0];
    const uint64_t hi = static_cast<uint64_t>(k.ctr[3]) << 32 | k.ctr[2];
    const kiln::uint4x32 s = kiln::philox4x32(key, hi, lo);
    EXPECT_EQ(s.x, k.out[0]);
    EXPECT_EQ(s.w, k.out[3]);
  }
}

TEST(Philox, StreamLayout) {
  const uint64_t seed = 0x123456789abcdefull, off = 1000;
  for (uint64_t i = 0; i < 64; ++i) {
    const kiln::uint4x32 b = kiln::philox4x32(seed, 0, off + i / 4);
    EXPECT_EQ(kiln::philox_u32(seed, off, i), b.lane(static_cast<uint32_t>(i % 4)));
    // Shifting the offset by one block is the same as skipping one block of elements.
    EXPECT_EQ(kiln::philox_u32(seed, off, i + 4), kiln::philox_u32(seed, off + 1, i));
    EXPECT_EQ(kiln::philox_uniform<double>(seed, off, i + 2), kiln::philox_uniform<double>(seed, off + 1, i));
    EXPECT_EQ(kiln::philox_normal<float>(seed, off, i + 4), kiln::philox_normal<float>(seed, off + 1, i));
    EXPECT_EQ(kiln::philox_normal<double>(seed, off, i + 2), kiln::philox_normal<double>(seed, off + 1, i));
  }
  EXPECT_EQ(kiln::philox_blocks<float>(0), 0u);
  EXPECT_EQ(kiln::philox_blocks<float>(5), 2u);
  EXPECT_EQ(kiln::philox_blocks<double>(5), 3u);
  EXPECT_EQ(kiln::philox_blocks<Half>(8), 2u);
  // Different seeds give different streams.
  EXPECT_NE(kiln::philox_u32(1, 0, 0), kiln::philox_u32(2, 0, 0));
}

TEST(Philox, UniformRange) {
  EXPECT_LT(kiln::uniform_float(0xffffffffu), 1.0f);
  EXPECT_EQ(kiln::uniform_float(0), 0.0f);
  EXPECT_EQ(kiln::uniform_float(0xffffffffu), 1.0f - std::ldexp(1.0f, -24));
  EXPECT_LT(kiln::uniform_double(0xffffffffu, 0xffffffffu), 1.0);
  EXPECT_EQ(kiln::uniform_double(0xffffffffu, 0xffffffffu), 1.0 - std::ldexp(1.0, -53));
  EXPECT_EQ(static_cast<float>(kiln::uniform_from_bits<Half>(0xffffffffu)), 1.0f - std::ldexp(1.0f, -11));
  EXPECT_EQ(static_cast<float>(kiln::uniform_from_bits<BFloat16>(0xffffffffu)), 1.0f - std::ldexp(1.0f, -8));
  double sum = 0, sum_d = 0;
  const uint64_t n = 1000000;
  for (uint64_t i = 0; i < n; ++i) {
    const float u = kiln::philox_uniform<float>(7, 0, i);
    const double d = kiln::philox_uniform<double>(7, 0, i);
    const float h = kiln::philox_uniform<Half>(7, 0, i);
    ASSERT_TRUE(u >= 0.0f && u < 1.0f);
    ASSERT_TRUE(d >= 0.0 && d < 1.0);
    ASSERT_TRUE(h >= 0.0f && h < 1.0f);
    sum += u;
    sum_d += d;
  }
  // Mean of U(0,1): sd of the mean is 1/sqrt(12 n) ~ 2.9e-4.
  EXPECT_NEAR(sum / n, 0.5, 1.5e-3);
  EXPECT_NEAR(sum_d / n, 0.5, 1.5e-3);
}

TEST(Philox, NormalMoments) {
  const uint64_t n = 1000000;
  for_types<float, double>([&](auto tag) {
    using T = typename decltype(tag)::type;
    double s1 = 0, s2 = 0, s3 = 0, s4 = 0;
    for (uint64_t i = 0; i < n; ++i) {
      const double z = kiln::philox_normal<T>(2024, 17, i);
      ASSERT_TRUE(std::isfinite(z));
      s1 += z;
      s2 += z * z;
      s3 += z * z * z;
      s4 += z * z * z * z;
    }
    const double mean = s1 / n, var = s2 / n - mean * mean;
    EXPECT_NEAR(mean, 0.0, 5e-3);  // sd 1e-3
    EXPECT_NEAR(var, 1.0, 7e-3);   // sd sqrt(2/n) ~ 1.4e-3
    EXPECT_NEAR(s3 / n, 0.0, 1.2e-2);
    EXPECT_NEAR(s4 / n, 3.0, 5e-2);  // sd sqrt(96/n) ~ 1e-2
  });
  // Cos and sin halves of a pair are uncorrelated.
  double c = 0;
  for (uint64_t i = 0; i < n; i += 2)
    c += kiln::philox_normal<float>(5, 0, i) * static_cast<double>(kiln::philox_normal<float>(5, 0, i + 1));
  EXPECT_NEAR(c / (n / 2), 0.0, 1e-2);
  EXPECT_TRUE(std::isfinite(static_cast<float>(kiln::philox_normal<Half>(5, 0, 3))));
  // The worst case u1 = 0 gives r = sqrt(-2 log 1) = 0, not inf.
  EXPECT_EQ(kiln::box_muller(0.0f, 0.25f, false), 0.0f);
  EXPECT_TRUE(std::isfinite(kiln::box_muller(1.0f - std::ldexp(1.0f, -24), 0.0f, false)));
}

}  // namespace
