// CUDA kernels for the pointwise prims: dtype promotion and broadcasting as the CPU kernels
// (backend/cpu/pointwise*.cpp) do them, then one launch of pointwise.cu's strided kernel.
#include <limits>
#include <optional>
#include <type_traits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/pointwise_ops.h"
#include "core/dtype_dispatch.h"
#include "dispatch/dispatch.h"
#include "ops/activation_util.h"
#include "ops/meta_util.h"
#include "ops/registry.h"

namespace kiln::cuda {
namespace {

using P = PointwiseOp;

// `x` as an operand of a kernel writing `out`: on out's device (a 0-d CPU tensor, e.g. a
// wrapped number, is uploaded), in dtype `t` (converted through a staging tensor, as the CPU
// kernels' cast_to), broadcast to out's sizes (a view with stride 0).
Tensor operand(const Tensor& x, DType t, const Tensor& out) {
  Tensor y = x;
  if (y.is_cpu() && y.dim() == 0) {
    // A wrapped number: filled on the device by a one-element kernel, not copied (a copy
    // from pageable memory would wait for the stream).
    Tensor d = make_tensor({}, t, out.device());
    visit_dtype(y.dtype(), [&]<class T>() {
      T v = *static_cast<const T*>(y.data_ptr());
      if constexpr (std::is_integral_v<T>)
        launch_fill(make_elementwise_args({&d}), 0.0, static_cast<int64_t>(v), true,
                    current_cuda_stream(out.device().index));
      else if constexpr (is_reduced_float_v<T>)
        launch_fill(make_elementwise_args({&d}), static_cast<double>(static_cast<float>(v)), 0, false,
                    current_cuda_stream(out.device().index));
      else
        launch_fill(make_elementwise_args({&d}), static_cast<double>(v), 0, false,
                    current_cuda_stream(out.device().index));
    });
    y = d;
  } else if (y.device() != out.device() || y.dtype() != t) {
    Tensor d = make_tensor(y.sizes(), t, out.device());
    get_backend(DeviceType::CUDA)->copy(d, y);
    y = d;
  }
  if (y.sizes() == out.sizes()) return y;
  int64_t nd = out.dim(), ny = y.dim();
  Shape strides(static_cast<size_t>(nd), 0);
  for (int64_t i = 0; i < ny; ++i) {
    int64_t di = nd - ny + i;
    if (y.size(i) != 1) strides[static_cast<size_t>(di)] = y.stride(i);
  }
  return make_view(y, out.sizes(), strides, y.storage_offset());
}

bool returns_bool(P op) {
  switch (op) {
    case P::isnan:
    case P::isinf:
    case P::isfinite:
    case P::logical_not:
    case P::eq:
    case P::ne:
    case P::lt:
    case P::le:
    case P::gt:
    case P::ge:
    case P::logical_and:
    case P::logical_or:
    case P::logical_xor:
      return true;
    default:
      return false;
  }
}

// out = op(inputs...) computed in `compute`; the functor's result is converted to out's dtype
// when they differ (as pointwise_op on the CPU).
void run(P op, const Tensor& out, std::initializer_list<Tensor> inputs, DType compute, const PointwiseParams& p = {}) {
  if (out.numel() == 0) return;
  int d = out.device().index;
  DeviceGuard g(d);
  std::vector<Tensor> ins;
  for (const Tensor& x : inputs) ins.push_back(operand(x, compute, out));
  DType r = returns_bool(op) ? DType::Bool : compute;
  Tensor dst = out.dtype() == r ? out : make_tensor(out.sizes(), r, out.device());
  ElementwiseArgs a;
  switch (ins.size()) {
    case 1:
      a = make_elementwise_args({&dst, &ins[0]});
      break;
    case 2:
      a = make_elementwise_args({&dst, &ins[0], &ins[1]});
      break;
    default:
      a = make_elementwise_args({&dst, &ins[0], &ins[1], &ins[2]});
      break;
  }
  launch_pointwise(op, a, compute, p, current_cuda_stream(d));
  if (!dst.is_same(out)) copy_same_device(out, dst);
}

DType compute_dtype(const OpCall& c) { return result_type(c.inputs); }

template <P Op>
void same_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  run(Op, outs[0], {c.in(0)}, c.in(0).dtype());
}
// Float math: integer inputs were promoted by the meta function; compute in the output's dtype.
template <P Op>
void float_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  run(Op, outs[0], {c.in(0)}, outs[0].dtype());
}
template <P Op>
void promoted_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  run(Op, outs[0], {c.in(0), c.in(1)}, compute_dtype(c));
}
template <P Op>
void float_binary_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  run(Op, outs[0], {c.in(0), c.in(1)}, outs[0].dtype());
}

