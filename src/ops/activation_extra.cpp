// tanhshrink, softshrink, hardshrink, rrelu, softmin, gumbel_softmax and the
// dropout variants (alpha_dropout, feature_alpha_dropout, dropout2d): public functions, meta functions
// and decompositions. All are composites: autograd differentiates through the decompositions.
#include <cmath>
#include <limits>

#include "core/philox.h"
#include "kiln/ops/activation.h"
#include "ops/nn_util.h"

namespace kiln {

using namespace nn_detail;

namespace {

Tensor opmath_of(const Tensor& x) { return x.to(opmath(x.dtype())); }
Tensor scalar_zero(const Tensor& x) { return zeros({}, TensorOptions(x.dtype()).device(x.device())); }

// ---- tanhshrink: x - tanh(x), as torch's Python definition op for op ----
std::vector<TensorMeta> meta_tanhshrink(const OpCall& c) {
  const Tensor& x = c.in(0);
  KILN_CHECK(x.defined(), "tanhshrink: expected a defined input tensor");
  // bool - float is refused by torch's sub ("Subtraction ... with a bool tensor is not supported").
  KILN_CHECK(x.dtype() != DType::Bool, "tanhshrink: expected a numeric input, got dtype Bool (shape ",
             shape_str(x.sizes()), ")");
  return one_output(x.sizes().vec(), to_floating(x.dtype()), x.device());
}
KILN_REGISTER_META(tanhshrink, meta_tanhshrink);
std::vector<Tensor> decomp_tanhshrink(const OpCall& c) {
  meta_tanhshrink(c);
  const Tensor& x = c.in(0);
  return {x - tanh(x)};
}
KILN_REGISTER_DECOMP(tanhshrink, decomp_tanhshrink);

// ---- softshrink / hardshrink: (x; lambd), floating inputs only (torch has no integer kernels) ----
std::vector<TensorMeta> meta_shrink(const OpCall& c) {
  const Tensor& x = c.in(0);
  KILN_CHECK(x.defined(), c.name(), ": expected a defined input tensor");
  KILN_CHECK(is_floating_point(x.dtype()), c.name(), ": expected a floating point tensor, got dtype ", x.dtype(),
             " (shape ", shape_str(x.sizes()), ")");
  if (c.op == OpId::softshrink) {
    double l = c.attrs.s(0).to_double();
    KILN_CHECK(l >= 0, "softshrink: lambda must be greater or equal to 0, but found to be ", l);
  }
  return one_output(x.sizes().vec(), x.dtype(), x.device());
}
KILN_REGISTER_META(softshrink, meta_shrink);
KILN_REGISTER_META(hardshrink, meta_shrink);

// x > l ? x - l : x < -l ? x + l : x * 0. The middle is x * 0, not 0, so that a NaN propagates
// (PyTorch 2.x; 1.13's kernel gave 0 for NaN).
std::vector<Tensor> decomp_softshrink(const OpCall& c) {
  meta_shrink(c);
  Tensor x = opmath_of(c.in(0));
  double l = c.attrs.s(0).to_double();
  Tensor r = where(gt(x, l), x - l, where(lt(x, -l), x + l, x * 0));
  return {r.to(c.in(0).dtype())};
}
KILN_REGISTER_DECOMP(softshrink, decomp_softshrink);

// (x >= -l && x <= l) ? 0 : x, torch's kernel's test (a NaN fails it and passes through).
std::vector<Tensor> decomp_hardshrink(const OpCall& c) {
  meta_shrink(c);
  const Tensor& x = c.in(0);
  double l = c.attrs.s(0).to_double();
  return {where(logical_and(ge(x, -l), le(x, l)), scalar_zero(x), x)};
}
KILN_REGISTER_DECOMP(hardshrink, decomp_hardshrink);

// ---- rrelu: (x; lower, upper, training, seed, offset) ----
std::vector<TensorMeta> meta_rrelu(const OpCall& c) {
  const Tensor& x = c.in(0);
  KILN_CHECK(x.defined(), "rrelu: expected a defined input tensor");
  KILN_CHECK(is_floating_point(x.dtype()), "rrelu: expected a floating point tensor, got dtype ", x.dtype(), " (shape ",
             shape_str(x.sizes()), ")");
  double lo = c.attrs.s(0).to_double(), hi = c.attrs.s(1).to_double();
  KILN_CHECK(lo <= hi, "rrelu: Lower bound should be less than or equal to the upper bound, got lower ", lo,
             " and upper ", hi);
  return one_output(x.sizes().vec(), x.dtype(), x.device());
}
KILN_REGISTER_META(rrelu, meta_rrelu);

// Training (torch's rrelu_with_noise): x <= 0 ? x * r : x with r = lower + (upper - lower) * u, u the
// i-th float32 uniform of the Philox stream; the gradient is r there, as torch's (noise). Evaluation:
// leaky_relu with slope (lower + upper) / 2 (x > 0 ? x : x * slope, gradient slope at 0 as torch's).
std::vector<Tensor> decomp_rrelu(const OpCall& c) {
  meta_rrelu(c);
  const Tensor& x0 = c.in(0);
  double lo = c.attrs.s(0).to_double(), hi = c.attrs.s(1).to_double();
  Tensor x = opmath_of(x0);
  if (!c.attrs.b(2) || x.numel() == 0) return {where(gt(x, 0), x, x * ((lo + hi) / 2)).to(x0.dtype())};
  Tensor u = call_op1(OpId::uniform, {}, {x.sizes().vec(), 0.0, 1.0, kFloat32, x.device(), c.attrs[3], c.attrs[4]});
  Tensor r = u.to(x.dtype()) * (hi - lo) + lo;
  return {where(le(x, 0), x * r, x).to(x0.dtype())};
}
KILN_REGISTER_DECOMP(rrelu, decomp_rrelu);

// ---- softmin: (x; dim, dtype?) = softmax(-x, dim, dtype), as torch's Python definition ----
std::vector<TensorMeta> meta_softmin(const OpCall& c) {
  const Tensor& x = c.in(0);
  KILN_CHECK(x.defined(), "softmin: input is undefined");
  DType t = c.attrs.opt_dtype(1).value_or(x.dtype());
  KILN_CHECK(is_floating_point(t), "softmin: expected a floating dtype, got input of dtype ", x.dtype(),
             " (pass dtype= to compute in floating point)");
  KILN_CHECK(x.dtype() != DType::Bool, "softmin: negation of a Bool tensor is not supported (input shape ",
             shape_str(x.sizes()), ")");
  wrap_dim(c.attrs.i(0), x.dim(), "softmin");
  return one_output(x.sizes().vec(), t, x.device());
}
KILN_REGISTER_META(softmin, meta_softmin);
std::vector<Tensor> decomp_softmin(const OpCall& c) {
  meta_softmin(c);
  return {softmax(neg(c.in(0)), c.attrs.i(0), c.attrs.opt_dtype(1))};
}
KILN_REGISTER_DECOMP(softmin, decomp_softmin);

// ---- gumbel_softmax: (logits; tau, hard, dim, seed, offset) ----
std::vector<TensorMeta> meta_gumbel_softmax(const OpCall& c) {
  const Tensor& x = c.in(0);
  KILN_CHECK(x.defined(), "gumbel_softmax: expected a defined logits tensor");
  KILN_CHECK(is_floating_point(x.dtype()), "gumbel_softmax: expected floating logits, got dtype ", x.dtype(),
             " (shape ", shape_str(x.sizes()), ")");
  wrap_dim(c.attrs.i(2), x.dim(), "gumbel_softmax");
  return one_output(x.sizes().vec(), x.dtype(), x.device());
}
KILN_REGISTER_META(gumbel_softmax, meta_gumbel_softmax);

// torch's: g = -log(E), E ~ Exponential(1) (here -log1p(-u) of the i-th float32 uniform u, kept
// above 0 as PyTorch 2.x's exponential_ never returns 0); y = softmax((logits + g) / tau, dim); hard:
// the one-hot of y's (first) argmax along dim, y_hard - y.detach() + y (the straight-through estimator).
std::vector<Tensor> decomp_gumbel_softmax(const OpCall& c) {
  meta_gumbel_softmax(c);
  const Tensor& x0 = c.in(0);
  if (x0.numel() == 0) return {x0.clone()};
  bool zero_d = x0.dim() == 0;
  Tensor x = opmath_of(zero_d ? reshape(x0, {1}) : x0);
  int64_t d = wrap_dim(c.attrs.i(2), x.dim(), "gumbel_softmax");
  Tensor u = call_op1(OpId::uniform, {}, {x.sizes().vec(), 0.0, 1.0, kFloat32, x.device(), c.attrs[3], c.attrs[4]});
  Tensor e = clamp_min(neg(log1p(neg(u.to(x.dtype())))), std::numeric_limits<float>::min());
  Tensor y = softmax((x - log(e)) / c.attrs.f(0), d);
  if (c.attrs.b(1)) {
    Tensor index = argmax(y, d, true);
    Tensor y_hard = scatter(zeros_like(y), d, index, Scalar(1.0));
    y = y_hard - detach(y) + y;
  }
  if (zero_d) y = reshape(y, {});
  return {y.to(x0.dtype())};
}
KILN_REGISTER_DECOMP(gumbel_softmax, decomp_gumbel_softmax);

// ---- alpha_dropout, feature_alpha_dropout, dropout2d: (x; p, train, seed, offset) ----
bool is_feature(OpId op) { return op != OpId::alpha_dropout; }

std::vector<TensorMeta> meta_dropout_variant(const OpCall& c) {
  const Tensor& x = c.in(0);
  const char* op = c.name();
  double p = c.attrs.f(0);
  KILN_CHECK(x.defined(), op, ": expected a defined input tensor");
  KILN_CHECK(p >= 0 && p <= 1, op, ": dropout probability has to be between 0 and 1, but got ", p);
  bool active = c.attrs.b(1) && p > 0 && x.numel() > 0;
  KILN_CHECK(!active || is_floating_point(x.dtype()), op, ": expected a floating input in training mode, got dtype ",
             x.dtype());
  if (c.op == OpId::dropout2d)
    // PyTorch 2.x warns for other ranks that they will be an error; kiln makes them one (see dropout2d).
    KILN_CHECK(x.dim() == 3 || x.dim() == 4,
               "dropout2d: expected a 3-D (N, C, L) or 4-D (N, C, H, W) input, got shape ", shape_str(x.sizes()),
               " (use dropout for element-wise dropout)");
  else if (is_feature(c.op) && active)
    KILN_CHECK(x.dim() >= 2, op, ": Feature dropout requires at least 2 dimensions in the input, got shape ",
               shape_str(x.sizes()));
  return one_output(x.sizes().vec(), x.dtype(), x.device());
}
KILN_REGISTER_META(alpha_dropout, meta_dropout_variant);
KILN_REGISTER_META(feature_alpha_dropout, meta_dropout_variant);
KILN_REGISTER_META(dropout2d, meta_dropout_variant);

// The mask's shape: one value per element, or per (N, C) channel for the feature dropouts.
Shape noise_shape(OpId op, IntArrayRef sizes) {
  if (!is_feature(op)) return sizes.vec();
  Shape s(sizes.size(), 1);
  s[0] = sizes[0];
  s[1] = sizes[1];
  return s;
}

// torch's _dropout_impl: keep = (u < 1 - p) (Note [Dropout mask]); dropout2d: x * keep / (1 - p);
// alpha: x * (keep * a) + (keep - 1) * alpha * a + alpha * a * p, with alpha = SELU's -scale * alpha
// and a = 1 / sqrt((alpha^2 p + 1)(1 - p)), which keeps zero mean and unit variance. p == 1 gives
// x * 0, as torch's (it never divides by 1 - p).
std::vector<Tensor> decomp_dropout_variant(const OpCall& c) {
  meta_dropout_variant(c);
  const Tensor& x = c.in(0);
  double p = c.attrs.f(0);
  if (!c.attrs.b(1) || p == 0 || x.numel() == 0) return {x.clone()};
  if (p == 1) return {x * scalar_zero(x)};
  Tensor u = call_op1(OpId::uniform, {},
                      {noise_shape(c.op, x.sizes()), 0.0, 1.0, kFloat32, x.device(), c.attrs[2], c.attrs[3]});
  Tensor keep = lt(u, 1.0 - p).to(x.dtype());
  if (c.op == OpId::dropout2d) return {x * (keep / (1.0 - p))};
  constexpr double alpha = 1.7580993408473766;
  double a = 1. / std::sqrt((alpha * alpha * p + 1) * (1 - p));
  Tensor b = (keep - 1) * (alpha * a) + alpha * a * p;
  return {x * (keep * a) + b};
}
KILN_REGISTER_DECOMP(alpha_dropout, decomp_dropout_variant);
KILN_REGISTER_DECOMP(feature_alpha_dropout, decomp_dropout_variant);
KILN_REGISTER_DECOMP(dropout2d, decomp_dropout_variant);

Tensor call_dropout_variant(OpId op, const Tensor& x, double p, bool training, Generator* gen) {
  const char* name = op_name(op);
  KILN_CHECK(p >= 0 && p <= 1, name, ": dropout probability has to be between 0 and 1, but got ", p);
  KILN_CHECK(x.defined(), name, ": expected a defined input tensor");
  if (op == OpId::dropout2d)  // checked in evaluation too, where the op is not run
    KILN_CHECK(x.dim() == 3 || x.dim() == 4,
               "dropout2d: expected a 3-D (N, C, L) or 4-D (N, C, H, W) input, got shape ", shape_str(x.sizes()),
               " (use dropout for element-wise dropout)");
  // As torch: no randomness is consumed (and the input is returned) when nothing is dropped.
  if (!training || p == 0 || x.numel() == 0) return x;
  uint64_t seed = 0, offset = 0;
  if (p < 1 && (!is_feature(op) || x.dim() >= 2)) {
    int64_t n = is_feature(op) ? x.sizes()[0] * x.sizes()[1] : x.numel();
    Generator& g = gen ? *gen : default_generator(x.device());
    std::tie(seed, offset) = g.reserve(philox_blocks<float>(static_cast<uint64_t>(n)));
  }
  return call_op1(op, {x}, {p, training, as_attr(seed), as_attr(offset)});
}

}  // namespace

Tensor tanhshrink(const Tensor& x) { return call_op1(OpId::tanhshrink, {x}); }
Tensor softshrink(const Tensor& x, const Scalar& lambd) { return call_op1(OpId::softshrink, {x}, {lambd}); }
Tensor hardshrink(const Tensor& x, const Scalar& lambd) { return call_op1(OpId::hardshrink, {x}, {lambd}); }

Tensor rrelu(const Tensor& x, const Scalar& lower, const Scalar& upper, bool training, Generator* gen) {
  uint64_t seed = 0, offset = 0;
  if (training && x.defined() && x.numel() > 0) {
    Generator& g = gen ? *gen : default_generator(x.device());
    std::tie(seed, offset) = g.reserve(philox_blocks<float>(static_cast<uint64_t>(x.numel())));
  }
  return call_op1(OpId::rrelu, {x}, {lower, upper, training, as_attr(seed), as_attr(offset)});
}

Tensor softmin(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return call_op1(OpId::softmin, {x}, {dim, opt_attr(dtype)});
}

Tensor gumbel_softmax(const Tensor& logits, double tau, bool hard, int64_t dim, Generator* gen) {
  uint64_t seed = 0, offset = 0;
  if (logits.defined() && logits.numel() > 0) {
    Generator& g = gen ? *gen : default_generator(logits.device());
    std::tie(seed, offset) = g.reserve(philox_blocks<float>(static_cast<uint64_t>(logits.numel())));
  }
  return call_op1(OpId::gumbel_softmax, {logits}, {tau, hard, dim, as_attr(seed), as_attr(offset)});
}

Tensor alpha_dropout(const Tensor& x, double p, bool training, Generator* gen) {
  return call_dropout_variant(OpId::alpha_dropout, x, p, training, gen);
}
Tensor feature_alpha_dropout(const Tensor& x, double p, bool training, Generator* gen) {
  return call_dropout_variant(OpId::feature_alpha_dropout, x, p, training, gen);
}
Tensor dropout2d(const Tensor& x, double p, bool training, Generator* gen) {
  return call_dropout_variant(OpId::dropout2d, x, p, training, gen);
}

}  // namespace kiln
