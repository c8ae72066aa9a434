// VJP rules of the convolution and pooling prims, through their *_backward
// prims. Those are NONDIFF: a double backward (create_graph) through them
// throws instead of silently returning a gradient without history.
#include "dispatch/dispatch.h"
#include "kiln/autograd.h"
#include "kiln/nn/functional.h"
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

// A max pool's gradient from its indices (flat positions within each input
// plane of the last three dims), written with ops: scatter_add per plane.
// Differentiable (scatter_add's VJP is a gather), so double backward works.
Tensor max_pool3d_grad(const Tensor& g, const Tensor& indices, const TensorMeta& in) {
  const int64_t r = static_cast<int64_t>(in.sizes.size());
  int64_t plane = 1, out_plane = 1, planes = 1;
  for (int64_t d = 0; d < r; ++d) (d < r - 3 ? planes : plane) *= in.sizes[d];
  for (int64_t d = r - 3; d < r; ++d) out_plane *= g.sizes()[d];
  Tensor z = zeros(Shape{planes, plane}, TensorOptions(g.dtype()).device(g.device()));
  Tensor gx = scatter_add(z, 1, reshape(indices, Shape{planes, out_plane}), reshape(g, Shape{planes, out_plane}));
  return reshape(gx, in.sizes);
}

std::vector<Tensor> vjp_max_pool3d(const VjpCall& v) {
  return {max_pool3d_grad(v.grads[0], v.outputs[1], v.input_meta[0])};
}
KILN_REGISTER_VJP(max_pool3d, vjp_max_pool3d);
KILN_REGISTER_VJP(adaptive_max_pool3d, vjp_max_pool3d);

std::vector<Tensor> vjp_avg_pool3d(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  check_no_double_backward("avg_pool3d", {&g});
  const TensorMeta& m = v.input_meta[0];
  Tensor shape_only = expand(scalar_tensor(0, TensorOptions(m.dtype).device(m.device)), m.sizes);
  return {call_op1(OpId::avg_pool3d_backward, {g, shape_only}, v.attrs)};
}
KILN_REGISTER_VJP(avg_pool3d, vjp_avg_pool3d);

// fold is unfold's adjoint and the other way round.
std::vector<Tensor> vjp_im2col(const VjpCall& v) {
  const Shape& s = v.input_meta[0].sizes;
  Shape hw(s.end() - 2, s.end());
  return {nn::functional::fold(v.grads[0], hw, v.attrs.ints(0), v.attrs.ints(1), v.attrs.ints(2), v.attrs.ints(3))};
}
KILN_REGISTER_VJP(im2col, vjp_im2col);
std::vector<Tensor> vjp_col2im(const VjpCall& v) {
  return {nn::functional::unfold(v.grads[0], v.attrs.ints(1), v.attrs.ints(2), v.attrs.ints(3), v.attrs.ints(4))};
}
KILN_REGISTER_VJP(col2im, vjp_col2im);

}  // namespace
}  // namespace kiln