KILN_REGISTER_KERNEL(neg, CUDA, same_kernel<P::neg>);
KILN_REGISTER_KERNEL(abs, CUDA, same_kernel<P::abs>);
KILN_REGISTER_KERNEL(sign, CUDA, same_kernel<P::sign>);
KILN_REGISTER_KERNEL(floor, CUDA, same_kernel<P::floor>);
KILN_REGISTER_KERNEL(ceil, CUDA, same_kernel<P::ceil>);
KILN_REGISTER_KERNEL(trunc, CUDA, same_kernel<P::trunc>);
KILN_REGISTER_KERNEL(isnan, CUDA, same_kernel<P::isnan>);
KILN_REGISTER_KERNEL(isinf, CUDA, same_kernel<P::isinf>);
KILN_REGISTER_KERNEL(isfinite, CUDA, same_kernel<P::isfinite>);
KILN_REGISTER_KERNEL(logical_not, CUDA, same_kernel<P::logical_not>);
KILN_REGISTER_KERNEL(bitwise_not, CUDA, same_kernel<P::bitwise_not>);
KILN_REGISTER_KERNEL(relu, CUDA, same_kernel<P::relu>);

KILN_REGISTER_KERNEL(exp, CUDA, float_kernel<P::exp>);
KILN_REGISTER_KERNEL(exp2, CUDA, float_kernel<P::exp2>);
KILN_REGISTER_KERNEL(log, CUDA, float_kernel<P::log>);
KILN_REGISTER_KERNEL(log2, CUDA, float_kernel<P::log2>);
KILN_REGISTER_KERNEL(log10, CUDA, float_kernel<P::log10>);
KILN_REGISTER_KERNEL(log1p, CUDA, float_kernel<P::log1p>);
KILN_REGISTER_KERNEL(expm1, CUDA, float_kernel<P::expm1>);
KILN_REGISTER_KERNEL(sqrt, CUDA, float_kernel<P::sqrt>);
KILN_REGISTER_KERNEL(rsqrt, CUDA, float_kernel<P::rsqrt>);
KILN_REGISTER_KERNEL(reciprocal, CUDA, float_kernel<P::reciprocal>);
KILN_REGISTER_KERNEL(sin, CUDA, float_kernel<P::sin>);
KILN_REGISTER_KERNEL(cos, CUDA, float_kernel<P::cos>);
KILN_REGISTER_KERNEL(tan, CUDA, float_kernel<P::tan>);
KILN_REGISTER_KERNEL(tanh, CUDA, float_kernel<P::tanh>);
KILN_REGISTER_KERNEL(erf, CUDA, float_kernel<P::erf>);
KILN_REGISTER_KERNEL(erfinv, CUDA, float_kernel<P::erfinv>);
KILN_REGISTER_KERNEL(erfc, CUDA, float_kernel<P::erfc>);
KILN_REGISTER_KERNEL(lgamma, CUDA, float_kernel<P::lgamma>);
KILN_REGISTER_KERNEL(digamma, CUDA, float_kernel<P::digamma>);
KILN_REGISTER_KERNEL(asin, CUDA, float_kernel<P::asin>);
KILN_REGISTER_KERNEL(acos, CUDA, float_kernel<P::acos>);
KILN_REGISTER_KERNEL(atan, CUDA, float_kernel<P::atan>);
KILN_REGISTER_KERNEL(sinh, CUDA, float_kernel<P::sinh>);
KILN_REGISTER_KERNEL(cosh, CUDA, float_kernel<P::cosh>);
KILN_REGISTER_KERNEL(asinh, CUDA, float_kernel<P::asinh>);
KILN_REGISTER_KERNEL(acosh, CUDA, float_kernel<P::acosh>);
KILN_REGISTER_KERNEL(atanh, CUDA, float_kernel<P::atanh>);
KILN_REGISTER_KERNEL(sigmoid, CUDA, float_kernel<P::sigmoid>);
KILN_REGISTER_KERNEL(silu, CUDA, float_kernel<P::silu>);
// square(bool) is int64 (torch computes pow(x, 2)): compute in the output's dtype.
KILN_REGISTER_KERNEL(square, CUDA, float_kernel<P::square>);

