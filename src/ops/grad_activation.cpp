// VJP rules of the pointwise activations (activation.cpp), written with kiln ops so they run
// in eager autograd, trace into ahead-of-time backward graphs and differentiate again. Masks
// follow torch's backward kernels, including which side of a comparison a NaN falls on.
#include "kiln/ops/pointwise.h"
#include "ops/activation_util.h"
#include "ops/grad_util.h"

namespace kiln {
namespace {

using Rule = Tensor (*)(const VjpCall& v, const Tensor& g);

// A unary rule: the gradient of input 0 from g (the output gradient) and what the op saved.
template <Rule R>
std::vector<Tensor> unary(const VjpCall& v) {
  std::vector<Tensor> r(v.input_meta.size());
  if (v.needs(0)) r[0] = reduce_grad(v, 0, R(v, v.grads[0]));
  return r;
}
const Tensor& x_(const VjpCall& v) { return v.inputs[0]; }

// torch's hardtanh_backward: zero where x <= min_val or x >= max_val, so the bounds themselves
// get none and a NaN (both comparisons false) passes the gradient.
Tensor g_hardtanh(const VjpCall& v, const Tensor& g) {
  const Tensor& x = x_(v);
  auto [lo, hi] = hardtanh_bounds(x.dtype(), v.attrs);
  return where(logical_or(le(x, lo), ge(x, hi)), Scalar(0), g);
}
KILN_REGISTER_VJP(hardtanh, unary<g_hardtanh>);

}  // namespace
}  // namespace kiln
