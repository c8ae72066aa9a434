// Copies, casts and fills through the strided elementwise kernel (elementwise_kernel.cuh).
#include <type_traits>

#include "backend/cuda/elementwise.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "core/dtype_dispatch.h"
#include "core/half.h"

namespace kiln::cuda {
namespace {

// kiln::convert (core/convert.h) for device code: the same rules (through float for
// Half/BFloat16, non-zero is true). TODO: mark convert.h KILN_HD and use it directly (that
// rebuilds every CPU kernel, so it waits for a quiet moment).
template <class To>
struct Convert {
  template <class From>
  KILN_HD To operator()(From v) const {
    constexpr bool from16 = is_reduced_float_v<From>;
    constexpr bool to16 = is_reduced_float_v<To>;
    if constexpr (std::is_same_v<To, From>)
      return v;
    else if constexpr (std::is_same_v<To, bool>) {
      if constexpr (from16)
        return static_cast<float>(v) != 0.0f;
      else
        return v != From(0);
    } else if constexpr (from16)
      return static_cast<To>(static_cast<float>(v));
    else if constexpr (to16)
      return To(static_cast<float>(v));
    else
      return static_cast<To>(v);
  }
};

template <class T>
struct Constant {
  T value;
  KILN_HD T operator()() const { return value; }
};

}  // namespace

void launch_copy(const ElementwiseArgs& a, cudaStream_t stream) {
  if (a.numel == 0) return;
  visit_dtype(a.ops[0].dtype, [&]<class To>() {
    visit_dtype(a.ops[1].dtype, [&]<class From>() { launch_elementwise<To, From>(a, Convert<To>{}, stream); });
  });
}

void launch_fill(const ElementwiseArgs& a, double fvalue, int64_t ivalue, bool value_is_int, cudaStream_t stream) {
  if (a.numel == 0) return;
  visit_dtype(a.ops[0].dtype, [&]<class T>() {
    // As the CPU fill: bool from truthiness, integers from the integer value, Half/BFloat16
    // through float, float and double from the double.
    T v;
    double d = value_is_int ? static_cast<double>(ivalue) : fvalue;
    if constexpr (std::is_same_v<T, bool>)
      v = value_is_int ? ivalue != 0 : fvalue != 0.0;
    else if constexpr (is_reduced_float_v<T>)
      v = T(static_cast<float>(d));
    else if constexpr (std::is_integral_v<T>)
      v = value_is_int ? static_cast<T>(ivalue) : static_cast<T>(fvalue);
    else
      v = static_cast<T>(d);
    launch_elementwise<T>(a, Constant<T>{v}, stream);
  });
}

}  // namespace kiln::cuda