void gelu_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  run(c.attrs.str(0) == "tanh" ? P::gelu_tanh : P::gelu, outs[0], {c.in(0)}, outs[0].dtype());
}
KILN_REGISTER_KERNEL(gelu, CUDA, gelu_kernel);
// _gelu_backward (grad_out, x; approximate) (Note [Fused norm and activation backward]): the
// functors of the CPU kernel, in the output's (x's) dtype.
void gelu_backward_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  run(c.attrs.str(0) == "tanh" ? P::gelu_tanh_backward : P::gelu_backward, outs[0], {c.in(0), c.in(1)},
      outs[0].dtype());
}
KILN_REGISTER_KERNEL(_gelu_backward, CUDA, gelu_backward_kernel);
// threshold_backward / hardtanh_backward: math::ThresholdBackward / HardtanhBackward, as the CPU's.
void threshold_backward_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  PointwiseParams p;
  p.f0 = c.attrs.s(0).to_double();
  run(P::threshold_backward, outs[0], {c.in(0), c.in(1)}, outs[0].dtype(), p);
}
KILN_REGISTER_KERNEL(threshold_backward, CUDA, threshold_backward_kernel);
void hardtanh_backward_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  PointwiseParams p;
  p.f0 = c.attrs.s(0).to_double();
  p.f1 = c.attrs.s(1).to_double();
  run(P::hardtanh_backward, outs[0], {c.in(0), c.in(1)}, outs[0].dtype(), p);
}
KILN_REGISTER_KERNEL(hardtanh_backward, CUDA, hardtanh_backward_kernel);

void round_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  PointwiseParams p;
  p.i0 = c.attrs.i(0);
  run(p.i0 == 0 ? P::round : P::round_decimals, outs[0], {c.in(0)}, c.in(0).dtype(), p);
}
KILN_REGISTER_KERNEL(round, CUDA, round_kernel);

void polygamma_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  PointwiseParams p;
  p.i0 = c.attrs.i(0);
  run(P::polygamma, outs[0], {c.in(0)}, outs[0].dtype(), p);
}
KILN_REGISTER_KERNEL(polygamma, CUDA, polygamma_kernel);

// The largest finite value of a floating type, nan_to_num's default for +inf.
double max_finite(DType t) {
  switch (t) {
    case DType::Float16:
      return 65504.0;
    case DType::BFloat16:
      return 3.38953138925153547590e38;
    case DType::Float32:
      return std::numeric_limits<float>::max();
    default:
      return std::numeric_limits<double>::max();
  }
}

void nan_to_num_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  DType t = c.in(0).dtype();
  if (!is_floating_point(t)) {
    copy_same_device(outs[0], c.in(0));  // integers and bool have no NaN or inf
    return;
  }
  double hi = max_finite(t);
  PointwiseParams p;
  p.f0 = c.attrs.opt_f(0).value_or(0.0);
  p.f1 = c.attrs.opt_f(1).value_or(hi);
  p.f2 = c.attrs.opt_f(2).value_or(-hi);
  run(P::nan_to_num, outs[0], {c.in(0)}, t, p);
}
KILN_REGISTER_KERNEL(nan_to_num, CUDA, nan_to_num_kernel);

void clamp_scalar_bounds(const Tensor& out, const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  PointwiseParams p;
  p.has_lo = lo.has_value();
  p.has_hi = hi.has_value();
  if (lo) {
    p.f0 = lo->to_double();
    p.i0 = lo->to_long();
  }
  if (hi) {
    p.f1 = hi->to_double();
    p.i1 = hi->to_long();
  }
  run(P::clamp_scalar, out, {x}, out.dtype(), p);
}
void clamp_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  clamp_scalar_bounds(outs[0], c.in(0), c.attrs.opt_s(0), c.attrs.opt_s(1));
}
KILN_REGISTER_KERNEL(clamp, CUDA, clamp_kernel);
void hardtanh_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  auto [lo, hi] = hardtanh_bounds(c.in(0).dtype(), c.attrs);
  clamp_scalar_bounds(outs[0], c.in(0), lo, hi);
}
KILN_REGISTER_KERNEL(hardtanh, CUDA, hardtanh_kernel);

// ----- binary

