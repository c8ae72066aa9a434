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

// arange: (start, end, step, dtype, device). Integral inputs, or an integral
// dtype (start and step truncated first, as torch), step in exact int64;
// otherwise start + i * step in double, then converted.
void arange_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Scalar &start = c.attrs.s(0), &step = c.attrs.s(2);
  bool integral = (!start.is_floating_point() && !step.is_floating_point() && !c.attrs.s(1).is_floating_point()) ||
                  is_integral(outs[0].dtype());
  visit_dtype(outs[0].dtype(), [&]<class T>() {
    T* p = static_cast<T*>(outs[0].data_ptr());
    parallel_for(0, outs[0].numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
      if (integral) {
        int64_t a = start.to_long(), k = step.to_long();
        for (int64_t i = b; i < e; ++i) p[i] = convert<T, int64_t>(a + i * k);
      } else {
        double a = start.to_double(), k = step.to_double();
        for (int64_t i = b; i < e; ++i) p[i] = convert<T, double>(a + static_cast<double>(i) * k);
      }
    });
  });
}

// linspace: (start, end, steps, dtype, device). The first half counts up from
// start, the second down from end (as torch), so both endpoints are exact.
void linspace_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  double a = c.attrs.f(0), z = c.attrs.f(1);
  int64_t n = c.attrs.i(2);
  double step = n > 1 ? (z - a) / static_cast<double>(n - 1) : 0.0;
  int64_t half = n / 2;
  visit_dtype(outs[0].dtype(), [&]<class T>() {
    T* p = static_cast<T*>(outs[0].data_ptr());
    parallel_for(0, n, kElementwiseGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        double v = i < half || n == 1 ? a + step * static_cast<double>(i) : z - step * static_cast<double>(n - 1 - i);
        p[i] = convert<T, double>(v);
      }
    });
  });
}

// eye: (n, m, dtype, device)
void eye_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  fill(outs[0], Scalar(0));
  int64_t n = c.attrs.i(0), m = c.attrs.i(1);
  visit_dtype(outs[0].dtype(), [&]<class T>() {
    T* p = static_cast<T*>(outs[0].data_ptr());
    for (int64_t i = 0; i < std::min(n, m); ++i) p[i * m + i] = convert<T, int64_t>(1);
  });
}

KILN_REGISTER_KERNEL(empty, CPU, empty_kernel);
KILN_REGISTER_KERNEL(full, CPU, full_kernel);
KILN_REGISTER_KERNEL(arange, CPU, arange_kernel);
KILN_REGISTER_KERNEL(linspace, CPU, linspace_kernel);
KILN_REGISTER_KERNEL(eye, CPU, eye_kernel);

}  // namespace
}  // namespace kiln::cpu
