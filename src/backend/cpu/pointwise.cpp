// CPU kernels for binary and ternary pointwise ops, each a scalar functor from
// core/scalar_math.h run by the strided loops of loops.h.
#include "backend/cpu/pointwise.h"

#include "ops/meta_util.h"

namespace kiln::cpu {

DType compute_dtype(const OpCall& c) { return result_type(c.inputs); }

namespace {

void add_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Scalar& alpha = c.attrs.s(0);
  DType t = compute_dtype(c);
  if (alpha == Scalar(1) || (alpha.is_bool() && alpha.to_bool())) {
    binary_op(outs[0], c.in(0), c.in(1), t, math::Add{});
  } else {
    visit_dtype(t, [&]<class T>() {
      binary_op(outs[0], c.in(0), c.in(1), t, math::AddAlpha<math::opmath_t<T>>{alpha.to<math::opmath_t<T>>()});
    });
  }
}
KILN_REGISTER_KERNEL(add, CPU, add_kernel);

// sub is a composite (add with -alpha); this kernel saves the extra op in eager mode.
void sub_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Scalar& alpha = c.attrs.s(0);
  DType t = compute_dtype(c);
  if (alpha == Scalar(1)) {
    binary_op<TypeSet::NotBool>(outs[0], c.in(0), c.in(1), t, math::Sub{});
  } else {
    visit_in_set<TypeSet::NotBool>(t, [&]<class T>() {
      using C = math::opmath_t<T>;
      C na = math::Neg{}(alpha.to<C>());
      binary_op<TypeSet::NotBool>(outs[0], c.in(0), c.in(1), t, math::AddAlpha<C>{na});
    });
  }
}
KILN_REGISTER_KERNEL(sub, CPU, sub_kernel);

void mul_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  binary_op(outs[0], c.in(0), c.in(1), compute_dtype(c), math::Mul{});
}
KILN_REGISTER_KERNEL(mul, CPU, mul_kernel);

void to_kernel(const OpCall& c, std::vector<Tensor>& outs) { copy_cpu(outs[0], c.in(0)); }
KILN_REGISTER_KERNEL(to, CPU, to_kernel);

// Integer division and modulo by zero raise, as PyTorch's "ZeroDivisionError". The divisor is
// tested as the kernel sees it, converted to the compute dtype: a wrapped scalar 2^40 is 0 in
// int32 (Note [Scalars out of range]).
bool zero_in(int64_t v, DType compute) {
  switch (compute) {
    case DType::UInt8: return static_cast<uint8_t>(v) == 0;
    case DType::Int8: return static_cast<int8_t>(v) == 0;
    case DType::Int16: return static_cast<int16_t>(v) == 0;
    case DType::Int32: return static_cast<int32_t>(v) == 0;
    default: return v == 0;
  }
}
void check_no_int_zero(const Tensor& b, DType compute, const char* op) {
  if (is_floating_point(compute) || b.numel() == 0) return;
  visit_dtype(b.dtype(), [&]<class T>() {
    std::array<const Tensor*, 1> ops{&b};
    StridedIter<1> it(ops);
    bool zero = false;
    it.for_range(0, it.numel, [&](const std::array<char*, 1>& p, const std::array<int64_t, 1>& st, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        const T v = *reinterpret_cast<const T*>(p[0] + i * st[0]);
        if constexpr (std::is_integral_v<T>) zero = zero || zero_in(static_cast<int64_t>(v), compute);
        else zero = zero || !math::detail::truthy(v);
      }
    });
    KILN_CHECK(!zero, op, ": ZeroDivisionError: integer division or modulo by zero (dtype ", compute, ")");
  });
}

void div_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  auto mode = c.attrs.opt_str(0);
  if (!mode) {
    binary_op<TypeSet::Floating>(outs[0], c.in(0), c.in(1), outs[0].dtype(), math::Div{});
    return;
  }
  DType t = compute_dtype(c);
  check_no_int_zero(c.in(1), t, "div");
  if (*mode == "trunc") binary_op<TypeSet::NotBool>(outs[0], c.in(0), c.in(1), t, math::DivTrunc{});
  else binary_op<TypeSet::NotBool>(outs[0], c.in(0), c.in(1), t, math::DivFloor{});
}
KILN_REGISTER_KERNEL(div, CPU, div_kernel);

template <class F>
void mod_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  DType t = compute_dtype(c);
  check_no_int_zero(c.in(1), t, c.name());
  binary_op<TypeSet::NotBool>(outs[0], c.in(0), c.in(1), t, F{});
}
KILN_REGISTER_KERNEL(fmod, CPU, mod_kernel<math::Fmod>);
KILN_REGISTER_KERNEL(remainder, CPU, mod_kernel<math::Remainder>);