PointwiseParams alpha_params(const Scalar& alpha, bool negate) {
  PointwiseParams p;
  p.f0 = negate ? -alpha.to_double() : alpha.to_double();
  // Wrapping negation, as math::Neg on integers.
  p.i0 = negate ? static_cast<int64_t>(0ull - static_cast<uint64_t>(alpha.to_long())) : alpha.to_long();
  return p;
}

// Whether x + y into out is a float32 sum of a float32 tensor and a float16/bfloat16 one on out's
// device (launch_add_float_low reads the low-precision one as it is).
bool float_plus_low(const Tensor& x, const Tensor& y, const Tensor& out) {
  auto low = [](DType t) { return t == DType::BFloat16 || t == DType::Float16; };
  return out.dtype() == DType::Float32 && x.device() == out.device() && y.device() == out.device() &&
         ((x.dtype() == DType::Float32 && low(y.dtype())) || (low(x.dtype()) && y.dtype() == DType::Float32));
}

void add_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Scalar& alpha = c.attrs.s(0);
  const bool one = alpha == Scalar(1) || (alpha.is_bool() && alpha.to_bool());
  if (one && outs[0].numel() > 0 && float_plus_low(c.in(0), c.in(1), outs[0])) {
    const Tensor& out = outs[0];
    DeviceGuard g(out.device().index);
    Tensor x = operand(c.in(0), c.in(0).dtype(), out), y = operand(c.in(1), c.in(1).dtype(), out);
    launch_add_float_low(make_elementwise_args({&out, &x, &y}), x.dtype(), y.dtype(),
                         current_cuda_stream(out.device().index));
    return;
  }
  if (one)
    run(P::add, outs[0], {c.in(0), c.in(1)}, compute_dtype(c));
  else
    run(P::add_alpha, outs[0], {c.in(0), c.in(1)}, compute_dtype(c), alpha_params(alpha, false));
}
KILN_REGISTER_KERNEL(add, CUDA, add_kernel);

void sub_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Scalar& alpha = c.attrs.s(0);
  DType t = compute_dtype(c);
  KILN_CHECK(t != DType::Bool, "sub: not supported for bool tensors; use logical_xor");
  if (alpha == Scalar(1))
    run(P::sub, outs[0], {c.in(0), c.in(1)}, t);
  else
    run(P::add_alpha, outs[0], {c.in(0), c.in(1)}, t, alpha_params(alpha, true));
}
KILN_REGISTER_KERNEL(sub, CUDA, sub_kernel);

KILN_REGISTER_KERNEL(mul, CUDA, promoted_kernel<P::mul>);

void to_kernel(const OpCall& c, std::vector<Tensor>& outs) { copy_same_device(outs[0], c.in(0)); }
KILN_REGISTER_KERNEL(to, CUDA, to_kernel);

// Integer division and modulo by zero raise, as on the CPU (PyTorch's "ZeroDivisionError").
// The check reads the divisor back (a synchronization), only for integer dtypes, converted to the
// compute dtype as the kernel sees it (a wrapped scalar 2^40 is 0 in int32).
void check_no_int_zero(const Tensor& b, DType compute, const char* op) {
  if (is_floating_point(compute) || b.numel() == 0) return;
  Tensor as_computed = make_tensor(b.sizes(), compute, kCPU);
  get_backend(b.is_cpu() ? DeviceType::CPU : DeviceType::CUDA)->copy(as_computed, b);
  Tensor host = make_tensor(b.sizes(), DType::Int64, kCPU);
  get_backend(DeviceType::CPU)->copy(host, as_computed);
  const int64_t* v = static_cast<const int64_t*>(host.data_ptr());
  bool zero = false;
  for (int64_t i = 0; i < host.numel(); ++i) zero = zero || v[i] == 0;
  KILN_CHECK(!zero, op, ": ZeroDivisionError: integer division or modulo by zero (dtype ", compute, ")");
}

void div_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  auto mode = c.attrs.opt_str(0);
  if (!mode) {
    run(P::div, outs[0], {c.in(0), c.in(1)}, outs[0].dtype());
    return;
  }
  DType t = compute_dtype(c);
  check_no_int_zero(c.in(1), t, "div");
  run(*mode == "trunc" ? P::div_trunc : P::div_floor, outs[0], {c.in(0), c.in(1)}, t);
}
KILN_REGISTER_KERNEL(div, CUDA, div_kernel);

