#include "ops/grad_util.h"

#include "kiln/autograd.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"

namespace kiln {

Tensor sum_to(const Tensor& grad, IntArrayRef shape) {
  if (grad.sizes() == shape) return grad;
  int64_t lead = grad.dim() - static_cast<int64_t>(shape.size());
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < grad.dim(); ++i) {
    if (i < lead) dims.push_back(i);
    else if (shape[i - lead] == 1 && grad.sizes()[i] != 1) dims.push_back(i);
  }
  Tensor r = dims.empty() ? grad : sum(grad, dims, /*keepdim=*/true);
  if (lead > 0 || r.sizes() != shape) r = reshape(r, shape.vec());
  return r;
}

Tensor reduce_grad(const VjpCall& v, size_t i, const Tensor& grad) {
  Tensor g = sum_to(grad, v.input_meta[i].sizes);
  if (g.dtype() != v.input_meta[i].dtype && is_floating_point(v.input_meta[i].dtype)) g = g.to(v.input_meta[i].dtype);
  return g;
}

bool grad_needs_graph(const VjpCall& v) {
  if (!is_grad_enabled()) return false;
  if (v.grads[0].defined() && v.grads[0].requires_grad()) return true;
  for (const Tensor& t : v.inputs)
    if (t.defined() && t.requires_grad()) return true;
  // Ops that save only their output (softmax) have no inputs here; the output requires grad
  // exactly when an input did.
  for (const Tensor& t : v.outputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

}  // namespace kiln
