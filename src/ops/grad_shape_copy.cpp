// VJP rules for shape copies, written with kiln ops so they trace into
// ahead-of-time backward graphs and support double backward.
#include "kiln/ops/creation.h"
#include "kiln/ops/pointwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "dispatch/dispatch.h"
#include "ops/grad_util.h"

namespace kiln {
namespace {

bool legacy_empty(const TensorMeta& m) { return m.sizes.size() == 1 && m.sizes[0] == 0; }

// cat: each input's gradient is its slice of the output gradient.
std::vector<Tensor> vjp_cat(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  int64_t dim = wrap_dim(v.attrs.i(0), g.dim(), "cat");
  std::vector<Tensor> out(v.input_meta.size());
  int64_t offset = 0;
  for (size_t i = 0; i < v.input_meta.size(); ++i) {
    const TensorMeta& m = v.input_meta[i];
    if (legacy_empty(m) && g.dim() != 1) {
      if (v.needs(i)) out[i] = zeros(m.sizes, TensorOptions(m.dtype).device(m.device));
      continue;
    }
    int64_t len = m.sizes[dim];
    if (v.needs(i)) out[i] = reduce_grad(v, i, narrow(g, dim, offset, len));
    offset += len;
  }
  return out;
}
KILN_REGISTER_VJP(cat, vjp_cat);

// _to_copy: the gradient goes back to the source's device and dtype (Note [Device moves]).
std::vector<Tensor> vjp_to_copy(const VjpCall& v) {
  const TensorMeta& m = v.input_meta[0];
  return {call_op1(OpId::_to_copy, {v.grads[0]}, {m.dtype, m.device})};
}
KILN_REGISTER_VJP(_to_copy, vjp_to_copy);

// stack: input i's gradient is the i-th slice along the new dim.
std::vector<Tensor> vjp_stack(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  int64_t dim = wrap_dim(v.attrs.i(0), g.dim(), "stack");
  std::vector<Tensor> out(v.input_meta.size());
  for (size_t i = 0; i < v.input_meta.size(); ++i)
    if (v.needs(i)) out[i] = reduce_grad(v, i, select(g, dim, static_cast<int64_t>(i)));
  return out;
}
KILN_REGISTER_VJP(stack, vjp_stack);

std::vector<Tensor> vjp_flip(const VjpCall& v) { return {flip(v.grads[0], v.attrs.ints(0))}; }
KILN_REGISTER_VJP(flip, vjp_flip);

std::vector<Tensor> vjp_roll(const VjpCall& v) {
  std::vector<int64_t> back;
  for (int64_t s : v.attrs.ints(0)) back.push_back(-s);
  return {roll(v.grads[0], back, v.attrs.ints(1))};
}
KILN_REGISTER_VJP(roll, vjp_roll);

std::vector<Tensor> vjp_tril(const VjpCall& v) { return {tril(v.grads[0], v.attrs.i(0))}; }
std::vector<Tensor> vjp_triu(const VjpCall& v) { return {triu(v.grads[0], v.attrs.i(0))}; }
KILN_REGISTER_VJP(tril, vjp_tril);
KILN_REGISTER_VJP(triu, vjp_triu);

// repeat: view the gradient as [r0, s0, r1, s1, ...] and sum over the r dims.
std::vector<Tensor> vjp_repeat(const VjpCall& v) {
  const auto& reps = v.attrs.ints(0);
  const Shape& in = v.input_meta[0].sizes;
  int64_t lead = static_cast<int64_t>(reps.size()) - static_cast<int64_t>(in.size());
  Shape split;
  std::vector<int64_t> sum_dims;
  for (size_t d = 0; d < reps.size(); ++d) {
    int64_t s = static_cast<int64_t>(d) < lead ? 1 : in[d - lead];
    sum_dims.push_back(static_cast<int64_t>(split.size()));
    split.insert(split.end(), {reps[d], s});
  }
  Tensor g = v.grads[0];
  if (g.numel() == 0) return {zeros(in, TensorOptions(g.dtype()).device(g.device()))};
  g = sum(reshape(g, split), sum_dims);
  return {reshape(g, in)};
}
KILN_REGISTER_VJP(repeat, vjp_repeat);

// Pads only dim `d` of an ndim-D tensor with (l, r) zeros.
Tensor pad_dim(const Tensor& x, int64_t d, int64_t l, int64_t r) {
  int64_t k = x.dim() - 1 - d;
  std::vector<int64_t> p(2 * (k + 1), 0);
  p[2 * k] = l;
  p[2 * k + 1] = r;
  return pad(x, p);
}

// pad: constant → the gradient cropped back (pad with negated widths);
// reflect/replicate → per padded dim, the mirrored/edge parts of the
// gradient are added onto the input positions they were read from
// (the modes are separable, so dims are undone one at a time).
std::vector<Tensor> vjp_pad(const VjpCall& v) {
  const auto& p = v.attrs.ints(0);
  const std::string& mode = v.attrs.str(1);
  Tensor g = v.grads[0];
  if (mode == "constant") {
    std::vector<int64_t> neg;
    for (int64_t x : p) neg.push_back(-x);
    return {pad(g, neg)};
  }
  const Shape& in = v.input_meta[0].sizes;
  int64_t nd = static_cast<int64_t>(in.size());
  for (size_t k = 0; k < p.size() / 2; ++k) {
    int64_t d = nd - 1 - static_cast<int64_t>(k);
    int64_t l = p[2 * k], r = p[2 * k + 1], n = in[d];
    if (l == 0 && r == 0) continue;
    Tensor gi = narrow(g, d, l, n);
    const std::vector<int64_t> dv{d};
    if (mode == "reflect") {
      if (l > 0) gi = add(gi, pad_dim(flip(narrow(g, d, 0, l), dv), d, 1, n - 1 - l));
      if (r > 0) gi = add(gi, pad_dim(flip(narrow(g, d, l + n, r), dv), d, n - 1 - r, 1));
    } else {
      if (l > 0) gi = add(gi, pad_dim(sum(narrow(g, d, 0, l), dv, true), d, 0, n - 1));
      if (r > 0) gi = add(gi, pad_dim(sum(narrow(g, d, l + n, r), dv, true), d, n - 1, 0));
    }
    g = gi;
  }
  return {g};
}
KILN_REGISTER_VJP(pad, vjp_pad);

}  // namespace
}  // namespace kiln
