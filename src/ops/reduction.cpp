// Reductions: public functions, meta functions and decompositions.
#include "kiln/ops/reduction.h"

#include "dispatch/dispatch.h"
#include "ops/meta_util.h"

namespace kiln {

namespace {
std::vector<TensorMeta> meta_sum(const OpCall& c) {
  const Tensor& x = c.in(0);
  auto mask = dim_mask(c.attrs.ints(0), x.dim(), c.name());
  auto dt = c.attrs.opt_dtype(2);
  DType out = dt ? *dt : (is_integral(x.dtype(), true) ? DType::Int64 : x.dtype());
  return one_output(reduced_shape(x.sizes(), mask, c.attrs.b(1)), out, x.device());
}
KILN_REGISTER_META(sum, meta_sum);
}  // namespace

Tensor sum(const Tensor& x, std::optional<DType> dtype) {
  return call_op1(OpId::sum, {x}, {std::vector<int64_t>{}, false, opt_attr(dtype)});
}
Tensor sum(const Tensor& x, IntArrayRef dim, bool keepdim, std::optional<DType> dtype) {
  return call_op1(OpId::sum, {x}, {dim.vec(), keepdim, opt_attr(dtype)});
}
Tensor Tensor::sum(std::optional<DType> dtype) const { return kiln::sum(*this, dtype); }
Tensor Tensor::sum(IntArrayRef dim, bool keepdim, std::optional<DType> dtype) const {
  return kiln::sum(*this, dim, keepdim, dtype);
}

}  // namespace kiln
