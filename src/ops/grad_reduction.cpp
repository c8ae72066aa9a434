// VJP rules of reductions and scans, written with kiln ops so they run in eager
// autograd and trace into ahead-of-time backward graphs alike.
#include <cmath>
#include <limits>

#include "kiln/ops/creation.h"
#include "kiln/ops/pointwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "dispatch/dispatch.h"
#include "ops/grad_util.h"
#include "ops/meta_util.h"
#include "ops/save_rule.h"

namespace kiln {
namespace {
using Ints = std::vector<int64_t>;

// The reduced dims of input 0 and the shape a kept-dim result has.
struct Red {
  std::vector<bool> mask;
  Shape in_sizes, keep_sizes;
  Ints dims;     // the reduced dims, wrapped (every dim for an empty list)
  double n = 1;  // elements per reduced slice
};
Red red_of(const VjpCall& v, const Ints& dims) {
  Red r;
  r.in_sizes = v.input_meta[0].sizes;
  int64_t nd = static_cast<int64_t>(r.in_sizes.size());
  r.mask = dim_mask(dims, nd, op_name(v.op));
  r.keep_sizes = reduced_shape(r.in_sizes, r.mask, true);
  for (int64_t d = 0; d < nd; ++d)
    if (r.mask[d]) r.dims.push_back(d), r.n *= static_cast<double>(r.in_sizes[d]);
  return r;
}
// A reduction's result (or its grad) with the reduced dims kept as size 1.
Tensor keep(const Tensor& t, const Red& r) {
  if (t.sizes() == IntArrayRef(r.keep_sizes)) return t;
  // A 0-d result means every dim was reduced: all kept sizes are 1, so expand is exact.
  return t.dim() == 0 ? expand(t, r.keep_sizes) : reshape(t, r.keep_sizes);
}
Tensor expand_back(const Tensor& t, const Red& r) { return expand(keep(t, r), r.in_sizes); }
// The gradient in input 0's dtype (a reduction may have changed it).
Tensor as_input(const VjpCall& v, const Tensor& g) {
  DType t = v.input_meta[0].dtype;
  return g.dtype() != t && is_floating_point(t) ? g.to(t) : g;
}
Tensor ksum(const Tensor& t, const Red& r) { return sum(t, r.dims, /*keepdim=*/true); }

std::vector<Tensor> vjp_sum(const VjpCall& v) {
  Red r = red_of(v, v.attrs.ints(0));
  return {as_input(v, expand_back(v.grads[0], r))};
}
KILN_REGISTER_VJP(sum, vjp_sum);

std::vector<Tensor> vjp_mean(const VjpCall& v) {
  Red r = red_of(v, v.attrs.ints(0));
  return {as_input(v, div(expand_back(v.grads[0], r), Scalar(r.n)))};
}
KILN_REGISTER_VJP(mean, vjp_mean);

// d prod / d x_i is the product of the other elements of the slice: y / x_i with
// no zero in the slice; with exactly one zero, only the zero's position gets the
// product of the non-zeros; with two or more, every gradient is 0.
std::vector<Tensor> vjp_prod(const VjpCall& v) {
  Red r = red_of(v, v.attrs.ints(0));
  const Tensor& x = v.inputs[0];
  Tensor g = keep(v.grads[0], r);
  Tensor is_zero = eq(x, Scalar(0));
  Tensor x_safe = where(is_zero, Scalar(1), x);
  Tensor nz = ksum(is_zero, r);
  // prod over a dim list: the public API takes one dim, so go through the op.
  Tensor pn = call_op1(OpId::prod, {x_safe}, {r.dims, true, std::monostate{}});
  Tensor no_zero = div(pn, x_safe);
  Tensor grad = where(eq(nz, Scalar(0)), no_zero, where(logical_and(eq(nz, Scalar(1)), is_zero), pn, Scalar(0)));
  return {as_input(v, mul(grad, g))};
}
KILN_REGISTER_VJP(prod, vjp_prod);

// amax/amin (and max()/min(), which are amax/amin over every dim): the gradient
// is shared evenly among the elements equal to the result; a NaN result is
// equal to the NaNs it came from (torch's evenly_distribute_backward).
std::vector<Tensor> vjp_amax(const VjpCall& v) {
  Red r = red_of(v, v.attrs.ints(0));
  const Tensor& x = v.inputs[0];
  Tensor y = keep(v.outputs[0], r);
  Tensor hit = logical_or(eq(x, y), logical_and(isnan(x), isnan(y)));
  Tensor share = div(keep(v.grads[0], r), ksum(hit, r));
  return {where(hit, share, Scalar(0))};
}
KILN_REGISTER_VJP(amax, vjp_amax);
KILN_REGISTER_VJP(amin, vjp_amax);

// A value-selecting reduction over `dim` (max/min, median, kthvalue, mode): the
// gradient goes to the returned index (a one-hot over dim).
Tensor to_selected_index(const VjpCall& v, int64_t dim) {
  Red r = red_of(v, Ints{dim});
  const Shape& s = r.in_sizes;
  if (s.empty()) return keep(v.grads[0], r);
  int64_t d = r.dims.empty() ? 0 : r.dims[0];
  Shape ar_shape(s.size(), 1);
  ar_shape[d] = s[d];
  Tensor ar = reshape(arange(s[d], TensorOptions(kInt64).device(v.input_meta[0].device)), ar_shape);
  Tensor hit = eq(ar, keep(v.outputs[1], r));
  return where(hit, keep(v.grads[0], r), Scalar(0));
}
std::vector<Tensor> vjp_max_dim(const VjpCall& v) { return {to_selected_index(v, v.attrs.i(0))}; }
KILN_REGISTER_VJP(max, vjp_max_dim);
KILN_REGISTER_VJP(min, vjp_max_dim);
KILN_REGISTER_VJP(mode, vjp_max_dim);
std::vector<Tensor> vjp_kthvalue(const VjpCall& v) { return {to_selected_index(v, v.attrs.i(1))}; }
KILN_REGISTER_VJP(kthvalue, vjp_kthvalue);
// Over a dim they read only the indices (Note [Saving what the VJP reads]), as PyTorch's
// value_selecting_reduction_backward: an in-place op on the values is no error at backward.
SaveSet save_selected_index(uint64_t, const Attrs&) { return {0, uint64_t{1} << 1}; }
SaveSet save_median(uint64_t, const Attrs& a) { return a.opt_i(0) ? SaveSet{0, uint64_t{1} << 1} : SaveSet{}; }
KILN_REGISTER_SAVE_RULE(max, save_selected_index);
KILN_REGISTER_SAVE_RULE(min, save_selected_index);
KILN_REGISTER_SAVE_RULE(mode, save_selected_index);
KILN_REGISTER_SAVE_RULE(kthvalue, save_selected_index);
KILN_REGISTER_SAVE_RULE(median, save_median);
KILN_REGISTER_SAVE_RULE(nanmedian, save_median);

// median/nanmedian with a dim select an index; over every element the gradient
// is shared evenly among the elements equal to the median, as torch's
// evenly_distribute_backward (a NaN median is equal to the NaNs).
std::vector<Tensor> vjp_median(const VjpCall& v) {
  if (auto dim = v.attrs.opt_i(0)) return {to_selected_index(v, *dim)};
  const Tensor& x = v.inputs[0];
  const Tensor& y = v.outputs[0];
  Tensor hit = logical_or(eq(x, y), logical_and(isnan(x), isnan(y)));
  return {where(hit, div(v.grads[0], sum(hit)), Scalar(0))};
}
KILN_REGISTER_VJP(median, vjp_median);
KILN_REGISTER_VJP(nanmedian, vjp_median);

// var/std/var_mean: d var / d x = 2 (x - mean) / max(0, N - correction).
struct VarParts {
  Red r;
  Tensor centered;
  double denom;
};
VarParts var_parts(const VjpCall& v) {
  VarParts p{red_of(v, v.attrs.ints(0)), {}, 0};
  const Tensor& x = v.inputs[0];
  // Centered about each slice's first element first: equal values (an expanded input) give
  // exactly 0 (and so a zero gradient), whichever rounding the mean's kernel or the compiled
  // code has; x - mean(x) gives rounding noise there, which the std's 1/std amplifies.
  Tensor shifted = x;
  if (x.numel() > 0 && !p.r.dims.empty()) {
    Tensor first = x;
    for (int64_t d : p.r.dims) first = narrow(first, d, 0, 1);
    shifted = sub(x, first);
  }
  p.centered = sub(shifted, mean(shifted, p.r.dims, /*keepdim=*/true));
  p.denom = std::max(0.0, p.r.n - v.attrs.f(1));
  return p;
}

std::vector<Tensor> vjp_var(const VjpCall& v) {
  VarParts p = var_parts(v);
  return {mul(keep(v.grads[0], p.r), mul(p.centered, Scalar(2.0 / p.denom)))};
}
KILN_REGISTER_VJP(var, vjp_var);

// A zero std (all values equal) gets a zero gradient, not 0/0 (as torch's std_backward).
std::vector<Tensor> vjp_std(const VjpCall& v) {
  VarParts p = var_parts(v);
  Tensor y = keep(v.outputs[0], p.r);
  Tensor zero = eq(y, Scalar(0));
  Tensor scale = where(zero, Scalar(0), div(keep(v.grads[0], p.r), mul(where(zero, Scalar(1), y), Scalar(p.denom))));
  return {mul(scale, p.centered)};
}
KILN_REGISTER_VJP(std, vjp_std);

std::vector<Tensor> vjp_var_mean(const VjpCall& v) {
  VarParts p = var_parts(v);
  Tensor gv = mul(keep(v.grads[0], p.r), mul(p.centered, Scalar(2.0 / p.denom)));
  Tensor gm = div(expand_back(v.grads[1], p.r), Scalar(p.r.n));
  return {add(gv, gm)};
}
KILN_REGISTER_VJP(var_mean, vjp_var_mean);

std::vector<Tensor> vjp_logsumexp(const VjpCall& v) {
  Red r = red_of(v, v.attrs.ints(0));
  const Tensor& x = v.inputs[0];
  Tensor g = keep(v.grads[0], r);
  return {as_input(v, mul(g, exp(sub(x, keep(v.outputs[0], r)))))};
}
KILN_REGISTER_VJP(logsumexp, vjp_logsumexp);

std::vector<Tensor> vjp_norm(const VjpCall& v) {
  Red r = red_of(v, v.attrs.ints(1));
  double p = v.attrs.f(0);
  const Tensor& x = v.inputs[0];
  Tensor g = keep(v.grads[0], r);
  Tensor y = keep(v.outputs[0], r);
  if (p == 0) return {zeros_like(x)};
  if (p == 1) return {mul(g, sign(x))};
  if (std::isinf(p)) {
    Tensor hit = eq(abs(x), y);
    return {where(hit, mul(sign(x), div(g, ksum(hit, r))), Scalar(0))};
  }
  // A zero norm means a zero slice: its gradient is 0 (divide by 1 instead of 0).
  Tensor y_safe = where(eq(y, Scalar(0)), Scalar(1), y);
  if (p == 2) return {mul(div(x, y_safe), g)};
  // x |x|^(p-2) is 0 * inf at x == 0 for p < 2: those elements get 0, as in torch.
  Tensor x_zero = eq(x, Scalar(0));
  Tensor num = where(x_zero, Scalar(0), mul(x, pow(where(x_zero, Scalar(1), abs(x)), Scalar(p - 2))));
  return {mul(div(num, pow(y_safe, Scalar(p - 1))), g)};
}
KILN_REGISTER_VJP(norm, vjp_norm);

// The reverse cumulative sum over dim: sum - cumsum + t (no flip needed).
Tensor rev_cumsum(const Tensor& t, int64_t dim) {
  if (t.dim() == 0) return t;
  return add(sub(sum(t, Ints{dim}, /*keepdim=*/true), cumsum(t, dim)), t);
}

std::vector<Tensor> vjp_cumsum(const VjpCall& v) { return {as_input(v, rev_cumsum(v.grads[0], v.attrs.i(0)))}; }
KILN_REGISTER_VJP(cumsum, vjp_cumsum);

// cumprod: before the first zero of a row, grad_i = revcumsum(g * y)_i / x_i; at
// the first zero, the same sum taken with that zero replaced by 1; after it, 0.
std::vector<Tensor> vjp_cumprod(const VjpCall& v) {
  int64_t dim = v.attrs.i(0);
  const Tensor& x = v.inputs[0];
  const Tensor& y = v.outputs[0];
  Tensor g = v.grads[0];
  if (x.dim() == 0) return {as_input(v, g)};
  Tensor is_zero = eq(x, Scalar(0));
  Tensor zeros_so_far = cumsum(is_zero, dim);
  Tensor before = eq(zeros_so_far, Scalar(0));
  Tensor first_zero = logical_and(is_zero, eq(zeros_so_far, Scalar(1)));
  Tensor a = div(rev_cumsum(mul(g, y), dim), where(before, x, Scalar(1)));
  Tensor y1 = cumprod(where(first_zero, Scalar(1), x), dim, y.dtype());
  Tensor b = rev_cumsum(mul(g, y1), dim);
  return {as_input(v, where(before, a, where(first_zero, b, Scalar(0))))};
}
KILN_REGISTER_VJP(cumprod, vjp_cumprod);

// cummax/cummin: each output's gradient goes to the running extreme's index (torch's cummaxmin_backward).
std::vector<Tensor> vjp_cummax(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  if (v.input_meta[0].sizes.empty()) return {g};
  Tensor z = zeros(v.input_meta[0].sizes, TensorOptions(g.dtype()).device(v.input_meta[0].device));
  return {scatter_add(z, v.attrs.i(0), v.outputs[1], g)};
}
KILN_REGISTER_VJP(cummax, vjp_cummax);
KILN_REGISTER_VJP(cummin, vjp_cummax);

// grad_i = sum_{j >= i} g_j exp(x_i - y_j), summed in log space for the positive
// and negative parts of g separately so nothing overflows (torch's logcumsumexp_backward).
std::vector<Tensor> vjp_logcumsumexp(const VjpCall& v) {
  const Tensor& x = v.inputs[0];
  const Tensor& y = v.outputs[0];
  const Tensor& g = v.grads[0];
  if (x.dim() == 0) return {g};
  int64_t dim = v.attrs.i(0);
  auto rev_lcse = [dim](const Tensor& t) { return flip(logcumsumexp(flip(t, Ints{dim}), dim), Ints{dim}); };
  // The lowest finite value stands for log(0), so that lowest - y stays ordered (no inf - inf).
  double lowest = g.dtype() == kFloat64    ? std::numeric_limits<double>::lowest()
                  : g.dtype() == kFloat16  ? -65504.0
                  : g.dtype() == kBFloat16 ? -3.3895313892515355e38
                                           : static_cast<double>(std::numeric_limits<float>::lowest());
  Tensor log_abs = log(abs(g));
  Tensor lpos = where(gt(g, Scalar(0)), log_abs, Scalar(lowest));
  Tensor lneg = where(lt(g, Scalar(0)), log_abs, Scalar(lowest));
  Tensor pos = exp(add(rev_lcse(sub(lpos, y)), x));
  Tensor neg = exp(add(rev_lcse(sub(lneg, y)), x));
  return {as_input(v, sub(pos, neg))};
}
KILN_REGISTER_VJP(logcumsumexp, vjp_logcumsumexp);

}  // namespace
}  // namespace kiln
