// The pointwise ops the CUDA launcher runs, as one X-macro table shared by the host code
// (src/backend/cuda/pointwise.cpp: dtypes, broadcasting, registration) and the kernels
// (pointwise.cu: the functor of core/scalar_math.h per op). Columns:
//   X(op, functor, type set, arity)
// The functor expression may use T (the compute type), C (its opmath type) and p (PointwiseParams).
// Type sets as the CPU kernels' (backend/cpu/pointwise.h): the dtypes the functor admits.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

#include "backend/cuda/elementwise.h"

// clang-format off
#define KILN_CUDA_POINTWISE_OPS(X)                                          \
  X(neg, math::Neg{}, NotBool, 1)                                           \
  X(abs, math::Abs{}, All, 1)                                               \
  X(sign, math::Sign{}, All, 1)                                             \
  X(floor, math::Floor{}, All, 1)                                           \
  X(ceil, math::Ceil{}, All, 1)                                             \
  X(trunc, math::Trunc{}, All, 1)                                           \
  X(round, math::Round{}, All, 1)                                           \
  X(round_decimals, math::RoundDecimals{p.i0}, Floating, 1)                 \
  X(isnan, math::IsNan{}, All, 1)                                           \
  X(isinf, math::IsInf{}, All, 1)                                           \
  X(isfinite, math::IsFinite{}, All, 1)                                     \
  X(logical_not, math::LogicalNot{}, All, 1)                                \
  X(bitwise_not, math::BitwiseNot{}, IntOrBool, 1)                          \
  X(relu, math::Relu{}, NotBool, 1)                                         \
  X(square, math::Square{}, All, 1)                                         \
  X(exp, math::Exp{}, Floating, 1)                                          \
  X(exp2, math::Exp2{}, Floating, 1)                                        \
  X(log, math::Log{}, Floating, 1)                                          \
  X(log2, math::Log2{}, Floating, 1)                                        \
  X(log10, math::Log10{}, Floating, 1)                                      \
  X(log1p, math::Log1p{}, Floating, 1)                                      \
  X(expm1, math::Expm1{}, Floating, 1)                                      \
  X(sqrt, math::Sqrt{}, Floating, 1)                                        \
  X(rsqrt, math::Rsqrt{}, Floating, 1)                                      \
  X(reciprocal, math::Reciprocal{}, Floating, 1)                            \
  X(sin, math::Sin{}, Floating, 1)                                          \
  X(cos, math::Cos{}, Floating, 1)                                          \
  X(tan, math::Tan{}, Floating, 1)                                          \
  X(tanh, math::Tanh{}, Floating, 1)                                        \
  X(erf, math::Erf{}, Floating, 1)                                          \
  X(erfinv, math::Erfinv{}, Floating, 1)                                    \
  X(erfc, math::Erfc{}, Floating, 1)                                        \
  X(lgamma, math::Lgamma{}, Floating, 1)                                    \
  X(digamma, math::Digamma{}, Floating, 1)                                  \
  X(polygamma, math::Polygamma{p.i0}, Floating, 1)                          \
  X(asin, math::Asin{}, Floating, 1)                                        \
  X(acos, math::Acos{}, Floating, 1)                                        \
  X(atan, math::Atan{}, Floating, 1)                                        \
  X(sinh, math::Sinh{}, Floating, 1)                                        \
  X(cosh, math::Cosh{}, Floating, 1)                                        \
  X(asinh, math::Asinh{}, Floating, 1)                                      \
  X(acosh, math::Acosh{}, Floating, 1)                                      \
  X(atanh, math::Atanh{}, Floating, 1)                                      \
  X(sigmoid, math::Sigmoid{}, Floating, 1)                                  \
  X(silu, math::Silu{}, Floating, 1)                                        \
  X(gelu, math::Gelu{}, Floating, 1)                                        \
  X(gelu_tanh, math::GeluTanh{}, Floating, 1)                               \
  X(nan_to_num, (math::NanToNum{p.f0, p.f1, p.f2}), Floating, 1)            \
  X(clamp_scalar, (ClampScalar<T>{bound<T>(p, 0), bound<T>(p, 1)}), NotBool, 1) \
  X(add, math::Add{}, All, 2)                                               \
  X(add_alpha, (math::AddAlpha<C>{alpha<C>(p)}), All, 2)                    \
  X(sub, math::Sub{}, NotBool, 2)                                           \
  X(mul, math::Mul{}, All, 2)                                               \
  X(div, math::Div{}, Floating, 2)                                          \
  X(div_trunc, math::DivTrunc{}, NotBool, 2)                                \
  X(div_floor, math::DivFloor{}, NotBool, 2)                                \
  X(fmod, math::Fmod{}, NotBool, 2)                                         \
  X(remainder, math::Remainder{}, NotBool, 2)                               \
  X(pow, math::Pow{}, All, 2)                                               \
  X(maximum, math::Maximum{}, All, 2)                                       \
  X(minimum, math::Minimum{}, All, 2)                                       \
  X(fmax, math::Fmax{}, All, 2)                                             \
  X(fmin, math::Fmin{}, All, 2)                                             \
  X(eq, math::Eq{}, All, 2)                                                 \
  X(ne, math::Ne{}, All, 2)                                                 \
  X(lt, math::Lt{}, All, 2)                                                 \
  X(le, math::Le{}, All, 2)                                                 \
  X(gt, math::Gt{}, All, 2)                                                 \
  X(ge, math::Ge{}, All, 2)                                                 \
  X(logical_and, math::LogicalAnd{}, All, 2)                                \
  X(logical_or, math::LogicalOr{}, All, 2)                                  \
  X(logical_xor, math::LogicalXor{}, All, 2)                                \
  X(bitwise_and, math::BitwiseAnd{}, IntOrBool, 2)                          \
  X(bitwise_or, math::BitwiseOr{}, IntOrBool, 2)                            \
  X(bitwise_xor, math::BitwiseXor{}, IntOrBool, 2)                          \
  X(bitwise_left_shift, math::BitwiseLeftShift{}, Integer, 2)               \
  X(bitwise_right_shift, math::BitwiseRightShift{}, Integer, 2)             \
  X(atan2, math::Atan2{}, Floating, 2)                                      \
  X(hypot, math::Hypot{}, Floating, 2)                                      \
  X(xlogy, math::Xlogy{}, Floating, 2)                                      \
  X(copysign, math::CopySign{}, Floating, 2)                                \
  X(nextafter, math::NextAfter{}, Floating, 2)                              \
  X(gelu_backward, math::GeluBackward{}, Floating, 2)                       \
  X(gelu_tanh_backward, math::GeluTanhBackward{}, Floating, 2)              \
  X(threshold_backward, (math::ThresholdBackward<C>{C(p.f0)}), Floating, 2) \
  X(hardtanh_backward, (math::HardtanhBackward<C>{C(p.f0), C(p.f1)}), Floating, 2) \
  X(lerp, math::Lerp{}, Floating, 3)                                        \
  X(addcmul, (Addcmul<T>{alpha<C>(p)}), NotBool, 3)                         \
  X(addcdiv, (math::Addcdiv<C>{alpha<C>(p)}), Floating, 3)
