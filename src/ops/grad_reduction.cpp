// VJP rules of reductions.
#include "kiln/ops/shape.h"
#include "ops/grad_util.h"
#include "ops/meta_util.h"

namespace kiln {
namespace {

// The gradient of a reduction, reshaped to keepdim form and broadcast to the input.
Tensor expand_reduced(const VjpCall& v, const Tensor& g, IntArrayRef dims, bool keepdim) {
  const Shape& in = v.input_meta[0].sizes;
  Tensor r = g;
  if (!keepdim) r = reshape(r, reduced_shape(in, dim_mask(dims, static_cast<int64_t>(in.size()), "sum"), true));
  return expand(r, in);
}

std::vector<Tensor> vjp_sum(const VjpCall& v) {
  return {expand_reduced(v, v.grads[0], v.attrs.ints(0), v.attrs.b(1))};
}
KILN_REGISTER_VJP(sum, vjp_sum);

}  // namespace
}  // namespace kiln
