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
  check_scalar_bound(lo, x.dtype(), "hardtanh");  // Note [Scalars out of range]
  check_scalar_bound(hi, x.dtype(), "hardtanh");
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

// ---- floating-only activations: (x; ...) ----
std::vector<TensorMeta> meta_float_act(const OpCall& c) {
  const Tensor& x = c.in(0);
  KILN_CHECK(x.defined(), c.name(), ": expected a defined input tensor");
  KILN_CHECK(is_floating_point(x.dtype()), c.name(), ": expected a floating point tensor, got dtype ", x.dtype(),
             " (shape ", shape_str(x.sizes()), ")");
  return one_output(x.sizes().vec(), x.dtype(), x.device());
}
KILN_REGISTER_META(leaky_relu, meta_float_act);
KILN_REGISTER_META(elu, meta_float_act);
KILN_REGISTER_META(softplus, meta_float_act);
KILN_REGISTER_META(hardsigmoid, meta_float_act);
KILN_REGISTER_META(hardswish, meta_float_act);
KILN_REGISTER_META(mish, meta_float_act);
KILN_REGISTER_META(logsigmoid, meta_float_act);

// Half/BFloat16 compute in float32 and round once at the end, as torch's kernels (opmath).
Tensor to_opmath(const Tensor& x) { return x.to(opmath(x.dtype())); }
std::vector<Tensor> from_opmath(const Tensor& r, DType t) { return {r.to(t)}; }

// x > 0 ? x : x * negative_slope (a NaN stays NaN).
std::vector<Tensor> decomp_leaky_relu(const OpCall& c) {
  Tensor x = to_opmath(c.in(0));
  return from_opmath(where(gt(x, 0), x, x * c.attrs.s(0)), c.in(0).dtype());
}
KILN_REGISTER_DECOMP(leaky_relu, decomp_leaky_relu);

// torch's elu: x <= 0 ? expm1(x * input_scale) * alpha * scale : x * scale.
std::vector<Tensor> decomp_elu(const OpCall& c) {
  Tensor x = to_opmath(c.in(0));
  double alpha = c.attrs.s(0).to_double(), scale = c.attrs.s(1).to_double(), in_scale = c.attrs.s(2).to_double();
  Tensor neg = expm1(in_scale == 1 ? x : x * in_scale) * (alpha * scale);
  return from_opmath(where(le(x, 0), neg, scale == 1 ? x : x * scale), c.in(0).dtype());
}
KILN_REGISTER_DECOMP(elu, decomp_elu);

// x * beta > threshold ? x : log1p(exp(x * beta)) / beta (linear above the threshold, for stability).
std::vector<Tensor> decomp_softplus(const OpCall& c) {
  Tensor x = to_opmath(c.in(0));
  const Scalar& beta = c.attrs.s(0);
  Tensor xb = x * beta;
  return from_opmath(where(gt(xb, c.attrs.s(1)), x, log1p(exp(xb)) / beta), c.in(0).dtype());
}
KILN_REGISTER_DECOMP(softplus, decomp_softplus);

// relu6(x + 3) / 6, NaN propagating.
Tensor hardsigmoid_opmath(const Tensor& x) { return clamp(x + 3, Scalar(0), Scalar(6)) / 6; }
std::vector<Tensor> decomp_hardsigmoid(const OpCall& c) {
  return from_opmath(hardsigmoid_opmath(to_opmath(c.in(0))), c.in(0).dtype());
}
KILN_REGISTER_DECOMP(hardsigmoid, decomp_hardsigmoid);

// x * relu6(x + 3) / 6, in torch's order (multiply, then divide).
std::vector<Tensor> decomp_hardswish(const OpCall& c) {
  Tensor x = to_opmath(c.in(0));
  return from_opmath(x * clamp(x + 3, Scalar(0), Scalar(6)) / 6, c.in(0).dtype());
}
KILN_REGISTER_DECOMP(hardswish, decomp_hardswish);

// x * tanh(softplus(x)), softplus without a threshold (torch's mish).
std::vector<Tensor> decomp_mish(const OpCall& c) {
  Tensor x = to_opmath(c.in(0));
  return from_opmath(x * tanh(log1p(exp(x))), c.in(0).dtype());
}
KILN_REGISTER_DECOMP(mish, decomp_mish);

