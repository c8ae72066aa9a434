// The CUDA pointwise kernels: every op of pointwise_ops.h is its core/scalar_math.h functor run
// by one strided elementwise kernel (contiguous fast path, 32-bit index fast path), so CUDA
// computes what the CPU kernels and generated code compute.
#include <limits>
#include <type_traits>
#include <utility>

#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/cuda/pointwise_ops.h"
#include "core/dtype_dispatch.h"
#include "core/scalar_math.h"

namespace kiln::cuda {
namespace {

enum class TypeSet { All, Floating, IntOrBool, Integer, NotBool };
template <TypeSet S, class T>
inline constexpr bool in_type_set = S == TypeSet::All || (S == TypeSet::Floating && math::is_floating_v<T>) ||
                                    (S == TypeSet::IntOrBool && std::is_integral_v<T>) ||
                                    (S == TypeSet::Integer && math::is_integer_v<T>) ||
                                    (S == TypeSet::NotBool && !std::is_same_v<T, bool>);

// clamp with scalar bounds (the CPU kernel's lambda, as a functor for device code).
template <class T>
struct ClampScalar {
  T lo, hi;
  KILN_HD T operator()(T v) const { return math::Clamp{}(v, lo, hi); }
};

// Integer addcmul: a + value * b * c with wrapping integer math (the CPU kernel's lambda).
template <class T>
struct Addcmul {
  math::opmath_t<T> value;
  KILN_HD T operator()(T a, T b, T c) const {
    if constexpr (math::is_floating_v<T>)
      return math::Addcmul<math::opmath_t<T>>{value}(a, b, c);
    else
      return math::Add{}(a, math::Mul{}(T(value), math::Mul{}(b, c)));
  }
};

template <class C>
C alpha(const PointwiseParams& p) {
  if constexpr (std::is_integral_v<C>)
    return static_cast<C>(p.i0);
  else
    return static_cast<C>(p.f0);
}

// clamp's bound `which` (0 low, 1 high) in T, the dtype's extreme when absent.
template <class T>
T bound(const PointwiseParams& p, int which) {
  using C = math::opmath_t<T>;
  bool has = which == 0 ? p.has_lo : p.has_hi;
  if constexpr (math::is_floating_v<T>) {
    C inf = std::numeric_limits<C>::infinity();
    return T(has ? static_cast<C>(which == 0 ? p.f0 : p.f1) : (which == 0 ? -inf : inf));
  } else {
    if (!has) return which == 0 ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
    return static_cast<T>(which == 0 ? p.i0 : p.i1);
  }
}

template <class T, int Arity, class F>
void run(const ElementwiseArgs& a, const F& f, cudaStream_t s) {
  [&]<size_t... I>(std::index_sequence<I...>) {
    using R = decltype(f((void(I), T{})...));
    // The host picked the output's dtype from pointwise_ops.h; a functor returning another
    // type would write out of bounds.
    KILN_CHECK(a.ops[0].dtype == dtype_of<R>(), "internal: CUDA pointwise output dtype ", a.ops[0].dtype,
               " but the functor returns ", dtype_of<R>());
    launch_elementwise<R, decltype((void(I), T{}))...>(a, f, s);
  }
  (std::make_index_sequence<Arity>{});
}

template <class T>
void launch_for(PointwiseOp op, const ElementwiseArgs& a, const PointwiseParams& p, cudaStream_t s) {
  using C = math::opmath_t<T>;
  (void)sizeof(C);
  switch (op) {
#define KILN_X(name, functor, set, arity)                                   \
  case PointwiseOp::name:                                                   \
    if constexpr (in_type_set<TypeSet::set, T>) {                           \
      run<T, arity>(a, functor, s);                                         \
      return;                                                               \
    } else {                                                                \
      KILN_FAIL(#name ": not supported on cuda for dtype ", dtype_of<T>()); \
    }
    KILN_CUDA_POINTWISE_OPS(KILN_X)
#undef KILN_X
  }
  KILN_FAIL("internal: unknown CUDA pointwise op");
}

}  // namespace

void launch_pointwise(PointwiseOp op, const ElementwiseArgs& a, DType compute, const PointwiseParams& p,
                      cudaStream_t stream) {
  if (a.numel == 0) return;
  visit_dtype(compute, [&]<class T>() { launch_for<T>(op, a, p, stream); });
}

namespace {
struct AddAsFloat {
  template <class X, class Y>
  KILN_HD float operator()(X x, Y y) const {
    return static_cast<float>(x) + static_cast<float>(y);
  }
};
}  // namespace

void launch_add_float_low(const ElementwiseArgs& a, DType x_dtype, DType y_dtype, cudaStream_t stream) {
  if (a.numel == 0) return;
  const DType low = x_dtype == DType::Float32 ? y_dtype : x_dtype;
  KILN_CHECK((x_dtype == DType::Float32) != (y_dtype == DType::Float32) &&
                 (low == DType::BFloat16 || low == DType::Float16),
             "internal: launch_add_float_low takes float32 and float16/bfloat16 inputs, got ", x_dtype, " and ",
             y_dtype);
  auto go = [&]<class L>() {
    if (x_dtype == DType::Float32)
      launch_elementwise<float, float, L>(a, AddAsFloat{}, stream);
    else
      launch_elementwise<float, L, float>(a, AddAsFloat{}, stream);
  };
  if (low == DType::BFloat16)
    go.template operator()<BFloat16>();
  else
    go.template operator()<Half>();
}

void launch_where(const ElementwiseArgs& a, DType t, cudaStream_t stream) {
  if (a.numel == 0) return;
  visit_dtype(t, [&]<class T>() { launch_elementwise<T, bool, T, T>(a, math::Where{}, stream); });
}

}  // namespace kiln::cuda
