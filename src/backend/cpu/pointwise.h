// Helpers for pointwise CPU kernels built on the shared scalar functors
// (src/core/scalar_math.h), so eager and generated code compute alike.
#pragma once
#include "backend/cpu/loops.h"
#include "core/scalar_math.h"
#include "ops/registry.h"

namespace kiln::cpu {

// out = f(a) computed in dtype `compute` (input cast first). The functor's
// result type decides what is written; it is converted to out's dtype.
template <class F>
void unary_op(const Tensor& out, const Tensor& a, DType compute, const F& f) {
  Tensor ac = cast_to(a, compute);
  visit_dtype(compute, [&]<class T>() {
    using R = decltype(f(T{}));
    if (out.dtype() == dtype_of<R>()) {
      elementwise<R, T>(out, {ac}, f);
    } else {
      Tensor tmp = make_tensor(out.sizes(), dtype_of<R>(), out.device());
      elementwise<R, T>(tmp, {ac}, f);
      copy_cpu(out, tmp);
    }
  });
}

template <class F>
void binary_op(const Tensor& out, const Tensor& a, const Tensor& b, DType compute, const F& f) {
  Tensor ac = cast_to(a, compute), bc = cast_to(b, compute);
  visit_dtype(compute, [&]<class T>() {
    using R = decltype(f(T{}, T{}));
    if (out.dtype() == dtype_of<R>()) {
      elementwise<R, T, T>(out, {ac, bc}, f);
    } else {
      Tensor tmp = make_tensor(out.sizes(), dtype_of<R>(), out.device());
      elementwise<R, T, T>(tmp, {ac, bc}, f);
      copy_cpu(out, tmp);
    }
  });
}

template <class F>
void ternary_op(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, DType compute, const F& f) {
  Tensor ac = cast_to(a, compute), bc = cast_to(b, compute), cc = cast_to(c, compute);
  visit_dtype(compute, [&]<class T>() {
    using R = decltype(f(T{}, T{}, T{}));
    if (out.dtype() == dtype_of<R>()) {
      elementwise<R, T, T, T>(out, {ac, bc, cc}, f);
    } else {
      Tensor tmp = make_tensor(out.sizes(), dtype_of<R>(), out.device());
      elementwise<R, T, T, T>(tmp, {ac, bc, cc}, f);
      copy_cpu(out, tmp);
    }
  });
}

// The dtype inputs are converted to before the functor runs: the promoted
// input dtype (result_type), which for comparison ops differs from the output's.
DType compute_dtype(const OpCall& c);

}  // namespace kiln::cpu
