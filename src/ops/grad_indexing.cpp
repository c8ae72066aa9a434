// VJP rules of the indexing family, written with kiln ops (so they trace and
// support double backward where the math allows).
#include "dispatch/dispatch.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/pointwise.h"
#include "kiln/ops/shape.h"
#include "ops/grad_util.h"
#include "ops/meta_util.h"
#include "ops/save_rule.h"

namespace kiln {
namespace {

Tensor zeros_for(const VjpCall& v, size_t i, const Tensor& like) {
  return zeros(v.input_meta[i].sizes, TensorOptions(like.dtype()).device(like.device()));
}

// The input's dim attribute, wrapped.
int64_t dim_attr(const VjpCall& v, size_t attr) {
  return wrap_dim(v.attrs.i(attr), static_cast<int64_t>(v.input_meta[0].sizes.size()), op_name(v.op));
}

// g gathered along dim at index, zero-padded up to the shape of src (src may
// be larger than index in every dim; the extra elements were never read).
Tensor gather_to_src(const VjpCall& v, const Tensor& g, int64_t dim, const Tensor& index) {
  Tensor r = gather(g, dim, index);
  const Shape& ss = v.input_meta[2].sizes;
  if (r.sizes() == IntArrayRef(ss)) return r;
  std::vector<int64_t> pads;
  for (int64_t d = r.dim() - 1; d >= 0; --d) {
    pads.push_back(0);
    pads.push_back(ss[d] - r.sizes()[d]);
  }
  return pad(r, pads);
}

// A 1-d view of t (0-d becomes [1]).
Tensor flat(const Tensor& t) { return t.dim() == 0 ? t.unsqueeze(0) : t.reshape(Shape{-1}); }

std::vector<Tensor> index_inputs(const VjpCall& v, size_t first) {
  return std::vector<Tensor>(v.inputs.begin() + static_cast<int64_t>(first), v.inputs.end());
}

std::vector<Tensor> vjp_gather(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  std::vector<Tensor> r(2);
  if (v.needs(0)) r[0] = scatter_add(zeros_for(v, 0, g), dim_attr(v, 0), v.inputs[1], g);
  return r;
}
KILN_REGISTER_VJP(gather, vjp_gather);
// Note [Saving what the VJP reads]: the gradients need the index alone (sizes are in input_meta).
SaveSet save_index(uint64_t, const Attrs&) { return {uint64_t{1} << 1, 0}; }
KILN_REGISTER_SAVE_RULE(gather, save_index);

std::vector<Tensor> vjp_scatter(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  int64_t dim = dim_attr(v, 0);
  std::vector<Tensor> r(3);
  // Scattered positions were overwritten: no gradient flows to self there.
  if (v.needs(0)) r[0] = v.op == OpId::scatter ? scatter(g, dim, v.inputs[1], Scalar(0)) : g;
  if (v.needs(2)) r[2] = gather_to_src(v, g, dim, v.inputs[1]);
  return r;
}
KILN_REGISTER_VJP(scatter, vjp_scatter);
KILN_REGISTER_SAVE_RULE(scatter, save_index);
KILN_REGISTER_VJP(scatter_add, vjp_scatter);
KILN_REGISTER_SAVE_RULE(scatter_add, save_index);

std::vector<Tensor> vjp_scatter_reduce(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  const Tensor &self = v.inputs[0], &index = v.inputs[1], &src = v.inputs[2], &result = v.outputs[0];
  int64_t dim = dim_attr(v, 0);
  const std::string& reduce = v.attrs.str(1);
  bool include_self = v.attrs.b(2);
  Tensor gs, gsrc;
  if (reduce == "sum") {
    gs = g;
    gsrc = gather(g, dim, index);
  } else if (reduce == "mean") {
    // Each output element is the mean over its count of contributions.
    Tensor n = include_self ? ones_like(g) : zeros_like(g);
    n = scatter_add(n, dim, index, ones_like(src).to(g.dtype()));
    n = masked_fill(n, eq(n, Scalar(0)), Scalar(1));
    gs = g / n;
    gsrc = gather(gs, dim, index);
  } else if (reduce == "amax" || reduce == "amin") {
    // The gradient is shared evenly between the values equal to the result.
    Tensor self_is = eq(self, result).to(g.dtype());
    Tensor src_is = eq(src, gather(result, dim, index)).to(g.dtype());
    // Without include_self, self counts only where nothing was scattered.
    Tensor n = scatter_add(include_self ? self_is : scatter(self_is, dim, index, Scalar(0)), dim, index, src_is);
    Tensor share = g / n;
    gs = self_is * share;
    gsrc = src_is * gather(share, dim, index);
  } else {  // prod: written to stay finite when self or src hold zeros
    Tensor masked_self = masked_fill(self, eq(self, Scalar(0)), Scalar(1));
    Tensor masked_self_result = scatter_reduce(masked_self, dim, index, src, reduce, include_self);
    gs = g * masked_self_result / masked_self;
    Tensor src_zero = eq(src, Scalar(0));
    Tensor n_zeros = gather(scatter_add(zeros_like(self), dim, index, src_zero.to(self.dtype())), dim, index);
    Tensor single_zero = logical_and(src_zero, eq(n_zeros, Scalar(1)));
    // A lone zero: the product of the other values, recomputed with that zero replaced by one.
    Tensor masked_src = masked_fill(src, single_zero, Scalar(1));
    Tensor masked_src_result = scatter_reduce(self, dim, index, masked_src, reduce, include_self);
    Tensor g_single = gather(g * masked_src_result, dim, index);
    Tensor g_other = gather(g * result, dim, index) / masked_fill(src, src_zero, Scalar(1));
    gsrc = where(single_zero, g_single, g_other);
  }
  std::vector<Tensor> r(3);
  // Without include_self, self's values at scattered positions were replaced.
  if (v.needs(0)) r[0] = include_self ? gs : scatter(gs, dim, index, Scalar(0));
  if (v.needs(2)) {
    const Shape& ss = v.input_meta[2].sizes;
    if (gsrc.sizes() != IntArrayRef(ss)) {
      std::vector<int64_t> pads;
      for (int64_t d = gsrc.dim() - 1; d >= 0; --d) {
        pads.push_back(0);
        pads.push_back(ss[d] - gsrc.sizes()[d]);
      }
      gsrc = pad(gsrc, pads);
    }
    r[2] = gsrc;
  }
  return r;
}
KILN_REGISTER_VJP(scatter_reduce, vjp_scatter_reduce);

std::vector<Tensor> vjp_index_add(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  std::vector<Tensor> r(3);
  if (v.needs(0)) r[0] = g;
  if (v.needs(2)) {
    Tensor gs = index_select(g, dim_attr(v, 0), v.inputs[1]);
    const Scalar& alpha = v.attrs.s(1);
    if (!(alpha == Scalar(1))) gs = gs * alpha;
    r[2] = reduce_grad(v, 2, gs.reshape(v.input_meta[2].sizes));
  }
  return r;
}
KILN_REGISTER_VJP(index_add, vjp_index_add);
KILN_REGISTER_SAVE_RULE(index_add, save_index);

std::vector<Tensor> vjp_index_select(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  std::vector<Tensor> r(2);
  if (v.needs(0)) r[0] = index_add(zeros_for(v, 0, g), dim_attr(v, 0), flat(v.inputs[1]), g);
  return r;
}
KILN_REGISTER_VJP(index_select, vjp_index_select);
KILN_REGISTER_SAVE_RULE(index_select, save_index);

std::vector<Tensor> vjp_index(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  std::vector<Tensor> r(v.inputs.size());
  if (v.needs(0)) {
    std::vector<Tensor> in{zeros_for(v, 0, g), g};
    for (const Tensor& t : index_inputs(v, 1)) in.push_back(t);
    r[0] = call_op1(OpId::index_put, std::move(in), {true});  // duplicates accumulate
  }
  return r;
}
KILN_REGISTER_VJP(index, vjp_index);

std::vector<Tensor> vjp_index_put(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  std::vector<Tensor> idx = index_inputs(v, 2);
  std::vector<Tensor> r(v.inputs.size());
  if (v.needs(0)) {
    if (v.attrs.b(0)) {
      r[0] = g;
    } else {
      std::vector<Tensor> in{g, zeros(Shape{}, TensorOptions(g.dtype()).device(g.device()))};
      in.insert(in.end(), idx.begin(), idx.end());
      r[0] = call_op1(OpId::index_put, std::move(in), {false});  // overwritten positions get none
    }
  }
  if (v.needs(1)) {
    std::vector<Tensor> in{g};
    in.insert(in.end(), idx.begin(), idx.end());
    r[1] = reduce_grad(v, 1, call_op1(OpId::index, std::move(in)));
  }
  return r;
}
KILN_REGISTER_VJP(index_put, vjp_index_put);

std::vector<Tensor> vjp_masked_select(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  const Tensor& mask = v.inputs[1];
  std::vector<Tensor> r(2);
  if (v.needs(0)) {
    // Scatter the selected gradients back to the mask's true positions (masked_scatter).
    Shape bs = broadcast_shapes(v.input_meta[0].sizes, mask.sizes(), "masked_select");
    Tensor m = mask.sizes() == IntArrayRef(bs) ? mask : mask.expand(bs);
    bool scalar = bs.empty();  // a 0-d mask is indexed as a one-element 1-d one
    if (scalar) m = m.unsqueeze(0);
    Tensor full_grad = index_put(zeros(m.sizes(), TensorOptions(g.dtype()).device(g.device())), {m}, g);
    r[0] = reduce_grad(v, 0, scalar ? full_grad.squeeze(0) : full_grad);
  }
  return r;
}
KILN_REGISTER_VJP(masked_select, vjp_masked_select);

// sort and topk: each value's gradient goes back to where it came from.
std::vector<Tensor> vjp_sort(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  std::vector<Tensor> r(1);
  if (v.needs(0)) r[0] = scatter(zeros_for(v, 0, g), dim_attr(v, v.op == OpId::topk ? 1 : 0), v.outputs[1], g);
  return r;
}
KILN_REGISTER_VJP(sort, vjp_sort);
KILN_REGISTER_VJP(topk, vjp_sort);

std::vector<Tensor> vjp_embedding(const VjpCall& v) {
  Tensor g = v.grads[0];
  const Tensor& indices = v.inputs[1];
  std::vector<Tensor> r(2);
  if (v.needs(0)) {
    int64_t padding_idx = v.attrs.i(0);
    // The padding row gets no gradient.
    if (padding_idx >= 0) g = masked_fill(g, eq(indices, Scalar(padding_idx)).unsqueeze(-1), Scalar(0));
    int64_t d = v.input_meta[0].sizes[1];
    r[0] = index_add(zeros_for(v, 0, g), 0, flat(indices), g.reshape(Shape{-1, d}));
  }
  return r;
}
KILN_REGISTER_VJP(embedding, vjp_embedding);

}  // namespace
}  // namespace kiln
