// Sorting ops: sort, argsort and topk (public functions, meta functions and
// decompositions). Kernels are in backend/cpu/sort.cpp; NaN sorts as the
// largest value, as in torch.
#include "dispatch/dispatch.h"
#include "kiln/ops/shape.h"
#include "ops/meta_util.h"

namespace kiln {
namespace {

std::vector<TensorMeta> values_and_indices(Shape s, const Tensor& x) {
  std::vector<TensorMeta> r = one_output(s, x.dtype(), x.device());
  r.push_back(one_output(std::move(s), kInt64, x.device())[0]);
  return r;
}

std::vector<TensorMeta> meta_sort(const OpCall& c) {
  const Tensor& x = c.in(0);
  wrap_dim(c.attrs.i(0), x.dim(), c.name());
  return values_and_indices(x.sizes().vec(), x);
}
KILN_REGISTER_META(sort, meta_sort);

std::vector<TensorMeta> meta_topk(const OpCall& c) {
  const Tensor& x = c.in(0);
  KILN_CHECK(x.dtype() != kBool, c.name(), ": not implemented for dtype bool");
  int64_t dim = wrap_dim(c.attrs.i(1), x.dim(), c.name());
  int64_t n = x.dim() == 0 ? 1 : x.sizes()[dim];
  int64_t k = c.attrs.i(0);
  KILN_CHECK(k >= 0 && k <= n, c.name(), ": k (", k, ") is out of range for dimension ", dim, " with size ", n,
             " of the input of shape ", shape_str(x.sizes()));
  Shape s = x.sizes().vec();
  if (x.dim() > 0) s[dim] = k;
  return values_and_indices(s, x);
}
KILN_REGISTER_META(topk, meta_topk);

std::vector<TensorMeta> meta_argsort(const OpCall& c) {
  const Tensor& x = c.in(0);
  wrap_dim(c.attrs.i(0), x.dim(), c.name());
  return one_output(x.sizes().vec(), kInt64, x.device());
}
KILN_REGISTER_META(argsort, meta_argsort);

std::vector<Tensor> decomp_argsort(const OpCall& c) {
  return {call_op(OpId::sort, {c.in(0)}, {c.attrs[0], c.attrs[1], c.attrs[2]})[1]};
}
KILN_REGISTER_DECOMP(argsort, decomp_argsort);

}  // namespace

std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  auto r = call_op(OpId::topk, {x}, {k, dim, largest, sorted});
  return {r[0], r[1]};
}
std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  auto r = call_op(OpId::sort, {x}, {dim, descending, stable});
  return {r[0], r[1]};
}
Tensor argsort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  return call_op1(OpId::argsort, {x}, {dim, descending, stable});
}

}  // namespace kiln