// log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)): no overflow for either sign.
std::vector<Tensor> decomp_logsigmoid(const OpCall& c) {
  Tensor x = to_opmath(c.in(0));
  return from_opmath(minimum(x, zeros({}, TensorOptions(x.dtype()).device(x.device()))) - log1p(exp(-abs(x))),
                     c.in(0).dtype());
}
KILN_REGISTER_DECOMP(logsigmoid, decomp_logsigmoid);

// ---- softsign: x / (1 + |x|) ----
// As torch's Python definition, op for op (so integer inputs give the default float dtype and
// Half rounds after each op as torch's does).
std::vector<TensorMeta> meta_softsign(const OpCall& c) {
  const Tensor& x = c.in(0);
  KILN_CHECK(x.defined(), "softsign: expected a defined input tensor");
  return one_output(x.sizes().vec(), to_floating(x.dtype() == DType::Bool ? DType::Int64 : x.dtype()), x.device());
}
KILN_REGISTER_META(softsign, meta_softsign);
std::vector<Tensor> decomp_softsign(const OpCall& c) {
  const Tensor& x = c.in(0);
  return {x / (abs(x.dtype() == DType::Bool ? x.to(DType::Int64) : x) + 1)};
}
KILN_REGISTER_DECOMP(softsign, decomp_softsign);

// ---- glu: (x; dim): a * sigmoid(b) for the two halves of x along dim ----
std::vector<TensorMeta> meta_glu(const OpCall& c) {
  const Tensor& x = c.in(0);
  KILN_CHECK(x.defined(), "glu: expected a defined input tensor");
  KILN_CHECK(x.dim() > 0, "glu: glu does not support scalars because halving size must be even");
  KILN_CHECK(is_floating_point(x.dtype()), "glu: expected a floating point tensor, got dtype ", x.dtype());
  int64_t d = wrap_dim(c.attrs.i(0), x.dim(), "glu");
  KILN_CHECK(x.sizes()[d] % 2 == 0, "glu: Halving dimension must be even, but dimension ", d, " is size ",
             x.sizes()[d]);
  Shape out = x.sizes().vec();
  out[d] /= 2;
  return one_output(std::move(out), x.dtype(), x.device());
}
KILN_REGISTER_META(glu, meta_glu);
std::vector<Tensor> decomp_glu(const OpCall& c) {
  const Tensor& x = c.in(0);
  int64_t d = wrap_dim(c.attrs.i(0), x.dim(), "glu"), h = x.sizes()[d] / 2;
  Tensor a = to_opmath(narrow(x, d, 0, h)), b = to_opmath(narrow(x, d, h, h));
  return from_opmath(a * sigmoid(b), x.dtype());
}
KILN_REGISTER_DECOMP(glu, decomp_glu);

// ---- prelu: (x, weight): x > 0 ? x : weight * x, weight per channel (dim 1) or one value ----
std::vector<TensorMeta> meta_prelu(const OpCall& c) {
  const Tensor &x = c.in(0), &w = c.in(1);
  KILN_CHECK(x.defined() && w.defined(), "prelu: expected defined input and weight tensors");
  KILN_CHECK(is_floating_point(x.dtype()), "prelu: expected a floating point input, got dtype ", x.dtype());
  KILN_CHECK(w.dtype() == x.dtype(), "prelu: expected weight of the input's dtype ", x.dtype(), ", got ", w.dtype());
  KILN_CHECK(w.dim() <= 1, "prelu: Expected `weight` to be a scalar or 1D tensor, but got ndim = ", w.dim());
  int64_t channels = x.dim() >= 2 ? x.sizes()[1] : 1;
  KILN_CHECK(w.numel() == 1 || w.numel() == channels,
             "prelu: Mismatch of parameter numbers and input channel size. Found parameter numbers = ", w.numel(),
             " and channel size = ", channels, " (input shape ", shape_str(x.sizes()), ")");
  return one_output(x.sizes().vec(), x.dtype(), output_device(c.inputs));
}
KILN_REGISTER_META(prelu, meta_prelu);
std::vector<Tensor> decomp_prelu(const OpCall& c) {
  const Tensor &x = c.in(0), &w = c.in(1);
  Tensor wb = w.numel() == 1 ? reshape(w, {}) : reshape(w, nn_detail::channel_shape(x.dim(), w.numel()));
  return {where(gt(x, 0), x, wb * x)};
}
KILN_REGISTER_DECOMP(prelu, decomp_prelu);

constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
constexpr double kSeluScale = 1.0507009873554804934193349852946;

void check_celu_alpha(const Scalar& alpha) {
  KILN_CHECK(alpha.to_double() != 0, "celu: ZeroDivisionError: alpha cannot be 0 for CELU");
}

}  // namespace

Tensor hardtanh(const Tensor& x, const Scalar& min_val, const Scalar& max_val) {
  return call_op1(OpId::hardtanh, {x}, {min_val, max_val});
}
Tensor& hardtanh_(Tensor& x, const Scalar& min_val, const Scalar& max_val) {
  return call_op_inplace(x, OpId::hardtanh, {x}, {min_val, max_val});
}

Tensor leaky_relu(const Tensor& x, const Scalar& negative_slope) {
  return call_op1(OpId::leaky_relu, {x}, {negative_slope});
}
Tensor& leaky_relu_(Tensor& x, const Scalar& negative_slope) {
  return call_op_inplace(x, OpId::leaky_relu, {x}, {negative_slope});
}
Tensor elu(const Tensor& x, const Scalar& alpha) { return call_op1(OpId::elu, {x}, {alpha, Scalar(1), Scalar(1)}); }
Tensor& elu_(Tensor& x, const Scalar& alpha) {
  return call_op_inplace(x, OpId::elu, {x}, {alpha, Scalar(1), Scalar(1)});
}
Tensor selu(const Tensor& x) { return call_op1(OpId::elu, {x}, {Scalar(kSeluAlpha), Scalar(kSeluScale), Scalar(1)}); }
Tensor& selu_(Tensor& x) {
  return call_op_inplace(x, OpId::elu, {x}, {Scalar(kSeluAlpha), Scalar(kSeluScale), Scalar(1)});
}
// torch's celu: elu(x, alpha, 1, 1 / alpha).
Tensor celu(const Tensor& x, const Scalar& alpha) {
  check_celu_alpha(alpha);
  return call_op1(OpId::elu, {x}, {alpha, Scalar(1), Scalar(1.0 / alpha.to_double())});
}
Tensor& celu_(Tensor& x, const Scalar& alpha) {
  check_celu_alpha(alpha);
  return call_op_inplace(x, OpId::elu, {x}, {alpha, Scalar(1), Scalar(1.0 / alpha.to_double())});
}
Tensor softplus(const Tensor& x, const Scalar& beta, const Scalar& threshold) {
  return call_op1(OpId::softplus, {x}, {beta, threshold});
}
Tensor softsign(const Tensor& x) { return call_op1(OpId::softsign, {x}); }
Tensor hardsigmoid(const Tensor& x) { return call_op1(OpId::hardsigmoid, {x}); }
Tensor& hardsigmoid_(Tensor& x) { return call_op_inplace(x, OpId::hardsigmoid, {x}); }
Tensor hardswish(const Tensor& x) { return call_op1(OpId::hardswish, {x}); }
Tensor& hardswish_(Tensor& x) { return call_op_inplace(x, OpId::hardswish, {x}); }
Tensor mish(const Tensor& x) { return call_op1(OpId::mish, {x}); }
Tensor& mish_(Tensor& x) { return call_op_inplace(x, OpId::mish, {x}); }
Tensor logsigmoid(const Tensor& x) { return call_op1(OpId::logsigmoid, {x}); }
Tensor glu(const Tensor& x, int64_t dim) { return call_op1(OpId::glu, {x}, {dim}); }
Tensor prelu(const Tensor& x, const Tensor& weight) { return call_op1(OpId::prelu, {x, weight}); }

}  // namespace kiln
