// Scalar math, written once as functors and shared by eager CPU kernels, CUDA kernels
// and generated (C++/OpenMP, NVRTC) code, so that eager and compiled numerics agree by
// construction. Semantics follow PyTorch's CPU kernels op by op; where PyTorch is
// itself inconsistent (scalar vs vectorized paths) the choice is stated at the functor.
//
// Conventions:
//  - T is float, double, Half, BFloat16, int64_t, int32_t, int16_t, int8_t, uint8_t or
//    bool. Half/BFloat16 compute in float (opmath_t<T>) and round once at the end.
//  - Ops that PyTorch defines only for floating types static_assert on that: integer
//    inputs are promoted by the caller (type promotion lives in the meta functions).
//  - Integer arithmetic wraps (two's complement), like PyTorch, without C++ signed
//    overflow UB. Integer division/modulo by zero returns 0: the caller raises the error.
//  - Math goes through kiln::math::fn, thin wrappers over the C library names
//    (expf/exp, ...) that exist on host, in CUDA device code and in NVRTC.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/half.h"

namespace kiln::math {

// ---------------------------------------------------------------------------------
// Type traits

using ::kiln::is_reduced_float_v;  // Half or BFloat16

template <class T>
inline constexpr bool is_floating_v = std::is_floating_point_v<T> || is_reduced_float_v<T>;

template <class T>
inline constexpr bool is_integer_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// Type a single op computes in: float for Half/BFloat16, else T itself.
template <class T>
using opmath_t = std::conditional_t<is_reduced_float_v<T>, float, T>;

// Type to accumulate sums/products in: double for double, float for float/Half/BFloat16,
// int64_t for integers and bool. (PyTorch's CPU accumulates float in double; kiln uses
// float on every device so CPU and CUDA reductions agree.)
template <class T>
struct AccumulateType {
  using type = std::conditional_t<
      std::is_same_v<T, double>, double,
      std::conditional_t<std::is_same_v<T, float> || is_reduced_float_v<T>, float, int64_t>>;
};
template <class T>
using acc_t = typename AccumulateType<T>::type;

// ---------------------------------------------------------------------------------
// fn: float/double overloads of the C math library, callable on host and device.

namespace fn {

#define KILN_MATH_FN1(name)                                   \
  KILN_HD inline float name(float x) { return ::name##f(x); } \
  KILN_HD inline double name(double x) { return ::name(x); }
#define KILN_MATH_FN2(name)                                               \
  KILN_HD inline float name(float x, float y) { return ::name##f(x, y); } \
  KILN_HD inline double name(double x, double y) { return ::name(x, y); }

KILN_MATH_FN1(exp)
KILN_MATH_FN1(exp2)
KILN_MATH_FN1(expm1)
KILN_MATH_FN1(log)
KILN_MATH_FN1(log2)
KILN_MATH_FN1(log10)
KILN_MATH_FN1(log1p)
KILN_MATH_FN1(sqrt)
KILN_MATH_FN1(sin)
KILN_MATH_FN1(cos)
KILN_MATH_FN1(tan)
KILN_MATH_FN1(tanh)
KILN_MATH_FN1(erf)
KILN_MATH_FN1(erfc)
KILN_MATH_FN1(lgamma)
KILN_MATH_FN1(asin)
KILN_MATH_FN1(acos)
KILN_MATH_FN1(atan)
KILN_MATH_FN1(sinh)
KILN_MATH_FN1(cosh)
KILN_MATH_FN1(asinh)
KILN_MATH_FN1(acosh)
KILN_MATH_FN1(atanh)
KILN_MATH_FN1(floor)
KILN_MATH_FN1(ceil)
KILN_MATH_FN1(trunc)
KILN_MATH_FN1(nearbyint)
KILN_MATH_FN1(fabs)
KILN_MATH_FN2(fmod)
KILN_MATH_FN2(pow)
KILN_MATH_FN2(atan2)
KILN_MATH_FN2(hypot)
KILN_MATH_FN2(copysign)
KILN_MATH_FN2(nextafter)

#undef KILN_MATH_FN1
#undef KILN_MATH_FN2

template <class C>
KILN_HD inline bool isnan(C x) {
  return x != x;
}
KILN_HD inline bool signbit(float x) { return (::kiln::detail::f32_bits(x) >> 31) != 0; }
KILN_HD inline bool signbit(double x) { return (::kiln::detail::f64_bits(x) >> 63) != 0; }

// Constants built from bits: std::numeric_limits' functions are host-only constexpr
// and would need --expt-relaxed-constexpr in device code.
template <class C>
KILN_HD inline C inf() {
  if constexpr (std::is_same_v<C, float>)
    return ::kiln::detail::f32_from_bits(0x7f800000u);
  else
    return ::kiln::detail::f64_from_bits(0x7ff0000000000000ull);
}
template <class C>
KILN_HD inline C nan() {
  if constexpr (std::is_same_v<C, float>)
    return ::kiln::detail::f32_from_bits(0x7fc00000u);
  else
    return ::kiln::detail::f64_from_bits(0x7ff8000000000000ull);
}
template <class C>
KILN_HD inline bool isinf(C x) {
  return fabs(x) == inf<C>();
}

}  // namespace fn

// ---------------------------------------------------------------------------------
// Helpers

namespace detail {

// Wrapping integer arithmetic: compute in an unsigned type at least 32 bits wide
// (modular, no UB) and convert back (modular since C++20).
template <class T>
using wide_unsigned_t = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;

template <class T>
KILN_HD inline T wrap_add(T a, T b) {
  using W = wide_unsigned_t<T>;
  return static_cast<T>(static_cast<W>(a) + static_cast<W>(b));
}
template <class T>
KILN_HD inline T wrap_sub(T a, T b) {
  using W = wide_unsigned_t<T>;
  return static_cast<T>(static_cast<W>(a) - static_cast<W>(b));
}
template <class T>
KILN_HD inline T wrap_mul(T a, T b) {
  using W = wide_unsigned_t<T>;
  return static_cast<T>(static_cast<W>(a) * static_cast<W>(b));
}
template <class T>
KILN_HD inline T wrap_neg(T a) {
  using W = wide_unsigned_t<T>;
  return static_cast<T>(W(0) - static_cast<W>(a));
}

template <class T>
KILN_HD inline bool is_negative(T x) {
  if constexpr (std::is_signed_v<T>)
    return x < T(0);
  else
    return false;
}

template <class T>
KILN_HD inline T quiet_nan() {
  return T(fn::nan<opmath_t<T>>());
}

// Truth value of a number: nonzero (NaN is true, -0.0 is false).
template <class T>
KILN_HD inline bool truthy(T x) {
  if constexpr (std::is_same_v<T, bool>)
    return x;
  else
    return opmath_t<T>(x) != opmath_t<T>(0);
}

inline constexpr double kSqrtPiOver2 = 0.886226925452758013649;   // sqrt(pi)/2
inline constexpr double kTwoOverSqrtPi = 1.12837916709551257390;  // 2/sqrt(pi)
inline constexpr double kSqrt1_2 = 0.707106781186547524401;       // 1/sqrt(2)
inline constexpr double kSqrt2OverPi = 0.797884560802865355880;   // sqrt(2/pi)
inline constexpr double kInvSqrt2Pi = 0.398942280401432677940;    // 1/sqrt(2*pi)
inline constexpr double kGeluKappa = 0.044715;

// erfinv in C (float or double). An initial guess accurate to ~3e-4 (Maclaurin series
// on |x| <= 0.5, Winitzki's closed form above) is refined by two Halley steps on
// f(y) = erf(y) - |x|, whose cubic convergence takes it to full precision.
template <class C>
KILN_HD inline C erfinv(C x) {
  const C ax = fn::fabs(x);
  if (!(ax <= C(1))) return fn::nan<C>();  // NaN or |x| > 1
  if (ax == C(1)) return fn::copysign(fn::inf<C>(), x);
  C y;
  if (ax <= C(0.5)) {
    // erfinv(z) = sqrt(pi)/2 (z + pi/12 z^3 + 7pi^2/480 z^5 + 127pi^3/40320 z^7 + ...)
    const C z2 = ax * ax;
    y = C(kSqrtPiOver2) * ax *
        (C(1) +
         z2 * (C(0.2617993877991494365) + z2 * (C(0.1439317308492198132) + z2 * C(0.0976636195039205645))));
  } else {
    // Winitzki (2008), a = 0.147. (1 - ax) is exact for ax >= 0.5 (Sterbenz).
    const C l = fn::log((C(1) - ax) * (C(1) + ax));
    const C t = C(4.3307467507998733242) + C(0.5) * l;  // 2/(pi a) + l/2
    y = fn::sqrt(fn::sqrt(t * t - l / C(0.147)) - t);
  }
  for (int i = 0; i < 2; ++i) {
    // Halley: y -= r/f' / (1 + y r/f'), using f''/f' = -2y. In the tail the residual
    // is formed as (1-|x|) - erfc(y): erf(y) - |x| would cancel catastrophically
    // near 1 and cap the accuracy of large results.
    const C r = ax <= C(0.5) ? fn::erf(y) - ax : (C(1) - ax) - fn::erfc(y);
    const C step = r / (C(kTwoOverSqrtPi) * fn::exp(-y * y));
    y -= step / (C(1) + y * step);
  }
  return fn::copysign(y, x);
}

// ---- the gamma-function family (Note [Gamma family]) ----
// Note [Gamma family]
// digamma follows torch's calc_digamma op for op (same results); trigamma and polygamma(n >= 2)
// are torch's formulas with these differences, for accuracy: trigamma recurses up to x >= 10
// (torch: 6 steps) and reflects only negative x, with sin of the argument reduced to [-1/2, 1/2],
// so it is +inf at every pole (torch: large finite values at negative integers); zeta and n!
// compute in double for every input type (torch's CPU does the same for float).
inline constexpr double kPi = 3.14159265358979323846;

// psi(x) for x > 0 (or NaN, +inf): the recurrence psi(x) = psi(x + 1) - 1/x up to x >= 10, then
// log x - 1/(2x) - sum B_2k / (2k x^2k) (Cephes' coefficients, as torch).
template <class C>
KILN_HD inline C digamma_pos(C x) {
  C result = C(0);
  while (x < C(10)) {
    result -= C(1) / x;
    x += C(1);
  }
  if (x == C(10)) return result + C(2.25175258906672110764);  // psi(10)
  C y = C(0);
  if (x < C(1.0e17)) {
    const C z = C(1) / (x * x);
    // Cephes' coefficients, highest power first (torch's polevl(z, A, 6)).
    constexpr double A[] = {8.33333333333333333333E-2,  -2.10927960927960927961E-2, 7.57575757575757575758E-3,
                            -4.16666666666666666667E-3, 3.96825396825396825397E-3,  -8.33333333333333333333E-3,
                            8.33333333333333333333E-2};
    C p = C(A[0]);
    for (int i = 1; i < 7; ++i) p = p * z + C(A[i]);
    y = z * p;
  }
  return result + fn::log(x) - C(0.5) / x - y;
}

// psi(x): -inf at +0 and +inf at -0 (as torch), NaN at negative integers and -inf; negative x
// reflect, psi(x) = psi(1 - x) - pi / tan(pi frac(x)).
template <class C>
KILN_HD inline C digamma(C x) {
  if (x == C(0)) return fn::copysign(fn::inf<C>(), -x);
  if (x < C(0)) {
    if (x == fn::trunc(x)) return fn::nan<C>();
    return digamma_pos(C(1) - x) - C(kPi) / fn::tan(C(kPi) * (x - fn::trunc(x)));
  }
  return digamma_pos(x);
}

// psi'(x): +inf at 0 and the negative integers, NaN at -inf; psi'(x) = pi^2 / sin^2(pi x) -
// psi'(1 - x) for x < 0, then psi'(x) = psi'(x + 1) + 1/x^2 up to x >= 10 and the asymptotic
// series 1/x + 1/(2x^2) + sum B_2k / x^(2k+1) (to B_14: below 1e-16 relative at x = 10).
template <class C>
KILN_HD inline C trigamma(C x) {
  C reflected = C(0);
  bool reflect = false;
  if (x <= C(0)) {
    if (x == fn::trunc(x)) return fn::isinf(x) ? fn::nan<C>() : fn::inf<C>();
    const C s = fn::sin(C(kPi) * (x - fn::nearbyint(x)));
    reflected = C(kPi) * C(kPi) / (s * s);
    reflect = true;
    x = C(1) - x;
  }
  C acc = C(0);
  while (x < C(10)) {
    acc += C(1) / (x * x);
    x += C(1);
  }
  const C ix = C(1) / x, ixx = ix * ix;
  acc += ix + ixx * (C(0.5) + ix * (C(1.0 / 6) +
                                    ixx * (C(-1.0 / 30) +
                                           ixx * (C(1.0 / 42) +
                                                  ixx * (C(-1.0 / 30) +
                                                         ixx * (C(5.0 / 66) +
                                                                ixx * (C(-691.0 / 2730) + ixx * C(7.0 / 6))))))));
  return reflect ? reflected - acc : acc;
}

// Hurwitz zeta(s, q) = sum_k (k + q)^-s in double, Cephes' zeta as torch ports it: direct sum
// then the Euler-Maclaurin tail. +inf at s == 1 and at non-positive integer q; NaN for s < 1.
KILN_HD inline double hurwitz_zeta(double s, double q) {
  constexpr double kMachEp = 1.11022302462515654042E-16;
  // (2k)! / B_2k, k = 1..12
  constexpr double A[] = {12.0,
                          -720.0,
                          30240.0,
                          -1209600.0,
                          47900160.0,
                          -1.8924375803183791606e9,
                          7.47242496e10,
                          -2.950130727918164224e12,
                          1.1646782814350067249e14,
                          -4.5979787224074726105e15,
                          1.8152105401943546773e17,
                          -7.1661652561756670113e18};
  if (s == 1.0) return fn::inf<double>();
  if (s < 1.0) return fn::nan<double>();
  if (q <= 0.0) {
    if (q == fn::floor(q)) return fn::inf<double>();
    if (s != fn::floor(s)) return fn::nan<double>();
  }
  double sum = fn::pow(q, -s), a = q, b = 0.0;
  int i = 0;
  while (i < 9 || a <= 9.0) {
    i += 1;
    a += 1.0;
    b = fn::pow(a, -s);
    sum += b;
    if (-kMachEp * sum < b && b < kMachEp * sum) return sum;
  }
  const double w = a;
  sum += b * w / (s - 1.0);
  sum -= 0.5 * b;
  double fac = 1.0, k = 0.0;
  for (int j = 0; j < 12; ++j) {
    fac *= s + k;
    b /= w;
    const double t = fac * b / A[j];
    sum += t;
    if (fn::fabs(t / sum) < kMachEp) return sum;
    k += 1.0;
    fac *= s + k;
    b /= w;
  }
  return sum;
}

// psi^(n)(x), n >= 0 (the caller rejects n < 0): (-1)^(n+1) n! zeta(n + 1, x) for n >= 2.
template <class C>
KILN_HD inline C polygamma(int64_t n, C x) {
  if (n == 0) return digamma(x);
  if (n == 1) return trigamma(x);
  double fact = 1.0;
  for (int64_t k = 2; k <= n && fact < fn::inf<double>(); ++k) fact *= static_cast<double>(k);
  return C((n % 2 ? 1.0 : -1.0) * fact * hurwitz_zeta(static_cast<double>(n + 1), static_cast<double>(x)));
}

}  // namespace detail

// exp for float without a libm call, so that the dense elementwise loop vectorizes
// (g++ does not vectorize ::expf without -ffast-math). Every step is float or
// 32-bit integer arithmetic and bit selects, no branches:
//  - n = round(x / ln2) with the 1.5*2^23 trick (t's low mantissa bits hold n);
//  - r = x - n*ln2 with ln2 split Cody-Waite style into a 16-bit head (n*head is
//    exact for |n| < 2^8) and a tail, so |r| <= ~ln2/2;
//  - e^r = 1 + (r + r^2 * P(r)), P a degree-5 minimax fit (SLEEF's expf coefficients);
//  - 2^n applied as two exact power-of-two factors 2^(n>>1) * 2^(n-(n>>1)) so that
//    results near overflow and in the subnormal range are rounded once, at the end.
// x is clamped to [-110, 110] first (enough to reach 0 / +inf), which also gives
// -inf -> 0 and +inf -> +inf; NaN passes through the clamp and the polynomial.
// Max error 1 ulp over the float range (tests/unit/test_scalar_math.cpp).
KILN_HD inline float exp_float(float x) {
  // Clamp |x| to 110 (copysign(110, x) beyond) as a bit blend on one mask, not as
  // ternaries: g++ threads a second ternary through the first (a constant path) and
  // the loop then has control flow and does not vectorize.
  const uint32_t xb = ::kiln::detail::f32_bits(x);
  const uint32_t big = 0u - static_cast<uint32_t>(::kiln::detail::f32_from_bits(xb & 0x7fffffffu) > 110.0f);
  const float xc =
      ::kiln::detail::f32_from_bits((xb & ~big) | (((xb & 0x80000000u) | ::kiln::detail::f32_bits(110.0f)) & big));
  constexpr float kLog2e = 0x1.715476p+0f;
  constexpr float kShift = 0x1.8p+23f;  // 1.5 * 2^23
  const float t = xc * kLog2e + kShift;
  const float nf = t - kShift;
  const int32_t n = static_cast<int32_t>(::kiln::detail::f32_bits(t) - ::kiln::detail::f32_bits(kShift));
  constexpr float kLn2Hi = 0x1.62e4p-1f;      // 0.693145751953125, 15 significant bits
  constexpr float kLn2Lo = 0x1.7f7d1cp-20f;  // ln2 - kLn2Hi, rounded
  float r = xc - nf * kLn2Hi;
  r = r - nf * kLn2Lo;
  float p = 1.98527617612853646278381e-4f;
  p = p * r + 1.39304355252534151077271e-3f;
  p = p * r + 8.33336077630519866943359e-3f;
  p = p * r + 4.16664853692054748535156e-2f;
  p = p * r + 1.66666671633720397949219e-1f;
  p = p * r + 0.5f;
  const float er = 1.0f + (r + (r * r) * p);
  const int32_t n1 = n >> 1;  // arithmetic shift (C++20)
  const int32_t n2 = n - n1;
  const float s1 = ::kiln::detail::f32_from_bits(static_cast<uint32_t>(n1 + 127) << 23);
  const float s2 = ::kiln::detail::f32_from_bits(static_cast<uint32_t>(n2 + 127) << 23);
  return (er * s1) * s2;
}

namespace detail {
// Bit-blend helpers for the branch-free float functions below: a lane mask from a
// comparison and a select on it. Written as integer and/or, not as ternaries, so that
// g++ keeps a loop calling them free of control flow and vectorizes it (see exp_float).
KILN_HD inline uint32_t lane_mask(bool c) { return 0u - static_cast<uint32_t>(c); }
KILN_HD inline float lane_select(uint32_t m, float a, float b) {
  return ::kiln::detail::f32_from_bits((::kiln::detail::f32_bits(a) & m) | (::kiln::detail::f32_bits(b) & ~m));
}
KILN_HD inline float abs_bits(float x) {
  return ::kiln::detail::f32_from_bits(::kiln::detail::f32_bits(x) & 0x7fffffffu);
}
// |y| with the sign of x (y >= 0).
KILN_HD inline float with_sign_of(float y, float x) {
  return ::kiln::detail::f32_from_bits(::kiln::detail::f32_bits(y) | (::kiln::detail::f32_bits(x) & 0x80000000u));
}
}  // namespace detail

// log for float, branch-free like exp_float (Cephes' logf method):
//  - subnormal x is scaled by 2^23 first (23 taken off the exponent), so the bit split works;
//  - x = 2^e * m with m in [sqrt(1/2), sqrt(2)): offsetting the bits by those of sqrt(1/2)
//    before splitting off the exponent field puts the mantissa in that range, and f = m - 1
//    is exact (Sterbenz);
//  - log(1 + f) = f - f^2/2 + f^3 P(f), P Cephes' degree-8 minimax polynomial;
//  - e * ln2 added with ln2 split into 0.693359375 (few bits, e * it exact) and a tail.
// x < 0 or NaN gives NaN, +-0 gives -inf, +inf gives +inf, selected at the end.
// Max error measured 0.81 ulp over the float range (tests/unit/test_scalar_math.cpp).
KILN_HD inline float log_float(float x) {
  using detail::lane_mask;
  using detail::lane_select;
  const uint32_t sub = lane_mask(x < 0x1p-126f);
  const float xs = lane_select(sub, x * 0x1p23f, x);
  constexpr uint32_t kSqrtHalfBits = 0x3f3504f3u;  // bits of sqrt(1/2)
  const uint32_t u = ::kiln::detail::f32_bits(xs) - kSqrtHalfBits;
  const int32_t e = (static_cast<int32_t>(u) >> 23) - static_cast<int32_t>(sub & 23u);
  const float f = ::kiln::detail::f32_from_bits((u & 0x007fffffu) + kSqrtHalfBits) - 1.0f;
  const float z = f * f;
  float p = 7.0376836292e-2f;
  p = p * f - 1.1514610310e-1f;
  p = p * f + 1.1676998740e-1f;
  p = p * f - 1.2420140846e-1f;
  p = p * f + 1.4249322787e-1f;
  p = p * f - 1.6668057665e-1f;
  p = p * f + 2.0000714765e-1f;
  p = p * f - 2.4999993993e-1f;
  p = p * f + 3.3333331174e-1f;
  const float ef = static_cast<float>(e);
  float y = f * (z * p);
  y = y + ef * -2.12194440e-4f;  // ln2 - 0.693359375
  y = y - 0.5f * z;
  float r = f + y;
  r = r + ef * 0.693359375f;
  const float inf = ::kiln::detail::f32_from_bits(0x7f800000u);
  r = lane_select(lane_mask(x == inf), inf, r);
  r = lane_select(lane_mask(x == 0.0f), -inf, r);
  return lane_select(lane_mask(!(x >= 0.0f)), ::kiln::detail::f32_from_bits(0x7fc00000u), r);
}

// tanh for float, branch-free (Cephes' tanhf method), both halves computed and blended:
//  - |x| < 0.625: x + x^3 P(x^2), P Cephes' degree-4 minimax polynomial;
//  - else 1 - 2 / (exp(2|x|) + 1) with exp_float, the sign of x put back; exp(2|x|) = inf
//    for |x| > 55 gives exactly 1 (and +-inf -> +-1).
// Both halves work on |x| and the sign of x is put back at the end (x + x^3 P would give
// +0 at -0); subnormals (|x| + tiny) and NaN come out of the formulas as libm's.
// Max error measured 1.29 ulp over the float range (tests/unit/test_scalar_math.cpp).
KILN_HD inline float tanh_float(float x) {
  const float ax = detail::abs_bits(x);
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = ax + ax * (z * p);
  const float big = 1.0f - 2.0f / (exp_float(ax + ax) + 1.0f);
  return detail::with_sign_of(detail::lane_select(detail::lane_mask(ax < 0.625f), small, big), x);
}

// erf for float, branch-free, both halves computed and blended. Coefficients are Chebyshev
// fits (mpmath.chebyfit, near-minimax) rounded to float:
//  - |x| < 1: x P(x^2), P of degree 6 fitting erf(x)/x (relative error 1.2e-9);
//  - else 1 - exp(-x^2) R(|x|), R of degree 10 in |x| - 2.5 fitting erfc(x) exp(x^2) on
//    [1, 4] (absolute error 5e-8: < 0.32 ulp of erf). |x| is clamped to 4 first, where
//    erfc(x) < 2^-25 so erf rounds to +-1 (+-inf included). exp(-x^2)'s error in x^2
//    is at most 16 * 2^-24 relative of erfc, negligible beside erf.
// Max error measured 1.28 ulp over the float range (tests/unit/test_scalar_math.cpp).
KILN_HD inline float erf_float(float x) {
  const float ax = detail::abs_bits(x);
  const float z = x * x;
  float p = 7.875875063e-05f;
  p = p * z - 8.016864287e-04f;
  p = p * z + 5.189087423e-03f;
  p = p * z - 2.685421201e-02f;
  p = p * z + 1.128359472e-01f;
  p = p * z - 3.761262667e-01f;
  p = p * z + 1.283791658e-01f;  // the fit's constant 1.128379166 less 1: see below
  // x + x (P - 1) rather than x P: the rounding errors of the sum are then scaled by
  // |P - 1| < 0.13 instead of P (measured 2.4 ulp -> below 1).
  const float small = ax + ax * p;
  const float t = detail::lane_select(detail::lane_mask(ax > 4.0f), 4.0f, ax);
  const float u = t - 2.5f;
  float r = 1.611890749e-06f;
  r = r * u - 6.377862276e-06f;
  r = r * u + 1.468955683e-05f;
  r = r * u - 5.362729453e-05f;
  r = r * u + 2.123135674e-04f;
  r = r * u - 7.389278863e-04f;
  r = r * u + 2.466508570e-03f;
  r = r * u - 7.999388865e-03f;
  r = r * u + 2.493805689e-02f;
  r = r * u - 7.434759370e-02f;
  r = r * u + 2.108063641e-01f;
  const float big = 1.0f - exp_float(-(t * t)) * r;
  // Both halves on |x|, the sign of x put back (so erf(-0) = -0 and erf is odd bit for bit).
  return detail::with_sign_of(detail::lane_select(detail::lane_mask(ax < 1.0f), small, big), x);
}

// log1p for float: Goldberg's log(1 + x) = x log(u) / (u - 1), u = 1 + x rounded (u - 1
// is then exact and the quotient's error cancels to first order; "What every computer
// scientist should know", Thm 4), with log_float; x itself where u == 1 (|x| < 2^-24,
// +-0 included). x = -1 gives -inf and x < -1 NaN through log_float.
// Max error measured 2.20 ulp over the float range (tests/unit/test_scalar_math.cpp).
KILN_HD inline float log1p_float(float x) {
  const float u = 1.0f + x;
  const float r = x * (log_float(u) / (u - 1.0f));
  // u - 1 is exact only for u < 2^24; beyond, log(u) itself is within 2^-24 of the
  // result's size (the 1 is lost in rounding anyway), and it gives +inf at +inf.
  return detail::lane_select(detail::lane_mask(x >= 0x1p24f), log_float(u),
                             detail::lane_select(detail::lane_mask(u == 1.0f), x, r));
}

// expm1 for float: Kahan's (u - 1) x / log(u), u = exp(x) rounded (the error of u cancels
// between the two factors), with exp_float and log_float; x where u == 1, +inf where
// u overflows. x / log(u) first, so
// the product cannot overflow before u does.
// Max error measured 2.36 ulp over the float range (tests/unit/test_scalar_math.cpp).
KILN_HD inline float expm1_float(float x) {
  const float u = exp_float(x);
  const float um1 = u - 1.0f;
  float r = um1 * (x / log_float(u));
  const float inf = ::kiln::detail::f32_from_bits(0x7f800000u);
  r = detail::lane_select(detail::lane_mask(u == 1.0f), x, r);
  // For u < 1/2 (x < -ln2) u - 1 is at least twice u, so u's own error is below half an
  // ulp of the result: plain u - 1 is then more accurate than the quotient (and is -1
  // where u underflows).
  r = detail::lane_select(detail::lane_mask(u < 0.5f), um1, r);
  return detail::lane_select(detail::lane_mask(u == inf), inf, r);
}

// vfn: the float math the functors call where a vectorizable version exists. Host float
// uses the branch-free functions above (a loop over them vectorizes; libm calls do not);
// CUDA device code keeps the CUDA math library, which is fast there; double is libm's.
namespace vfn {
#ifdef __CUDA_ARCH__
#define KILN_VFN1(name)                                      \
  KILN_HD inline float name(float x) { return fn::name(x); } \
  KILN_HD inline double name(double x) { return fn::name(x); }
#else
#define KILN_VFN1(name)                                          \
  KILN_HD inline float name(float x) { return name##_float(x); } \
  KILN_HD inline double name(double x) { return fn::name(x); }
#endif
KILN_VFN1(exp)
KILN_VFN1(log)
KILN_VFN1(log1p)
KILN_VFN1(expm1)
KILN_VFN1(tanh)
KILN_VFN1(erf)
#undef KILN_VFN1
}  // namespace vfn

#define KILN_REQUIRE_FLOAT(T, op) \
  static_assert(::kiln::math::is_floating_v<T>, op ": floating types only (promote first)")
#define KILN_REQUIRE_INT_OR_BOOL(T, op) \
  static_assert(std::is_integral_v<T>, op ": integer or bool types only")

// ---------------------------------------------------------------------------------
// Unary

struct Neg {
  template <class T>
  KILN_HD T operator()(T x) const {
    static_assert(!std::is_same_v<T, bool>, "Neg: not defined for bool (as in PyTorch)");
    if constexpr (is_integer_v<T>)
      return detail::wrap_neg(x);  // INT_MIN -> INT_MIN
    else
      return -x;  // Half/BFloat16: sign-bit flip, exact
  }
};

struct Abs {
  template <class T>
  KILN_HD T operator()(T x) const {
    if constexpr (is_reduced_float_v<T>)
      return T::from_bits(static_cast<uint16_t>(x.x & 0x7fffu));
    else if constexpr (std::is_floating_point_v<T>)
      return fn::fabs(x);
    else if constexpr (std::is_signed_v<T>)
      return x < 0 ? detail::wrap_neg(x) : x;
    else
      return x;  // unsigned, bool
  }
};

// PyTorch: (0 < x) - (x < 0), so sign(NaN) = 0 and sign(-0.0) = +0.
struct Sign {
  template <class T>
  KILN_HD T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>)
      return x;
    else {
      using C = opmath_t<T>;
      const C c = C(x);
      return T(static_cast<int>(C(0) < c) - static_cast<int>(detail::is_negative(c)));
    }
  }
};

// Float-only ops that are a single C library call.
#define KILN_UNARY_FN(Name, fname)         \
  struct Name {                            \
    template <class T>                     \
    KILN_HD T operator()(T x) const {      \
      KILN_REQUIRE_FLOAT(T, #Name);        \
      return T(fn::fname(opmath_t<T>(x))); \
    }                                      \
  };

KILN_UNARY_FN(Exp2, exp2)
KILN_UNARY_FN(Log2, log2)
KILN_UNARY_FN(Log10, log10)
KILN_UNARY_FN(Sqrt, sqrt)
KILN_UNARY_FN(Sin, sin)
KILN_UNARY_FN(Cos, cos)
KILN_UNARY_FN(Tan, tan)
KILN_UNARY_FN(Erfc, erfc)
KILN_UNARY_FN(Asin, asin)
KILN_UNARY_FN(Acos, acos)
KILN_UNARY_FN(Atan, atan)
KILN_UNARY_FN(Sinh, sinh)
KILN_UNARY_FN(Cosh, cosh)
KILN_UNARY_FN(Asinh, asinh)
KILN_UNARY_FN(Acosh, acosh)
KILN_UNARY_FN(Atanh, atanh)
#undef KILN_UNARY_FN

// The same, through vfn: float, Half and BFloat16 run the branch-free float versions on
// the host (a loop over them vectorizes), libm for double, the CUDA library on the device.
#define KILN_UNARY_VFN(Name, fname)         \
  struct Name {                             \
    template <class T>                      \
    KILN_HD T operator()(T x) const {       \
      KILN_REQUIRE_FLOAT(T, #Name);         \
      return T(vfn::fname(opmath_t<T>(x))); \
    }                                       \
  };
KILN_UNARY_VFN(Expm1, expm1)
KILN_UNARY_VFN(Log, log)
KILN_UNARY_VFN(Log1p, log1p)
KILN_UNARY_VFN(Tanh, tanh)
KILN_UNARY_VFN(Erf, erf)
#undef KILN_UNARY_VFN

// exp: float, Half and BFloat16 use exp_float (vectorizable), double ::exp.
struct Exp {
  template <class T>
  KILN_HD T operator()(T x) const {
    KILN_REQUIRE_FLOAT(T, "Exp");
    if constexpr (std::is_same_v<opmath_t<T>, float>)
      return T(exp_float(opmath_t<T>(x)));
    else
      return T(fn::exp(x));
  }
};

// 1/sqrt(x) (not a fused rsqrt), like PyTorch's CPU kernel: rsqrt(-0) = -inf.
struct Rsqrt {
  template <class T>
  KILN_HD T operator()(T x) const {
    KILN_REQUIRE_FLOAT(T, "Rsqrt");
    using C = opmath_t<T>;
    return T(C(1) / fn::sqrt(C(x)));
  }
};

struct Reciprocal {
  template <class T>
  KILN_HD T operator()(T x) const {
    KILN_REQUIRE_FLOAT(T, "Reciprocal");
    using C = opmath_t<T>;
    return T(C(1) / C(x));
  }
};

// 1 / (1 + exp(-x)), PyTorch's formula: exact 0 for x < ~-88 (float), 1 for large x.
struct Sigmoid {
  template <class T>
  KILN_HD T operator()(T x) const {
    KILN_REQUIRE_FLOAT(T, "Sigmoid");
    using C = opmath_t<T>;
    return T(C(1) / (C(1) + vfn::exp(-C(x))));
  }
};

// PyTorch's relu is clamp_min(x, 0) = std::max(x, 0): NaN propagates, relu(-0.0) = -0.0.
struct Relu {
  template <class T>
  KILN_HD T operator()(T x) const {
    if constexpr (std::is_signed_v<opmath_t<T>>)
      return opmath_t<T>(x) < 0 ? T(0) : x;
    else
      return x;  // unsigned, bool
  }
};

// Exact gelu: x/2 (1 + erf(x/sqrt 2)).
struct Gelu {
  template <class T>
  KILN_HD T operator()(T v) const {
    KILN_REQUIRE_FLOAT(T, "Gelu");
    using C = opmath_t<T>;
    const C x = C(v);
    return T(x * C(0.5) * (C(1) + vfn::erf(x * C(detail::kSqrt1_2))));
  }
};

// gelu(approximate='tanh'): x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
struct GeluTanh {
  template <class T>
  KILN_HD T operator()(T v) const {
    KILN_REQUIRE_FLOAT(T, "GeluTanh");
    using C = opmath_t<T>;
    const C x = C(v);
    const C inner = C(detail::kSqrt2OverPi) * (x + C(detail::kGeluKappa) * x * x * x);
    return T(C(0.5) * x * (C(1) + vfn::tanh(inner)));
  }
};

// x / (1 + exp(-x)), PyTorch's formula; note silu(-inf) = -inf/inf = NaN, as in PyTorch.
struct Silu {
  template <class T>
  KILN_HD T operator()(T v) const {
    KILN_REQUIRE_FLOAT(T, "Silu");
    using C = opmath_t<T>;
    const C x = C(v);
    return T(x / (C(1) + vfn::exp(-x)));
  }
};

// Inverse error function: NaN outside [-1, 1], +-inf at +-1. Float computes in float.
struct Erfinv {
  template <class T>
  KILN_HD T operator()(T x) const {
    KILN_REQUIRE_FLOAT(T, "Erfinv");
    return T(detail::erfinv(opmath_t<T>(x)));
  }
};

// log|Gamma(x)| (the C library's; +inf at the poles 0, -1, -2, ...). Float computes in float.
struct Lgamma {
  template <class T>
  KILN_HD T operator()(T x) const {
    KILN_REQUIRE_FLOAT(T, "Lgamma");
    return T(fn::lgamma(opmath_t<T>(x)));
  }
};

struct Digamma {  // psi = Gamma'/Gamma (Note [Gamma family])
  template <class T>
  KILN_HD T operator()(T x) const {
    KILN_REQUIRE_FLOAT(T, "Digamma");
    return T(detail::digamma(opmath_t<T>(x)));
  }
};

struct Polygamma {  // the n-th derivative of psi (Note [Gamma family])
  int64_t n;
  template <class T>
  KILN_HD T operator()(T x) const {
    KILN_REQUIRE_FLOAT(T, "Polygamma");
    return T(detail::polygamma(n, opmath_t<T>(x)));
  }
};

// Rounding ops are the identity on integers and bool (PyTorch returns a copy).
#define KILN_ROUNDING_FN(Name, fname)        \
  struct Name {                              \
    template <class T>                       \
    KILN_HD T operator()(T x) const {        \
      if constexpr (std::is_integral_v<T>)   \
        return x;                            \
      else                                   \
        return T(fn::fname(opmath_t<T>(x))); \
    }                                        \
  };
KILN_ROUNDING_FN(Floor, floor)
KILN_ROUNDING_FN(Ceil, ceil)
KILN_ROUNDING_FN(Trunc, trunc)
KILN_ROUNDING_FN(Round, nearbyint)  // half to even (default rounding mode)
#undef KILN_ROUNDING_FN

// torch.round(x, decimals=d): scale by 10^|d| in the compute type, round half to even,
// scale back; negative d divides first. Same operation order as PyTorch, so results
// (including their double-rounding artefacts) match.
struct RoundDecimals {
  int64_t decimals;
  template <class T>
  KILN_HD T operator()(T v) const {
    KILN_REQUIRE_FLOAT(T, "RoundDecimals");
    using C = opmath_t<T>;
    const bool neg = decimals < 0;
    const C scale = C(fn::pow(10.0, static_cast<double>(neg ? -decimals : decimals)));
    const C x = C(v);
    return T(neg ? fn::nearbyint(x / scale) * scale : fn::nearbyint(x * scale) / scale);
  }
};

// x - trunc(x): keeps the sign (frac(-1.5) = -0.5); frac(+-inf) = NaN as in PyTorch.
struct Frac {
  template <class T>
  KILN_HD T operator()(T v) const {
    KILN_REQUIRE_FLOAT(T, "Frac");
    using C = opmath_t<T>;
    const C x = C(v);
    return T(x - fn::trunc(x));
  }
};

struct IsNan {
  template <class T>
  KILN_HD bool operator()(T x) const {
    if constexpr (is_floating_v<T>)
      return fn::isnan(opmath_t<T>(x));
    else
      return false;
  }
};

struct IsInf {
  template <class T>
  KILN_HD bool operator()(T x) const {
    if constexpr (is_floating_v<T>)
      return fn::isinf(opmath_t<T>(x));
    else
      return false;
  }
};

struct IsFinite {
  template <class T>
  KILN_HD bool operator()(T x) const {
    if constexpr (is_floating_v<T>) {
      const opmath_t<T> c = opmath_t<T>(x);
      return !fn::isnan(c) && !fn::isinf(c);
    } else {
      return true;
    }
  }
};

struct LogicalNot {
  template <class T>
  KILN_HD bool operator()(T x) const {
    return !detail::truthy(x);
  }
};

struct BitwiseNot {
  template <class T>
  KILN_HD T operator()(T x) const {
    KILN_REQUIRE_INT_OR_BOOL(T, "BitwiseNot");
    if constexpr (std::is_same_v<T, bool>)
      return !x;
    else
      return static_cast<T>(~x);
  }
};

// nan_to_num: the caller fills in PyTorch's defaults (0, T's max, T's lowest) and
// passes values representable in T. Integers and bool pass through.
struct NanToNum {
  double nan;
  double posinf;
  double neginf;
  template <class T>
  KILN_HD T operator()(T x) const {
    if constexpr (is_floating_v<T>) {
      const opmath_t<T> c = opmath_t<T>(x);
      if (fn::isnan(c)) return T(nan);
      if (fn::isinf(c)) return T(c > 0 ? posinf : neginf);
      return x;
    } else {
      return x;
    }
  }
};

struct Square {
  template <class T>
  KILN_HD T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>)
      return x;
    else if constexpr (is_integer_v<T>)
      return detail::wrap_mul(x, x);
    else {
      const opmath_t<T> c = opmath_t<T>(x);
      return T(c * c);
    }
  }
};

// ---------------------------------------------------------------------------------
// Binary: arithmetic

struct Add {
  template <class T>
  KILN_HD T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>)
      return a || b;
    else if constexpr (is_integer_v<T>)
      return detail::wrap_add(a, b);
    else
      return T(opmath_t<T>(a) + opmath_t<T>(b));
  }
};