// clang-format on

namespace kiln::cuda {

enum class PointwiseOp {
#define KILN_X(op, f, set, arity) op,
  KILN_CUDA_POINTWISE_OPS(KILN_X)
#undef KILN_X
};

// Per-op values: alpha / value (add_alpha, addcmul, addcdiv) as double and int64 (integer
// dtypes use the latter, exact); decimals / polygamma order in i0; nan_to_num's replacements
// in f0..f2; clamp's bounds (has_lo/has_hi; else the dtype's extremes) in f0/f1 or i0/i1;
// threshold_backward's threshold in f0, hardtanh_backward's bounds in f0/f1.
struct PointwiseParams {
  double f0 = 0, f1 = 0, f2 = 0;
  int64_t i0 = 0, i1 = 0;
  bool has_lo = false, has_hi = false;
};

// Operand 0 of `a` is the output, with the functor's result dtype (bool for comparisons);
// inputs 1..arity have dtype `compute` (where: input 1 is bool). Throws when `compute` is
// outside the op's type set.
void launch_pointwise(PointwiseOp op, const ElementwiseArgs& a, DType compute, const PointwiseParams& p,
                      cudaStream_t stream);
// out = cond ? x : y, with x, y and out of dtype `t` and cond bool.
void launch_where(const ElementwiseArgs& a, DType t, cudaStream_t stream);
// out = x + y for a float32 output and inputs of dtypes x_dtype and y_dtype, one float32 and the
// other float16 or bfloat16, read as they are (autocast's residual adds: float32 + a low-precision
// layer output, without a float32 copy of the latter); the sum is float32's, as the promoted add's.
void launch_add_float_low(const ElementwiseArgs& a, DType x_dtype, DType y_dtype, cudaStream_t stream);

}  // namespace kiln::cuda
