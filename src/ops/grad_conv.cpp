// VJP rules of the convolution and pooling prims, through their *_backward
// prims. convolution_backward has its own VJP (so convolutions take gradients of
// any order); the pooling ones are NONDIFF: a double backward (create_graph)
// through them throws instead of silently returning a gradient without history.
#include "dispatch/dispatch.h"
#include "kiln/autograd.h"
#include "kiln/nn/functional.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/pointwise.h"
#include "kiln/ops/shape.h"
#include "ops/grad_util.h"
#include "ops/save_rule.h"

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
  Attrs a(v.attrs.values());
  a.push_back(std::vector<int64_t>{v.needs(0), v.needs(1), v.needs(2)});
  auto gs = call_op(OpId::convolution_backward, {g, v.inputs[0], v.inputs[1]}, a);
  std::vector<Tensor> r(3);
  for (size_t i = 0; i < 3; ++i)
    if (v.needs(i)) r[i] = gs[i];
  return r;
}
KILN_REGISTER_VJP(convolution, vjp_convolution);
// Note [Saving what the VJP reads]: the bias gradient is a sum of the output gradient.
SaveSet save_convolution(uint64_t, const Attrs&) { return {uint64_t{3}, 0}; }
KILN_REGISTER_SAVE_RULE(convolution, save_convolution);

// The convolution is bilinear, out = B(x, w) + b, and its backward gives (B(., w)^T g,
// B(x, .)^T g, sum g). Differentiating those along (ggx, ggw, ggb):
//   d/dg = B(ggx, w) + B(x, ggw) + ggb,  d/dx = B(., ggw)^T g,  d/dw = B(ggx, .)^T g,
// that is convolutions and convolution_backwards again (PyTorch's _convolution_double_backward).
std::vector<Tensor> vjp_convolution_backward(const VjpCall& v) {
  const Tensor &go = v.inputs[0], &x = v.inputs[1], &w = v.inputs[2];
  const std::vector<int64_t>& mask = v.attrs.ints(6);
  auto given = [&](size_t k) { return mask[k] != 0 && v.grads[k].defined(); };
  const std::vector<AttrValue>& all = v.attrs.values();
  const Attrs conv(std::vector<AttrValue>(all.begin(), all.begin() + 6));
  auto backward = [&](const Tensor& x_, const Tensor& w_, size_t which) {
    Attrs a(conv.values());
    std::vector<int64_t> m(3, 0);
    m[which] = 1;
    a.push_back(std::move(m));
    return call_op(OpId::convolution_backward, {go, x_, w_}, a)[which];
  };
  std::vector<Tensor> r(3);
  if (v.needs(0)) {
    Tensor gg;
    auto add_term = [&gg](const Tensor& t) { gg = gg.defined() ? add(gg, t) : t; };
    if (given(0)) add_term(call_op1(OpId::convolution, {v.grads[0], w, Tensor()}, conv));
    if (given(1)) add_term(call_op1(OpId::convolution, {x, v.grads[1], Tensor()}, conv));
    if (given(2)) {
      Shape cs(static_cast<size_t>(go.dim()), 1);
      cs[1] = go.sizes()[1];
      add_term(expand(reshape(v.grads[2], cs), go.sizes().vec()));
    }
    r[0] = gg.defined() ? gg : zeros_like(go);
  }
  if (v.needs(1)) r[1] = given(1) ? backward(x, v.grads[1], 0) : zeros_like(x);
  if (v.needs(2)) r[2] = given(0) ? backward(v.grads[0], w, 1) : zeros_like(w);
  return r;
}
KILN_REGISTER_VJP(convolution_backward, vjp_convolution_backward);

std::vector<Tensor> vjp_max_pool2d(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  check_no_double_backward("max_pool2d", {&g});
  return {call_op1(OpId::max_pool2d_backward, {g, v.inputs[0], v.outputs[1]}, v.attrs)};
}
KILN_REGISTER_VJP(max_pool2d, vjp_max_pool2d);
// Note [Saving what the VJP reads]: the input and the indices, not the pooled values (as PyTorch's
// max_pool*_with_indices): a write into the result is no error.
SaveSet save_input_and_indices(uint64_t, const Attrs&) { return {uint64_t{1}, uint64_t{1} << 1}; }
SaveSet save_indices(uint64_t, const Attrs&) { return {0, uint64_t{1} << 1}; }
KILN_REGISTER_SAVE_RULE(max_pool2d, save_input_and_indices);

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
KILN_REGISTER_SAVE_RULE(max_pool3d, save_indices);
KILN_REGISTER_SAVE_RULE(adaptive_max_pool3d, save_indices);

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