struct Sub {
  template <class T>
  KILN_HD T operator()(T a, T b) const {
    static_assert(!std::is_same_v<T, bool>, "Sub: not defined for bool (as in PyTorch)");
    if constexpr (is_integer_v<T>)
      return detail::wrap_sub(a, b);
    else
      return T(opmath_t<T>(a) - opmath_t<T>(b));
  }
};

struct Mul {
  template <class T>
  KILN_HD T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>)
      return a && b;
    else if constexpr (is_integer_v<T>)
      return detail::wrap_mul(a, b);
    else
      return T(opmath_t<T>(a) * opmath_t<T>(b));
  }
};

// a + alpha * b, alpha converted to the compute type (PyTorch's add/sub with alpha).
// Not fused: a + alpha*b rounds twice, like PyTorch's scalar path (its AVX path uses
// an FMA, so PyTorch itself differs in the last bit there). The template parameter
// keeps integer alphas exact: AddAlpha<int64_t>{k}.
template <class S = double>
struct AddAlpha {
  S alpha;
  template <class T>
  KILN_HD T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>)
      return a || (alpha != S(0) && b);
    else if constexpr (is_integer_v<T>)
      return detail::wrap_add(a, detail::wrap_mul(static_cast<T>(alpha), b));
    else {
      using C = opmath_t<T>;
      return T(C(a) + C(alpha) * C(b));
    }
  }
};

