// Helpers shared by VJP rules.
#pragma once
#include "ops/registry.h"

namespace kiln {

// Sums a broadcast gradient back to `shape` (the inverse of broadcasting).
Tensor sum_to(const Tensor& grad, IntArrayRef shape);
// The gradient for input i reduced to its shape and converted to its dtype.
Tensor reduce_grad(const VjpCall& v, size_t i, const Tensor& grad);

// A unary op's rule, written as the gradient of input 0 from g (the output gradient) and
// what the op saved; unary_vjp<R> is the VJP that registers it.
using UnaryRule = Tensor (*)(const VjpCall& v, const Tensor& g);
template <UnaryRule R>
std::vector<Tensor> unary_vjp(const VjpCall& v) {
  std::vector<Tensor> r(v.input_meta.size());
  if (v.needs(0)) r[0] = reduce_grad(v, 0, R(v, v.grads[0]));
  return r;
}
inline const Tensor& vjp_input0(const VjpCall& v) { return v.inputs[0]; }

// Whether the gradient being computed is itself to be differentiated (grad mode on in a
// create_graph pass, with the output gradient or a saved input or output requiring grad): then a VJP must be
// written with differentiable ops, not a NONDIFF fused backward op (Note [Fused batch_norm backward]).
bool grad_needs_graph(const VjpCall& v);

}  // namespace kiln
