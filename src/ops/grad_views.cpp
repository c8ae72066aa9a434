// VJP rules of view ops.
#include <algorithm>
#include "kiln/autograd.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/pointwise.h"
#include "ops/grad_util.h"
#include "ops/save_rule.h"

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

// Note [Split's derivative]
// split, chunk and unbind record one node for all their pieces, not one slice or select node per
// piece: their gradient is one cat (unbind: stack) of the pieces' gradients, zeros where a piece
// has none (OpNode::apply), as PyTorch's split_backward, where slices would zero-pad every
// piece to the input's size and the engine would sum the pads. The pieces are still views of
// the input (backend_call makes a VIEW op's outputs as aliases), so writes through them and
// Note [In-place on a view] / Note [View rebase] work as for any view.
std::vector<Tensor> vjp_split_cat(const VjpCall& v) {
  const Shape& in = v.input_meta[0].sizes;
  if (v.grads.empty()) return {zeros(in, TensorOptions(v.input_meta[0].dtype).device(v.input_meta[0].device))};
  // split: (split_sizes, dim); chunk: (chunks, dim); unbind: (dim).
  const int64_t dim = v.op == OpId::unbind ? v.attrs.i(0) : v.attrs.i(1);
  const int64_t d = wrap_dim(dim, static_cast<int64_t>(in.size()), op_name(v.op));
  return {v.op == OpId::unbind ? stack(v.grads, d) : cat(v.grads, d)};
}
KILN_REGISTER_VJP(split, vjp_split_cat);
KILN_REGISTER_VJP(chunk, vjp_split_cat);
KILN_REGISTER_VJP(unbind, vjp_split_cat);

// Storage positions of every element of a strided layout, as an int64 tensor
// of shape `sizes` (offset + sum_d i_d * stride_d).
Tensor storage_positions(IntArrayRef sizes, IntArrayRef strides, int64_t offset, Device device) {
  Tensor idx = full({}, offset, TensorOptions(kInt64).device(device));
  int64_t nd = static_cast<int64_t>(sizes.size());
  for (int64_t d = 0; d < nd; ++d) {
    std::vector<int64_t> shape(nd, 1);
    shape[d] = sizes[d];
    idx = idx + arange(sizes[d], TensorOptions(kInt64).device(device)).mul(strides[d]).view(shape);
  }
  return idx.expand(sizes.vec());
}

// The gradient of a view given by (sizes, strides, offset) over the storage of
// an input laid out as (in_sizes, in_strides, in_offset): the gradient is
// accumulated into a flat buffer covering both layouts (index_add sums
// overlapping windows), then read back at the input's positions. Written with
// ops, so it differentiates again.
// An input whose own elements overlap (an expanded dim) shares each storage position's gradient
// evenly among the elements at it, as PyTorch's as_strided_backward: `split_shared`.
Tensor view_backward(const Tensor& g, IntArrayRef in_sizes, IntArrayRef in_strides, int64_t in_offset,
                     IntArrayRef sizes, IntArrayRef strides, int64_t offset, bool split_shared = false) {
  TensorOptions o = TensorOptions(g.dtype()).device(g.device());
  if (compute_numel(in_sizes) == 0) return zeros(in_sizes.vec(), o);
  auto extent = [](IntArrayRef sz, IntArrayRef st, int64_t off) {
    int64_t hi = off;
    for (size_t d = 0; d < sz.size(); ++d) hi += (sz[d] - 1) * st[d];
    return hi;
  };
  int64_t lo = std::min(in_offset, offset);
  int64_t hi = std::max(extent(in_sizes, in_strides, in_offset), compute_numel(sizes) ? extent(sizes, strides, offset) : lo);
  Tensor buf = zeros({hi - lo + 1}, o);
  if (compute_numel(sizes) > 0) {
    Tensor out_pos = storage_positions(sizes, strides, offset - lo, g.device()).reshape({-1});
    buf = index_add(buf, 0, out_pos, g.reshape({-1}));
  }
  Tensor in_pos = storage_positions(in_sizes, in_strides, in_offset - lo, g.device()).reshape({-1});
  if (split_shared) {
    // Every position an input element is at is counted at least once: no division by zero.
    Tensor count = index_add(zeros({hi - lo + 1}, o), 0, in_pos, ones({in_pos.sizes()[0]}, o));
    return index_select(buf, 0, in_pos).div(index_select(count, 0, in_pos)).view(in_sizes.vec());
  }
  return index_select(buf, 0, in_pos).view(in_sizes.vec());
}

std::vector<Tensor> vjp_diagonal(const VjpCall& v) {
  // Lay the input out contiguously and ask diagonal's meta where the diagonal is.
  const Shape& in = v.input_meta[0].sizes;
  Shape in_strides = contiguous_strides(in);
  Tensor meta = make_meta_tensor(in, in_strides, v.input_meta[0].dtype, v.input_meta[0].device);
  std::vector<Tensor> args{meta};
  auto m = op_info(OpId::diagonal).meta(OpCall{OpId::diagonal, args, v.attrs})[0];
  return {view_backward(v.grads[0], in, in_strides, 0, m.sizes, m.strides, m.storage_offset)};
}
KILN_REGISTER_VJP(diagonal, vjp_diagonal);

// Whether two elements of a layout share a memory position (a dim of stride 0, sliding windows):
// the dims of size > 1 by stride, each stride past everything the smaller ones reach.
bool overlaps_itself(IntArrayRef sizes, IntArrayRef strides) {
  std::vector<std::pair<int64_t, int64_t>> dims;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] > 1) dims.emplace_back(strides[d] < 0 ? -strides[d] : strides[d], sizes[d]);
  std::sort(dims.begin(), dims.end());
  int64_t reach = 0;
  for (auto [stride, size] : dims) {
    if (stride <= reach) return true;
    reach += stride * (size - 1);
  }
  return false;
}

std::vector<Tensor> vjp_as_strided(const VjpCall& v) {
  // as_strided addresses the input's storage, so the input's own geometry matters.
  const Tensor& x = v.inputs[0];
  int64_t offset = v.attrs.none(2) ? x.storage_offset() : v.attrs.i(2);
  return {view_backward(v.grads[0], x.sizes(), x.strides(), x.storage_offset(), v.attrs.ints(0), v.attrs.ints(1),
                        offset, overlaps_itself(x.sizes(), x.strides()))};
}
KILN_REGISTER_VJP(as_strided, vjp_as_strided);
// Note [Saving what the VJP reads]: the input's layout only (a write into it after the view was
// taken, as the view rebase's own in-place op does, is no error).
SaveSet save_layout(uint64_t, const Attrs&) {
  SaveSet s;
  s.inputs = 1;
  s.geometry = 1;
  return s;
}
KILN_REGISTER_SAVE_RULE(as_strided, save_layout);

}  // namespace
}  // namespace kiln