// True division (floats only; integers are promoted by the caller).
struct Div {
  template <class T>
  KILN_HD T operator()(T a, T b) const {
    KILN_REQUIRE_FLOAT(T, "Div");
    return T(opmath_t<T>(a) / opmath_t<T>(b));
  }
};

// div(rounding_mode='trunc'). Floats: trunc(a / b). Integers: C++ division; b == 0 -> 0
// (caller raises), b == -1 handled by negation so INT_MIN / -1 wraps instead of trapping.
struct DivTrunc {
  template <class T>
  KILN_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == T(0)) return T(0);
      if constexpr (is_integer_v<T> && std::is_signed_v<T>) {
        if (b == T(-1)) return detail::wrap_neg(a);
      }
      return static_cast<T>(a / b);
    } else {
      using C = opmath_t<T>;
      return T(fn::trunc(C(a) / C(b)));
    }
  }
};

namespace detail {
// Python's float floor division (CPython float_divmod, which PyTorch also follows):
// derived from fmod so that a == q*b + r holds as closely as possible, rather than
// floor(a/b), whose rounded quotient can land on the wrong integer (1 // 0.1 == 9).
template <class C>
KILN_HD inline C div_floor_float(C a, C b) {
  if (b == C(0)) return a / b;  // IEEE result: +-inf or NaN
  const C mod = fn::fmod(a, b);
  C div = (a - mod) / b;  // close to an integer: a - mod is a multiple of b
  if (mod != C(0) && ((b < C(0)) != (mod < C(0)))) div -= C(1);
  if (div == C(0)) return fn::copysign(C(0), a / b);  // signed zero of the true quotient
  C q = fn::floor(div);
  if (div - q > C(0.5)) q += C(1);  // snap rounding error in (a - mod) / b
  return q;
}
}  // namespace detail