template <P Op>
void mod_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  DType t = compute_dtype(c);
  check_no_int_zero(c.in(1), t, c.name());
  run(Op, outs[0], {c.in(0), c.in(1)}, t);
}
KILN_REGISTER_KERNEL(fmod, CUDA, mod_kernel<P::fmod>);
KILN_REGISTER_KERNEL(remainder, CUDA, mod_kernel<P::remainder>);

KILN_REGISTER_KERNEL(pow, CUDA, promoted_kernel<P::pow>);
KILN_REGISTER_KERNEL(maximum, CUDA, promoted_kernel<P::maximum>);
KILN_REGISTER_KERNEL(minimum, CUDA, promoted_kernel<P::minimum>);
KILN_REGISTER_KERNEL(fmax, CUDA, promoted_kernel<P::fmax>);
KILN_REGISTER_KERNEL(fmin, CUDA, promoted_kernel<P::fmin>);
KILN_REGISTER_KERNEL(eq, CUDA, promoted_kernel<P::eq>);
KILN_REGISTER_KERNEL(ne, CUDA, promoted_kernel<P::ne>);
KILN_REGISTER_KERNEL(lt, CUDA, promoted_kernel<P::lt>);
KILN_REGISTER_KERNEL(le, CUDA, promoted_kernel<P::le>);
KILN_REGISTER_KERNEL(gt, CUDA, promoted_kernel<P::gt>);
KILN_REGISTER_KERNEL(ge, CUDA, promoted_kernel<P::ge>);
KILN_REGISTER_KERNEL(logical_and, CUDA, promoted_kernel<P::logical_and>);
KILN_REGISTER_KERNEL(logical_or, CUDA, promoted_kernel<P::logical_or>);
KILN_REGISTER_KERNEL(logical_xor, CUDA, promoted_kernel<P::logical_xor>);
KILN_REGISTER_KERNEL(bitwise_and, CUDA, promoted_kernel<P::bitwise_and>);
KILN_REGISTER_KERNEL(bitwise_or, CUDA, promoted_kernel<P::bitwise_or>);
KILN_REGISTER_KERNEL(bitwise_xor, CUDA, promoted_kernel<P::bitwise_xor>);
KILN_REGISTER_KERNEL(bitwise_left_shift, CUDA, promoted_kernel<P::bitwise_left_shift>);
KILN_REGISTER_KERNEL(bitwise_right_shift, CUDA, promoted_kernel<P::bitwise_right_shift>);
KILN_REGISTER_KERNEL(atan2, CUDA, float_binary_kernel<P::atan2>);
KILN_REGISTER_KERNEL(hypot, CUDA, float_binary_kernel<P::hypot>);
KILN_REGISTER_KERNEL(xlogy, CUDA, float_binary_kernel<P::xlogy>);
KILN_REGISTER_KERNEL(copysign, CUDA, float_binary_kernel<P::copysign>);
KILN_REGISTER_KERNEL(nextafter, CUDA, float_binary_kernel<P::nextafter>);

// ----- ternary

void where_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& out = outs[0];
  if (out.numel() == 0) return;
  int d = out.device().index;
  DeviceGuard g(d);
  DType t = out.dtype();
  Tensor cond = operand(c.in(0), DType::Bool, out), x = operand(c.in(1), t, out), y = operand(c.in(2), t, out);
  launch_where(make_elementwise_args({&out, &cond, &x, &y}), t, current_cuda_stream(d));
}
KILN_REGISTER_KERNEL(where, CUDA, where_kernel);

void lerp_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  run(P::lerp, outs[0], {c.in(0), c.in(1), c.in(2)}, outs[0].dtype());
}
KILN_REGISTER_KERNEL(lerp, CUDA, lerp_kernel);

template <bool Div>
void addc_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  DType t = outs[0].dtype();
  KILN_CHECK(!Div || is_floating_point(t), "addcdiv: integer division is not supported");
  run(Div ? P::addcdiv : P::addcmul, outs[0], {c.in(0), c.in(1), c.in(2)}, t, alpha_params(c.attrs.s(0), false));
}
KILN_REGISTER_KERNEL(addcmul, CUDA, addc_kernel<false>);
KILN_REGISTER_KERNEL(addcdiv, CUDA, addc_kernel<true>);

}  // namespace
}  // namespace kiln::cuda
