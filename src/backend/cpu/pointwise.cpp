// CPU kernels for pointwise ops, each a scalar functor from core/scalar_math.h
// run by the strided loops of loops.h.
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

void mul_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  binary_op(outs[0], c.in(0), c.in(1), compute_dtype(c), math::Mul{});
}
KILN_REGISTER_KERNEL(mul, CPU, mul_kernel);

void to_kernel(const OpCall& c, std::vector<Tensor>& outs) { copy_cpu(outs[0], c.in(0)); }
KILN_REGISTER_KERNEL(to, CPU, to_kernel);

}  // namespace
}  // namespace kiln::cpu