// div(rounding_mode='floor'): Python semantics for floats and integers.
struct DivFloor {
  template <class T>
  KILN_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == T(0)) return T(0);
      if constexpr (is_integer_v<T> && std::is_signed_v<T>) {
        if (b == T(-1)) return detail::wrap_neg(a);
        const T q = static_cast<T>(a / b);
        const T r = static_cast<T>(a % b);
        // Truncation rounded toward zero; step down when the signs differ and it was inexact.
        return (r != 0 && ((r < 0) != (b < 0))) ? static_cast<T>(q - 1) : q;
      } else {
        return static_cast<T>(a / b);
      }
    } else {
      using C = opmath_t<T>;
      return T(detail::div_floor_float(C(a), C(b)));
    }
  }
};

// C fmod: result has the sign of the dividend. Integers: b == 0 -> 0 (caller raises).
struct Fmod {
  template <class T>
  KILN_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == T(0)) return T(0);
      if constexpr (is_integer_v<T> && std::is_signed_v<T>) {
        if (b == T(-1)) return T(0);  // avoids INT_MIN % -1 (UB)
      }
      return static_cast<T>(a % b);
    } else {
      using C = opmath_t<T>;
      return T(fn::fmod(C(a), C(b)));
    }
  }
};

// Python modulo: result has the sign of the divisor. Floats follow PyTorch exactly:
// fmod, then add b when the signs disagree; so remainder(-0.0, 1) = -0.0 (Python: 0.0)
// and remainder(-1, inf) = inf.
struct Remainder {
  template <class T>
  KILN_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == T(0)) return T(0);
      if constexpr (is_integer_v<T> && std::is_signed_v<T>) {
        if (b == T(-1)) return T(0);
        const T r = static_cast<T>(a % b);
        return (r != 0 && ((r < 0) != (b < 0))) ? static_cast<T>(r + b) : r;
      } else {
        return static_cast<T>(a % b);
      }
    } else {
      using C = opmath_t<T>;
      const C ca = C(a), cb = C(b);
      const C mod = fn::fmod(ca, cb);
      return T((mod != C(0) && ((cb < C(0)) != (mod < C(0)))) ? mod + cb : mod);
    }
  }
};

