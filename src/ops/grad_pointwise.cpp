// VJP rules of pointwise ops, written with kiln ops so they run in eager
// autograd and trace into ahead-of-time backward graphs alike.
#include "kiln/ops/pointwise.h"
#include "ops/grad_util.h"

namespace kiln {
namespace {

std::vector<Tensor> vjp_add(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  std::vector<Tensor> r(2);
  if (v.needs(0)) r[0] = reduce_grad(v, 0, g);
  if (v.needs(1)) {
    const Scalar& alpha = v.attrs.s(0);
    r[1] = reduce_grad(v, 1, alpha == Scalar(1) ? g : g * alpha);
  }
  return r;
}
KILN_REGISTER_VJP(add, vjp_add);

std::vector<Tensor> vjp_mul(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  std::vector<Tensor> r(2);
  if (v.needs(0)) r[0] = reduce_grad(v, 0, g * v.inputs[1]);
  if (v.needs(1)) r[1] = reduce_grad(v, 1, g * v.inputs[0]);
  return r;
}
KILN_REGISTER_VJP(mul, vjp_mul);

std::vector<Tensor> vjp_to(const VjpCall& v) { return {reduce_grad(v, 0, v.grads[0])}; }
KILN_REGISTER_VJP(to, vjp_to);

}  // namespace
}  // namespace kiln
