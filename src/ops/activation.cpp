// Pointwise activations of torch.nn.functional (hardtanh, ...): public functions, meta
// functions and decompositions. VJPs are in grad_activation.cpp; hardtanh's CPU kernel is in
// backend/cpu/pointwise_unary.cpp (it shares clamp's).
#include "kiln/ops/activation.h"
#include "ops/activation_util.h"
#include "ops/nn_util.h"

namespace kiln {

namespace {

// ---- hardtanh: (x; min_val, max_val) ----
std::vector<TensorMeta> meta_hardtanh(const OpCall& c) {
  const Tensor& x = c.in(0);
  KILN_CHECK(x.defined(), "hardtanh: expected a defined input tensor");
  KILN_CHECK(x.dtype() != DType::Bool, "hardtanh: Bool inputs not supported for hardtanh");
  auto [lo, hi] = hardtanh_bounds(x.dtype(), c.attrs);
  KILN_CHECK(x.dtype() != DType::UInt8 || (lo.to_long() >= 0 && hi.to_long() >= 0),
             "hardtanh: cannot do hardtanh on an unsigned type with negative limits (min_val ", lo.to_long(),
             ", max_val ", hi.to_long(), ")");
  check_scalar_fits(lo, x.dtype(), "hardtanh");
  check_scalar_fits(hi, x.dtype(), "hardtanh");
  return one_output(x.sizes().vec(), x.dtype(), x.device());
}
KILN_REGISTER_META(hardtanh, meta_hardtanh);

// The forward is clamp (a NaN propagates); only the gradient at the bounds differs.
std::vector<Tensor> decomp_hardtanh(const OpCall& c) {
  meta_hardtanh(c);
  auto [lo, hi] = hardtanh_bounds(c.in(0).dtype(), c.attrs);
  return {call_op1(OpId::clamp, {c.in(0)}, {lo, hi})};
}
KILN_REGISTER_DECOMP(hardtanh, decomp_hardtanh);

}  // namespace

Tensor hardtanh(const Tensor& x, const Scalar& min_val, const Scalar& max_val) {
  return call_op1(OpId::hardtanh, {x}, {min_val, max_val});
}
Tensor& hardtanh_(Tensor& x, const Scalar& min_val, const Scalar& max_val) {
  return call_op_inplace(x, OpId::hardtanh, {x}, {min_val, max_val});
}

}  // namespace kiln