// Floats: C pow (pow(x, 0) = 1 even for NaN x; pow(1, y) = 1). Integers: exact, wrapping
// exponentiation by squaring; a negative exponent follows PyTorch's 1/x^n truncation:
// 1 for x == 1, +-1 for x == -1 (by parity), 0 otherwise (x == 0 included).
struct Pow {
  template <class T>
  KILN_HD T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) {
      return a || !b;
    } else if constexpr (is_integer_v<T>) {
      if constexpr (std::is_signed_v<T>) {
        if (b < 0) {
          if (a == 1) return T(1);
          if (a == -1) return (b & 1) ? T(-1) : T(1);
          return T(0);
        }
      }
      using W = detail::wide_unsigned_t<T>;
      W result = 1, base = static_cast<W>(a);
      for (W e = static_cast<W>(b); e != 0; e >>= 1) {
        if (e & 1) result *= base;
        base *= base;
      }
      return static_cast<T>(result);
    } else {
      using C = opmath_t<T>;
      return T(fn::pow(C(a), C(b)));
    }
  }
};

// ---------------------------------------------------------------------------------
// Binary: max/min. For zeros, -0 < +0 (IEEE 754-2019 maximum/minimum), so the result
// does not depend on operand order; PyTorch's scalar path returns the first operand
// and its vectorized path the second, so it has no single answer there.