// Ops computed in the promoted input dtype (the output may be bool).
template <TypeSet S, class F>
void promoted_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  binary_op<S>(outs[0], c.in(0), c.in(1), compute_dtype(c), F{});
}
KILN_REGISTER_KERNEL(pow, CPU, (promoted_kernel<TypeSet::All, math::Pow>));
KILN_REGISTER_KERNEL(maximum, CPU, (promoted_kernel<TypeSet::All, math::Maximum>));
KILN_REGISTER_KERNEL(minimum, CPU, (promoted_kernel<TypeSet::All, math::Minimum>));
KILN_REGISTER_KERNEL(fmax, CPU, (promoted_kernel<TypeSet::All, math::Fmax>));
KILN_REGISTER_KERNEL(fmin, CPU, (promoted_kernel<TypeSet::All, math::Fmin>));
KILN_REGISTER_KERNEL(eq, CPU, (promoted_kernel<TypeSet::All, math::Eq>));
KILN_REGISTER_KERNEL(ne, CPU, (promoted_kernel<TypeSet::All, math::Ne>));
KILN_REGISTER_KERNEL(lt, CPU, (promoted_kernel<TypeSet::All, math::Lt>));
KILN_REGISTER_KERNEL(le, CPU, (promoted_kernel<TypeSet::All, math::Le>));
KILN_REGISTER_KERNEL(gt, CPU, (promoted_kernel<TypeSet::All, math::Gt>));
KILN_REGISTER_KERNEL(ge, CPU, (promoted_kernel<TypeSet::All, math::Ge>));
KILN_REGISTER_KERNEL(logical_and, CPU, (promoted_kernel<TypeSet::All, math::LogicalAnd>));
KILN_REGISTER_KERNEL(logical_or, CPU, (promoted_kernel<TypeSet::All, math::LogicalOr>));
KILN_REGISTER_KERNEL(logical_xor, CPU, (promoted_kernel<TypeSet::All, math::LogicalXor>));
KILN_REGISTER_KERNEL(bitwise_and, CPU, (promoted_kernel<TypeSet::IntOrBool, math::BitwiseAnd>));
KILN_REGISTER_KERNEL(bitwise_or, CPU, (promoted_kernel<TypeSet::IntOrBool, math::BitwiseOr>));
KILN_REGISTER_KERNEL(bitwise_xor, CPU, (promoted_kernel<TypeSet::IntOrBool, math::BitwiseXor>));
KILN_REGISTER_KERNEL(bitwise_left_shift, CPU, (promoted_kernel<TypeSet::Integer, math::BitwiseLeftShift>));
KILN_REGISTER_KERNEL(bitwise_right_shift, CPU, (promoted_kernel<TypeSet::Integer, math::BitwiseRightShift>));

// Float math: integer inputs were promoted by the meta function; compute in the output's dtype.
template <class F>
void float_binary_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  binary_op<TypeSet::Floating>(outs[0], c.in(0), c.in(1), outs[0].dtype(), F{});
}
KILN_REGISTER_KERNEL(atan2, CPU, float_binary_kernel<math::Atan2>);
KILN_REGISTER_KERNEL(hypot, CPU, float_binary_kernel<math::Hypot>);
KILN_REGISTER_KERNEL(xlogy, CPU, float_binary_kernel<math::Xlogy>);
KILN_REGISTER_KERNEL(copysign, CPU, float_binary_kernel<math::CopySign>);
KILN_REGISTER_KERNEL(nextafter, CPU, float_binary_kernel<math::NextAfter>);

void where_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& out = outs[0];
  if (out.numel() == 0) return;
  DType t = out.dtype();
  Tensor cond = cast_to(c.in(0), DType::Bool);
  visit_dtype(t, [&]<class T>() {
    elementwise<T, bool, T, T>(out, {cond, cast_to(c.in(1), t), cast_to(c.in(2), t)}, math::Where{});
  });
}
KILN_REGISTER_KERNEL(where, CPU, where_kernel);

void lerp_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  ternary_op<TypeSet::Floating>(outs[0], c.in(0), c.in(1), c.in(2), outs[0].dtype(), math::Lerp{});
}
KILN_REGISTER_KERNEL(lerp, CPU, lerp_kernel);

// addcmul/addcdiv are composites; fused kernels keep optimizer steps to one pass.
template <bool Div>
void addc_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& out = outs[0];
  if (out.numel() == 0) return;
  DType t = out.dtype();
  visit_in_set<TypeSet::NotBool>(t, [&]<class T>() {
    using C = math::opmath_t<T>;
    const C v = c.attrs.s(0).to<C>();
    std::array<Tensor, 3> ins{cast_to(c.in(0), t), cast_to(c.in(1), t), cast_to(c.in(2), t)};
    if constexpr (math::is_floating_v<T>) {
      if constexpr (Div) elementwise<T, T, T, T>(out, ins, math::Addcdiv<C>{v});
      else elementwise<T, T, T, T>(out, ins, math::Addcmul<C>{v});
    } else if constexpr (!Div) {
      elementwise<T, T, T, T>(out, ins, [v](T a, T b, T d) { return math::Add{}(a, math::Mul{}(v, math::Mul{}(b, d))); });
    } else {
      KILN_FAIL("addcdiv: integer division is not supported");
    }
  });
}
KILN_REGISTER_KERNEL(addcmul, CPU, addc_kernel<false>);
KILN_REGISTER_KERNEL(addcdiv, CPU, addc_kernel<true>);

}  // namespace
}  // namespace kiln::cpu
