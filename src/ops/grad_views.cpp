// VJP rules of view ops.
#include "kiln/autograd.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/shape.h"
#include "ops/grad_util.h"

namespace kiln {
namespace {

// Zero-pads g along dim d with `before` and `after` entries.
Tensor pad_dim(const Tensor& g, int64_t d, int64_t before, int64_t after) {
  if (before == 0 && after == 0) return g;
  std::vector<int64_t> p(2 * (g.dim() - d), 0);
  p[p.size() - 2] = before;
  p[p.size() - 1] = after;
  return pad(g, p);
}

std::vector<Tensor> vjp_reshape_back(const VjpCall& v) { return {reshape(v.grads[0], v.input_meta[0].sizes)}; }
KILN_REGISTER_VJP(view, vjp_reshape_back);
KILN_REGISTER_VJP(squeeze, vjp_reshape_back);
KILN_REGISTER_VJP(unsqueeze, vjp_reshape_back);

std::vector<Tensor> vjp_permute(const VjpCall& v) {
  const auto& dims = v.attrs.ints(0);
  int64_t nd = static_cast<int64_t>(dims.size());
  std::vector<int64_t> inv(nd);
  for (int64_t i = 0; i < nd; ++i) inv[dims[i] < 0 ? dims[i] + nd : dims[i]] = i;
  return {permute(v.grads[0], inv)};
}
KILN_REGISTER_VJP(permute, vjp_permute);

std::vector<Tensor> vjp_expand(const VjpCall& v) { return {sum_to(v.grads[0], v.input_meta[0].sizes)}; }
KILN_REGISTER_VJP(expand, vjp_expand);

std::vector<Tensor> vjp_select(const VjpCall& v) {
  const Shape& in = v.input_meta[0].sizes;
  int64_t nd = static_cast<int64_t>(in.size());
  int64_t d = v.attrs.i(0) < 0 ? v.attrs.i(0) + nd : v.attrs.i(0);
  int64_t idx = v.attrs.i(1) < 0 ? v.attrs.i(1) + in[d] : v.attrs.i(1);
  return {pad_dim(unsqueeze(v.grads[0], d), d, idx, in[d] - idx - 1)};
}
KILN_REGISTER_VJP(select, vjp_select);

std::vector<Tensor> vjp_slice(const VjpCall& v) {
  const Shape& in = v.input_meta[0].sizes;
  int64_t nd = static_cast<int64_t>(in.size());
  int64_t d = v.attrs.i(0) < 0 ? v.attrs.i(0) + nd : v.attrs.i(0);
  int64_t size = in[d], start = v.attrs.i(1), end = v.attrs.i(2), step = v.attrs.i(3);
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  Tensor g = v.grads[0];
  int64_t m = g.sizes()[d];
  if (m == 0) return {zeros(in, TensorOptions(g.dtype()).device(g.device()))};
  if (step > 1) {
    // Interleave step-1 zeros after each element: [.., m, ..] → [.., m, step, ..] → [.., m*step, ..].
    Tensor u = pad_dim(unsqueeze(g, d + 1), d + 1, 0, step - 1);
    Shape merged = g.sizes().vec();
    merged[d] = m * step;
    g = slice(reshape(u, merged), d, 0, (m - 1) * step + 1);
  }
  int64_t covered = g.sizes()[d];
  return {pad_dim(g, d, start, size - start - covered)};
}
KILN_REGISTER_VJP(slice, vjp_slice);

// diagonal / as_strided: scatter the gradient through the same view of a
// zero tensor. First order only (the scatter is not recorded).
Tensor scatter_through_view(const VjpCall& v, const Tensor& g) {
  KILN_CHECK(!g.requires_grad(), op_name(v.op), ": not supported yet: double backward");
  const TensorMeta& m = v.input_meta[0];
  Tensor z = zeros(m.sizes, TensorOptions(g.dtype()).device(g.device()));
  NoGradGuard no_grad;
  if (v.op == OpId::diagonal) {
    z.diagonal(v.attrs.i(0), v.attrs.i(1), v.attrs.i(2)).copy_(g);
    return z;
  }
  // as_strided addresses the input's storage; the gradient is laid out over a
  // contiguous buffer holding the input (offsets relative to its own offset).
  KILN_FAIL("as_strided: not supported yet: the derivative of as_strided");
}
std::vector<Tensor> vjp_diagonal(const VjpCall& v) { return {scatter_through_view(v, v.grads[0])}; }
std::vector<Tensor> vjp_as_strided(const VjpCall& v) { return {scatter_through_view(v, v.grads[0])}; }
KILN_REGISTER_VJP(diagonal, vjp_diagonal);
KILN_REGISTER_VJP(as_strided, vjp_as_strided);

}  // namespace
}  // namespace kiln