struct Maximum {  // NaN-propagating (torch.maximum)
  template <class T>
  KILN_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return a > b ? a : b;
    } else {
      using C = opmath_t<T>;
      const C x = C(a), y = C(b);
      if (fn::isnan(x) || fn::isnan(y)) return detail::quiet_nan<T>();
      if (x == y) return fn::signbit(x) ? b : a;
      return x > y ? a : b;
    }
  }
};

struct Minimum {  // NaN-propagating (torch.minimum)
  template <class T>
  KILN_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return a < b ? a : b;
    } else {
      using C = opmath_t<T>;
      const C x = C(a), y = C(b);
      if (fn::isnan(x) || fn::isnan(y)) return detail::quiet_nan<T>();
      if (x == y) return fn::signbit(x) ? a : b;
      return x < y ? a : b;
    }
  }
};

struct Fmax {  // NaN-ignoring (torch.fmax): NaN only when both are NaN
  template <class T>
  KILN_HD T operator()(T a, T b) const {
    if constexpr (is_floating_v<T>) {
      if (fn::isnan(opmath_t<T>(a))) return b;
      if (fn::isnan(opmath_t<T>(b))) return a;
    }
    return Maximum{}(a, b);
  }
};

struct Fmin {  // NaN-ignoring (torch.fmin)
  template <class T>
  KILN_HD T operator()(T a, T b) const {
    if constexpr (is_floating_v<T>) {
      if (fn::isnan(opmath_t<T>(a))) return b;
      if (fn::isnan(opmath_t<T>(b))) return a;
    }
    return Minimum{}(a, b);
  }
};

