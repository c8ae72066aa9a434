// Helpers for pointwise CPU kernels built on the shared scalar functors
// (src/core/scalar_math.h), so eager and generated code compute alike.
#pragma once
#include "backend/cpu/loops.h"
#include "core/scalar_math.h"
#include "ops/registry.h"

namespace kiln::cpu {

// The C++ types a functor is instantiated for: visit_dtype instantiates every
// branch, so functors that static_assert on their types (float-only math,
// bitwise ops) are only instantiated for the types their set admits. Meta
// functions reject other dtypes first; the run-time failure is a backstop.
enum class TypeSet { All, Floating, IntOrBool, Integer, NotBool };

template <TypeSet S, class T>
inline constexpr bool in_type_set = S == TypeSet::All || (S == TypeSet::Floating && math::is_floating_v<T>) ||
                                    (S == TypeSet::IntOrBool && std::is_integral_v<T>) ||
                                    (S == TypeSet::Integer && math::is_integer_v<T>) ||
                                    (S == TypeSet::NotBool && !std::is_same_v<T, bool>);

// Runs body.template operator()<T>() for the C++ type of `compute`, if it is in S.
template <TypeSet S, class Body>
void visit_in_set(DType compute, const Body& body) {
  visit_dtype(compute, [&]<class T>() {
    if constexpr (in_type_set<S, T>) body.template operator()<T>();
    else KILN_FAIL("internal: pointwise kernel not implemented for dtype ", compute);
  });
}

// out = f(a, ...) computed in dtype `compute` (inputs cast first). The functor's
// result type decides what is written; it is converted to out's dtype if needed.
template <TypeSet S = TypeSet::All, class F, class... Ins>
void pointwise_op(const Tensor& out, DType compute, const F& f, const Ins&... ins) {
  if (out.numel() == 0) return;
  std::array<Tensor, sizeof...(Ins)> cast{cast_to(ins, compute)...};
  visit_in_set<S>(compute, [&]<class T>() {
    using R = decltype(f((void(sizeof(Ins)), T{})...));
    auto run = [&](const Tensor& dst) {
      [&]<size_t... I>(std::index_sequence<I...>) {
        elementwise<R, decltype((void(I), T{}))...>(dst, cast, f);
      }(std::index_sequence_for<Ins...>{});
    };
    if (out.dtype() == dtype_of<R>()) {
      run(out);
    } else {
      Tensor tmp = make_tensor(out.sizes(), dtype_of<R>(), out.device());
      run(tmp);
      copy_cpu(out, tmp);
    }
  });
}

template <TypeSet S = TypeSet::All, class F>
void unary_op(const Tensor& out, const Tensor& a, DType compute, const F& f) {
  pointwise_op<S>(out, compute, f, a);
}
template <TypeSet S = TypeSet::All, class F>
void binary_op(const Tensor& out, const Tensor& a, const Tensor& b, DType compute, const F& f) {
  pointwise_op<S>(out, compute, f, a, b);
}
template <TypeSet S = TypeSet::All, class F>
void ternary_op(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, DType compute, const F& f) {
  pointwise_op<S>(out, compute, f, a, b, c);
}

// The dtype inputs are converted to before the functor runs: the promoted
// input dtype (result_type), which for comparison ops differs from the output's.
DType compute_dtype(const OpCall& c);

}  // namespace kiln::cpu
