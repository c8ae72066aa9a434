// Elementwise ops with broadcasting and PyTorch's type promotion.
#pragma once
#include <optional>
#include <string>

#include "kiln/tensor.h"

namespace kiln {

// Unary (integer inputs to floating ops produce the default float dtype, as torch).
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor exp2(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log2(const Tensor& x);
Tensor log10(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor square(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tan(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
// approximate: "none" (erf) or "tanh"
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor silu(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor erfinv(const Tensor& x);
Tensor erfc(const Tensor& x);
// Gamma-function family: log|Gamma(x)|, its derivative psi(x), and psi's n-th derivative
// (n >= 0; polygamma(0, x) is digamma, polygamma(1, x) trigamma).
Tensor lgamma(const Tensor& x);
Tensor digamma(const Tensor& x);
Tensor polygamma(int64_t n, const Tensor& x);
Tensor asin(const Tensor& x);
Tensor acos(const Tensor& x);
Tensor atan(const Tensor& x);
Tensor sinh(const Tensor& x);
Tensor cosh(const Tensor& x);
Tensor asinh(const Tensor& x);
Tensor acosh(const Tensor& x);
Tensor atanh(const Tensor& x);
Tensor frac(const Tensor& x);  // x - trunc(x), floating inputs only
// log(x / (1 - x)); with eps, x is first clamped to [eps, 1 - eps].
Tensor logit(const Tensor& x, std::optional<double> eps = std::nullopt);
Tensor sgn(const Tensor& x);  // sign (kiln has no complex dtypes)
Tensor deg2rad(const Tensor& x);
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x, int64_t decimals = 0);
Tensor trunc(const Tensor& x);
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);
Tensor isneginf(const Tensor& x);  // x == -inf (false for integers)
Tensor isposinf(const Tensor& x);  // x == +inf
Tensor signbit(const Tensor& x);   // the sign bit: true for -0.0 and negative NaNs
Tensor sinc(const Tensor& x);      // sin(pi x) / (pi x), 1 at 0
Tensor isfinite(const Tensor& x);
Tensor nan_to_num(const Tensor& x, std::optional<double> nan = 0.0, std::optional<double> posinf = std::nullopt,
                  std::optional<double> neginf = std::nullopt);
Tensor logical_not(const Tensor& x);
Tensor bitwise_not(const Tensor& x);
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max);
Tensor clamp_min(const Tensor& x, const Scalar& min);
Tensor clamp_max(const Tensor& x, const Scalar& max);

// Binary. Every binary op also takes a Scalar on either side.
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor rsub(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);  // b - alpha * a
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Scalar& b);
// rounding_mode: nullopt (true division), "trunc" or "floor".
Tensor div(const Tensor& a, const Tensor& b, std::optional<std::string> rounding_mode = std::nullopt);
Tensor div(const Tensor& a, const Scalar& b, std::optional<std::string> rounding_mode = std::nullopt);
Tensor div(const Scalar& a, const Tensor& b, std::optional<std::string> rounding_mode = std::nullopt);
Tensor fmod(const Tensor& a, const Tensor& b);
Tensor fmod(const Tensor& a, const Scalar& b);
Tensor remainder(const Tensor& a, const Tensor& b);
Tensor remainder(const Tensor& a, const Scalar& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Scalar& b);
Tensor pow(const Scalar& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor atan2(const Tensor& a, const Tensor& b);
Tensor hypot(const Tensor& a, const Tensor& b);
Tensor xlogy(const Tensor& a, const Tensor& b);  // a * log(b), 0 where a == 0 (unless b is NaN)
Tensor xlogy(const Tensor& a, const Scalar& b);
Tensor xlogy(const Scalar& a, const Tensor& b);
Tensor fmax(const Tensor& a, const Tensor& b);  // maximum that ignores a NaN (NaN only if both are)
Tensor fmin(const Tensor& a, const Tensor& b);
Tensor copysign(const Tensor& a, const Tensor& b);
Tensor copysign(const Tensor& a, const Scalar& b);
Tensor logaddexp(const Tensor& a, const Tensor& b);     // log(exp(a) + exp(b)) without overflow
Tensor logaddexp2(const Tensor& a, const Tensor& b);    // log2(2^a + 2^b) without overflow
// torch.true_divide: an alias of div without a rounding mode.
Tensor true_divide(const Tensor& a, const Tensor& b);
Tensor true_divide(const Tensor& a, const Scalar& b);
Tensor nextafter(const Tensor& a, const Tensor& b);  // the next representable value after a towards b
// values where x == 0, else 0 (x < 0, NaN) or 1 (x > 0); x and values of one dtype.
Tensor heaviside(const Tensor& x, const Tensor& values);
// pow computed in float64 (both operands converted first); the result is float64.
Tensor float_power(const Tensor& a, const Tensor& b);
Tensor float_power(const Tensor& a, const Scalar& b);
Tensor float_power(const Scalar& a, const Tensor& b);
// torch.equal: same sizes and every element equal (NaN != NaN), compared in the promoted dtype.
bool equal(const Tensor& a, const Tensor& b);
Tensor floor_divide(const Tensor& a, const Tensor& b);  // div(a, b, "floor")
Tensor floor_divide(const Tensor& a, const Scalar& b);
// |a - b| <= atol + rtol * |b| elementwise (bool); a and b of one dtype. allclose: all of it.
Tensor isclose(const Tensor& a, const Tensor& b, double rtol = 1e-05, double atol = 1e-08, bool equal_nan = false);
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-05, double atol = 1e-08, bool equal_nan = false);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Scalar& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Scalar& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Scalar& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Scalar& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Scalar& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Scalar& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
Tensor bitwise_and(const Tensor& a, const Tensor& b);
Tensor bitwise_or(const Tensor& a, const Tensor& b);
Tensor bitwise_xor(const Tensor& a, const Tensor& b);
Tensor bitwise_left_shift(const Tensor& a, const Tensor& b);
Tensor bitwise_right_shift(const Tensor& a, const Tensor& b);

// Ternary.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b);
Tensor where(const Tensor& cond, const Scalar& a, const Tensor& b);
Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight);
Tensor lerp(const Tensor& start, const Tensor& end, const Scalar& weight);
Tensor addcmul(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value = 1);
Tensor addcdiv(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value = 1);

// dtype conversion (a copy unless the dtype already matches and copy is false).
Tensor to(const Tensor& x, DType t, bool copy = false);

}  // namespace kiln