// ---------------------------------------------------------------------------------
// Binary: other float math

struct Atan2 {
  template <class T>
  KILN_HD T operator()(T a, T b) const {
    KILN_REQUIRE_FLOAT(T, "Atan2");
    using C = opmath_t<T>;
    return T(fn::atan2(C(a), C(b)));
  }
};

struct Hypot {  // hypot(+-inf, NaN) = inf (C semantics)
  template <class T>
  KILN_HD T operator()(T a, T b) const {
    KILN_REQUIRE_FLOAT(T, "Hypot");
    using C = opmath_t<T>;
    return T(fn::hypot(C(a), C(b)));
  }
};

struct CopySign {
  template <class T>
  KILN_HD T operator()(T a, T b) const {
    KILN_REQUIRE_FLOAT(T, "CopySign");
    using C = opmath_t<T>;
    return T(fn::copysign(C(a), C(b)));
  }
};

// nextafter(a, b): the representable value after a towards b, in T itself (not opmath: Half and
// BFloat16 step their own 16-bit patterns, as c10's). NaN if either is NaN; b if a == b.
struct NextAfter {
  template <class T>
  KILN_HD T operator()(T a, T b) const {
    KILN_REQUIRE_FLOAT(T, "NextAfter");
    if constexpr (is_reduced_float_v<T>) {
      const float fa = float(a), fb = float(b);
      if (fa != fa || fb != fb) return T(fa + fb);
      if (fa == fb) return b;
      // From +-0, the smallest subnormal with b's sign; else one ulp up or down the magnitude.
      if (fa == 0.0f) return T::from_bits(static_cast<uint16_t>((fb < 0.0f ? 0x8000u : 0u) | 1u));
      const bool away = (fa < fb) == (fa > 0.0f);
      return T::from_bits(static_cast<uint16_t>(away ? a.x + 1 : a.x - 1));
    } else {
      return fn::nextafter(a, b);
    }
  }
};

// x * log(y) with 0 * log(y) = 0 (even for y = 0 or inf), but NaN if y is NaN.
struct Xlogy {
  template <class T>
  KILN_HD T operator()(T a, T b) const {
    KILN_REQUIRE_FLOAT(T, "Xlogy");
    using C = opmath_t<T>;
    const C x = C(a), y = C(b);
    if (fn::isnan(y)) return detail::quiet_nan<T>();
    if (x == C(0)) return T(0);
    return T(x * vfn::log(y));
  }
};

// ---------------------------------------------------------------------------------
// Binary: comparisons and logical ops (return bool; Half/BFloat16 compare as float)

#define KILN_COMPARE_FN(Name, op)              \
  struct Name {                                \
    template <class T>                         \
    KILN_HD bool operator()(T a, T b) const {  \
      return opmath_t<T>(a) op opmath_t<T>(b); \
    }                                          \
  };
KILN_COMPARE_FN(Eq, ==)
KILN_COMPARE_FN(Ne, !=)
KILN_COMPARE_FN(Lt, <)
KILN_COMPARE_FN(Le, <=)
KILN_COMPARE_FN(Gt, >)
KILN_COMPARE_FN(Ge, >=)
#undef KILN_COMPARE_FN

struct LogicalAnd {
  template <class T>
  KILN_HD bool operator()(T a, T b) const {
    return detail::truthy(a) && detail::truthy(b);
  }
};
struct LogicalOr {
  template <class T>
  KILN_HD bool operator()(T a, T b) const {
    return detail::truthy(a) || detail::truthy(b);
  }
};
struct LogicalXor {
  template <class T>
  KILN_HD bool operator()(T a, T b) const {
    return detail::truthy(a) != detail::truthy(b);
  }
};

// ---------------------------------------------------------------------------------
// Binary: bitwise ops (integers and bool)

