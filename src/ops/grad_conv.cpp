// VJP rules of the convolution and pooling prims, through their *_backward
// prims. Those are NONDIFF: a double backward (create_graph) through them
// throws instead of silently returning a gradient without history.
#include "dispatch/dispatch.h"
#include "kiln/autograd.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/shape.h"
#include "ops/grad_util.h"

namespace kiln {
namespace {

void check_no_double_backward(const char* op, std::initializer_list<const Tensor*> ts) {
  if (!is_grad_enabled()) return;
  for (const Tensor* t : ts)
    KILN_CHECK(!(t->defined() && t->requires_grad()), op,
               ": not supported yet: double backward (a backward pass with create_graph=true through ", op, ")");
}

std::vector<Tensor> vjp_convolution(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  check_no_double_backward("convolution", {&g, &v.inputs[0], &v.inputs[1]});
  Attrs a(v.attrs.values());
  a.push_back(std::vector<int64_t>{v.needs(0), v.needs(1), v.needs(2) && v.inputs[2].defined()});
  auto gs = call_op(OpId::convolution_backward, {g, v.inputs[0], v.inputs[1]}, a);
  std::vector<Tensor> r(3);
  for (size_t i = 0; i < 3; ++i)
    if (v.needs(i)) r[i] = gs[i];
  return r;
}
KILN_REGISTER_VJP(convolution, vjp_convolution);

std::vector<Tensor> vjp_max_pool2d(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  check_no_double_backward("max_pool2d", {&g});
  return {call_op1(OpId::max_pool2d_backward, {g, v.inputs[0], v.outputs[1]}, v.attrs)};
}
KILN_REGISTER_VJP(max_pool2d, vjp_max_pool2d);

// avg_pool2d saves nothing: the backward only needs the input's shape, given
// as a stride-0 expanded scalar.
std::vector<Tensor> vjp_avg_pool2d(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  check_no_double_backward("avg_pool2d", {&g});
  const TensorMeta& m = v.input_meta[0];
  Tensor shape_only = expand(scalar_tensor(0, TensorOptions(m.dtype).device(m.device)), m.sizes);
  return {call_op1(OpId::avg_pool2d_backward, {g, shape_only}, v.attrs)};
}
KILN_REGISTER_VJP(avg_pool2d, vjp_avg_pool2d);

}  // namespace
}  // namespace kiln
