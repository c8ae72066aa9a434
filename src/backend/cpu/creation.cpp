// CPU kernels for factory ops.
#include "backend/cpu/loops.h"
#include "ops/registry.h"

namespace kiln::cpu {
namespace {

void empty_kernel(const OpCall&, std::vector<Tensor>&) {}

void fill(const Tensor& out, const Scalar& v) {
  visit_dtype(out.dtype(), [&]<class T>() {
    T value;
    if constexpr (std::is_same_v<T, bool>) value = v.to_bool();
    else if constexpr (std::is_integral_v<T>) value = static_cast<T>(v.to_long());
    else value = T(static_cast<float>(v.to_double()));
    if constexpr (std::is_same_v<T, double>) value = v.to_double();
    T* p = static_cast<T*>(out.data_ptr());
    int64_t n = out.numel();
    if (out.is_contiguous()) {
      parallel_for(0, n, kElementwiseGrain, [&](int64_t b, int64_t e) { std::fill(p + b, p + e, value); });
    } else {
      elementwise<T>(out, {}, [value]() { return value; });
    }
  });
}

void full_kernel(const OpCall& c, std::vector<Tensor>& outs) { fill(outs[0], c.attrs.s(1)); }

KILN_REGISTER_KERNEL(empty, CPU, empty_kernel);
KILN_REGISTER_KERNEL(full, CPU, full_kernel);

}  // namespace
}  // namespace kiln::cpu