#define KILN_BITWISE_FN(Name, op)          \
  struct Name {                            \
    template <class T>                     \
    KILN_HD T operator()(T a, T b) const { \
      KILN_REQUIRE_INT_OR_BOOL(T, #Name);  \
      return static_cast<T>(a op b);       \
    }                                      \
  };
KILN_BITWISE_FN(BitwiseAnd, &)
KILN_BITWISE_FN(BitwiseOr, |)
KILN_BITWISE_FN(BitwiseXor, ^)
#undef KILN_BITWISE_FN

// PyTorch: a shift count that is negative (as a signed value) or >= the bit width
// gives 0, instead of C++'s UB.
struct BitwiseLeftShift {
  template <class T>
  KILN_HD T operator()(T a, T b) const {
    static_assert(is_integer_v<T>, "BitwiseLeftShift: integer types only");
    using S = std::make_signed_t<T>;
    using U = std::make_unsigned_t<T>;
    constexpr uint64_t kBits = sizeof(T) * 8;
    if (static_cast<S>(b) < 0 || static_cast<uint64_t>(b) >= kBits) return T(0);
    return static_cast<T>(static_cast<U>(a) << b);
  }
};

// PyTorch: arithmetic shift for signed types; an out-of-range count (negative or >=
// the width) shifts everything out: -1 or 0 for signed (the sign fills), 0 for unsigned.
struct BitwiseRightShift {
  template <class T>
  KILN_HD T operator()(T a, T b) const {
    static_assert(is_integer_v<T>, "BitwiseRightShift: integer types only");
    using S = std::make_signed_t<T>;
    constexpr uint64_t kBits = sizeof(T) * 8;
    if (static_cast<S>(b) < 0 || static_cast<uint64_t>(b) >= kBits) {
      if constexpr (std::is_signed_v<T>)
        return static_cast<T>(a >> (kBits - 1));
      else
        return T(0);
    }
    return static_cast<T>(a >> b);
  }
};

// ---------------------------------------------------------------------------------
// Ternary

// torch.lerp: two formulas for accuracy at both ends; the switch is on |w| < 0.5
// (PyTorch's is_lerp_weight_small), so lerp(a, b, 1) == b exactly.
struct Lerp {
  template <class T>
  KILN_HD T operator()(T a, T b, T w) const {
    KILN_REQUIRE_FLOAT(T, "Lerp");
    using C = opmath_t<T>;
    const C s = C(a), e = C(b), wt = C(w);
    return T(fn::fabs(wt) < C(0.5) ? s + wt * (e - s) : e - (e - s) * (C(1) - wt));
  }
};

// Floating addcmul/addcdiv: a + value * (b * c) and a + value * (b / c) in opmath, value
// already in the compute type. Shared by the single-tensor and foreach kernels so they round alike.
template <class S>
struct Addcmul {
  S value;
  template <class T>
  KILN_HD T operator()(T a, T b, T c) const {
    KILN_REQUIRE_FLOAT(T, "Addcmul");
    using C = opmath_t<T>;
    return T(C(a) + C(value) * (C(b) * C(c)));
  }
};
template <class S>
struct Addcdiv {
  S value;
  template <class T>
  KILN_HD T operator()(T a, T b, T c) const {
    KILN_REQUIRE_FLOAT(T, "Addcdiv");
    using C = opmath_t<T>;
    return T(C(a) + C(value) * (C(b) / C(c)));
  }
};

// Note [Fused Adam]
// One element of Adam/AdamW's step (_fused_adam_): adam_foreach's ops (src/optim/adam.cpp) in
// their order, with their scalars converted as those ops convert them, each intermediate held in
// C (float for float/Half/BFloat16, double for double):
//   g = maximize ? -g : g;  weight decay: p = p * (1 - lr*wd) (decoupled) or g = g + wd * p
//   m = lerp(m, g, 1 - beta1);  v = v * beta2;  v = v + (1 - beta2) * (g * g)
//   d = sqrt(amsgrad ? (vmax = maximum(vmax, v)) : v) / bc2_sqrt + eps;  p = p + -step_size * (m / d)
// So for float and double tensors it rounds as the foreach step, bit for bit where the compiler
// contracts no FMA (CUDA's may: then to float rounding); Half/BFloat16 round only the stored
// p, m, v and vmax (torch's fused step likewise), where the foreach step rounds every op.
template <class C>
struct AdamStep {
  C decay;  // 1 - lr * weight_decay (decoupled), or weight_decay (coupled)
  C one_minus_beta1, beta2, one_minus_beta2, eps;
  C neg_step_size, bc2_sqrt;  // per tensor: -lr / (1 - beta1^t), sqrt(1 - beta2^t)
  bool weight_decay, decoupled, amsgrad, maximize;
  // The step's scalars, converted from the double attrs of _fused_adam_ (per-tensor ones set later).
  static KILN_HD AdamStep make(double lr, double beta1, double beta2, double eps, double wd, bool amsgrad,
                               bool maximize, bool decoupled) {
    return {C(decoupled ? 1 - lr * wd : wd), C(1 - beta1), C(beta2), C(1 - beta2), C(eps), C(0), C(1), wd != 0,
            decoupled, amsgrad, maximize};
  }
  template <class T>
  KILN_HD void operator()(T& p_out, T grad, T& m_out, T& v_out, T* vmax_out) const {
    C p = C(p_out), g = C(grad);
    if (maximize) g = -g;
    if (weight_decay) {
      if (decoupled)
        p = p * decay;
      else
        g = g + decay * p;
    }
    const C m = Lerp{}(C(m_out), g, one_minus_beta1);
    C v = C(v_out) * beta2;
    v = v + one_minus_beta2 * (g * g);
    C d = v;
    if (amsgrad) {
      d = Maximum{}(C(*vmax_out), v);
      *vmax_out = T(d);
    }
    d = Sqrt{}(d) / bc2_sqrt;
    d = d + eps;
    p = p + neg_step_size * (m / d);
    p_out = T(p);
    m_out = T(m);
    v_out = T(v);
  }
};

struct Where {
  template <class T>
  KILN_HD T operator()(bool cond, T a, T b) const {
    return cond ? a : b;
  }
  // Between bools, the same choice as logic: g++ vectorizes it beside float and int64 values,
  // where a select of bools stops the loop's vectorization (a causal mask's where, generated C++).
  KILN_HD bool operator()(bool cond, bool a, bool b) const { return (cond & a) | (!cond & b); }
};

// torch.clamp with tensor bounds: min(max(x, lo), hi), so lo > hi gives hi; a NaN in
// x, lo or hi gives NaN (PyTorch's scalar-bound kernel ignores NaN bounds; kiln does not).
struct Clamp {
  template <class T>
  KILN_HD T operator()(T x, T lo, T hi) const {
    using C = opmath_t<T>;
    const C cx = C(x), clo = C(lo), chi = C(hi);
    if constexpr (is_floating_v<T>) {
      if (fn::isnan(cx) || fn::isnan(clo) || fn::isnan(chi)) return detail::quiet_nan<T>();
    }
    const bool below = cx < clo;
    const C m = below ? clo : cx;
    if (chi < m) return hi;
    return below ? lo : x;
  }
};

// ---------------------------------------------------------------------------------
// Gradient helpers shared by autograd and the compiler (float types; same formulas as
// PyTorch's backward kernels).

struct SigmoidBackward {  // grad * y * (1 - y), y = sigmoid(x)
  template <class T>
  KILN_HD T operator()(T grad, T y) const {
    KILN_REQUIRE_FLOAT(T, "SigmoidBackward");
    using C = opmath_t<T>;
    const C yy = C(y);
    return T(C(grad) * (C(1) - yy) * yy);
  }
};

struct TanhBackward {  // grad * (1 - y^2), y = tanh(x)
  template <class T>
  KILN_HD T operator()(T grad, T y) const {
    KILN_REQUIRE_FLOAT(T, "TanhBackward");
    using C = opmath_t<T>;
    const C yy = C(y);
    return T(C(grad) * (C(1) - yy * yy));
  }
};

// torch's threshold_backward: grad where x > threshold, else 0 (a NaN x keeps the gradient: the
// comparison x <= threshold is false), compared in opmath.
template <class S>
struct ThresholdBackward {
  S threshold;
  template <class T>
  KILN_HD T operator()(T grad, T x) const {
    using C = opmath_t<T>;
    return C(x) <= C(threshold) ? T(0) : grad;
  }
};

// torch's hardtanh_backward: 0 where x <= lo or x >= hi (the bounds get none), else grad.
template <class S>
struct HardtanhBackward {
  S lo, hi;
  template <class T>
  KILN_HD T operator()(T grad, T x) const {
    using C = opmath_t<T>;
    // `|`, not `||`: both comparisons always run, so the loop vectorizes (an ordered comparison
    // may trap on NaN, and g++ does not evaluate the second one early on its own): 10x faster.
    const bool outside = (C(x) <= C(lo)) | (C(x) >= C(hi));
    return outside ? T(0) : grad;
  }
};

struct GeluBackward {  // grad * (Phi(x) + x phi(x))
  template <class T>
  KILN_HD T operator()(T grad, T v) const {
    KILN_REQUIRE_FLOAT(T, "GeluBackward");
    using C = opmath_t<T>;
    const C x = C(v);
    const C cdf = C(0.5) * (C(1) + vfn::erf(x * C(detail::kSqrt1_2)));
    const C pdf = C(detail::kInvSqrt2Pi) * vfn::exp(C(-0.5) * x * x);
    return T(C(grad) * (cdf + x * pdf));
  }
};

struct GeluTanhBackward {
  template <class T>
  KILN_HD T operator()(T grad, T v) const {
    KILN_REQUIRE_FLOAT(T, "GeluTanhBackward");
    using C = opmath_t<T>;
    const C x = C(v);
    const C beta = C(detail::kSqrt2OverPi), kappa = C(detail::kGeluKappa);
    const C x2 = x * x;
    const C t = vfn::tanh(beta * (x + kappa * x2 * x));
    const C d_left = C(0.5) * (C(1) + t);                     // d/dx of x/2, times (1+t)
    const C d_inner = beta * (C(1) + C(3) * kappa * x2);      // d/dx of tanh's argument
    const C d_right = C(0.5) * x * (C(1) - t * t) * d_inner;  // x/2 * d/dx (1+t)
    return T(C(grad) * (d_left + d_right));
  }
};

struct SiluBackward {  // grad * s * (1 + x (1 - s)), s = sigmoid(x)
  template <class T>
  KILN_HD T operator()(T grad, T v) const {
    KILN_REQUIRE_FLOAT(T, "SiluBackward");
    using C = opmath_t<T>;
    const C x = C(v);
    const C s = C(1) / (C(1) + vfn::exp(-x));
    return T(C(grad) * s * (C(1) + x * (C(1) - s)));
  }
};

struct ErfinvDerivative {  // d/dx erfinv(x) = sqrt(pi)/2 exp(erfinv(x)^2)
  template <class T>
  KILN_HD T operator()(T v) const {
    KILN_REQUIRE_FLOAT(T, "ErfinvDerivative");
    using C = opmath_t<T>;
    const C y = detail::erfinv(C(v));
    return T(C(detail::kSqrtPiOver2) * fn::exp(y * y));
  }
};

#undef KILN_REQUIRE_FLOAT
#undef KILN_REQUIRE_INT_OR_BOOL

}  // namespace kiln::math
