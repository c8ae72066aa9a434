// Loss functions: cross_entropy, nll_loss, mse/l1/smooth_l1, binary cross
// entropy (with and without logits) — public functions, meta functions and
// decompositions. Reductions follow torch: "mean" of a weighted class loss
// divides by the summed weights of the non-ignored targets.
#include "kiln/autograd.h"
#include "ops/loss_fused.h"
#include "ops/nn_util.h"

namespace kiln {

using namespace nn_detail;

namespace {

// ---- class-index checks shared by nll_loss and cross_entropy ----
int64_t class_dim(const Tensor& input) { return input.dim() == 1 ? 0 : 1; }

// Validates (input, class-index target, weight) and returns the unreduced loss shape.
Shape check_class_target(const Tensor& input, const Tensor& target, const Tensor& weight, const char* op) {
  KILN_CHECK(input.dim() >= 1, op, ": expected input of shape (C), (N, C) or (N, C, d1, ...), got shape ",
             shape_str(input.sizes()));
  KILN_CHECK(is_floating_point(input.dtype()), op, ": expected a floating input, got dtype ", input.dtype());
  KILN_CHECK(is_integral(target.dtype(), false), op, ": expected target of an integer dtype (class indices), got ",
             target.dtype());
  int64_t C = input.sizes()[class_dim(input)];
  Shape expect;
  if (input.dim() >= 2) {
    expect.push_back(input.sizes()[0]);
    for (int64_t i = 2; i < input.dim(); ++i) expect.push_back(input.sizes()[i]);
  }
  if (input.dim() == 2) {
    KILN_CHECK(target.dim() == 1 && target.sizes()[0] == input.sizes()[0], op, ": expected input batch_size (",
               input.sizes()[0], ") to match target batch_size; input shape ", shape_str(input.sizes()),
               ", target shape ", shape_str(target.sizes()));
  } else {
    KILN_CHECK(target.sizes() == IntArrayRef(expect), op, ": expected target of shape ", shape_str(expect),
               " for input of shape ", shape_str(input.sizes()), ", got target of shape ", shape_str(target.sizes()));
  }
  if (weight.defined()) {
    KILN_CHECK(weight.dim() == 1 && weight.numel() == C, op,
               ": weight tensor should be defined either for all ", C, " classes or no classes but got weight of shape ",
               shape_str(weight.sizes()));
    KILN_CHECK(is_floating_point(weight.dtype()), op, ": expected a floating weight, got dtype ", weight.dtype());
  }
  return expect;
}

// Throws the error naming the first target that is neither a class index nor ignore_index.
void check_target_range(const Tensor& input, const Tensor& target, int64_t ignore_index, const char* op) {
  if (!target.has_storage()) return;
  const int64_t C = input.size(class_dim(input));
  for (int64_t t : target.to(kInt64).to_vector<int64_t>())
    KILN_CHECK(t == ignore_index || (t >= 0 && t < C), op, ": target ", t, " is out of bounds: expected class indices in [0, ",
               C, ") or ignore_index ", ignore_index);
}

std::vector<TensorMeta> meta_nll_loss(const OpCall& c) {
  const std::string& red = c.attrs.str(1);
  check_reduction(red, c.name());
  Shape s = check_class_target(c.in(0), c.in(1), c.in(2), c.name());
  return one_output(red == "none" ? s : Shape{}, c.in(0).dtype(), c.in(0).device());
}
KILN_REGISTER_META(nll_loss, meta_nll_loss);

// Per-element class weights w[target] (0 where ignored) and the ignore mask.
struct PickedWeights {
  Tensor safe_target;  // int64, ignored entries replaced by class 0
  Tensor ignored;      // bool
  Tensor w;            // weights of each target, input dtype, 0 where ignored
};
PickedWeights pick_weights(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t ignore_index) {
  PickedWeights r;
  Tensor t = target.to(kInt64);
  r.ignored = eq(t, Scalar(ignore_index));
  r.safe_target = where(r.ignored, Scalar(int64_t(0)), t);
  if (weight.defined()) {
    Tensor wt = reshape(index_select(weight.to(input.dtype()), 0, flatten(r.safe_target)), t.sizes().vec());
    r.w = where(r.ignored, Scalar(0.0), wt);
  } else {
    r.w = logical_not(r.ignored).to(input.dtype());
  }
  return r;
}

std::vector<Tensor> decomp_nll_loss(const OpCall& c) {
  meta_nll_loss(c);
  const Tensor& input = c.in(0);
  const std::string& red = c.attrs.str(1);
  int64_t cd = class_dim(input);
  PickedWeights pw;
  Tensor picked;
  try {
    pw = pick_weights(input, c.in(1), c.in(2), c.attrs.i(0));
    picked = squeeze(gather(input, cd, unsqueeze(pw.safe_target, cd)), {cd});
  } catch (const Error&) {
    // The index kernels found a bad target; say which, in the loss's terms. (Only the error path
    // reads the target's values, so a correct call pays nothing; a compiled graph's kernel
    // reports it as an index error of gather.)
    check_target_range(input, c.in(1), c.attrs.i(0), c.name());
    throw;
  }
  // where, not a product: an ignored target contributes 0 even if its log-probability is -inf.
  Tensor loss = where(pw.ignored, Scalar(0.0), neg(picked * pw.w));
  if (red == "none") return {loss};
  if (red == "sum") return {sum(loss)};
  return {sum(loss) / sum(pw.w)};
}
KILN_REGISTER_DECOMP(nll_loss, decomp_nll_loss);

// ---- cross_entropy: (input, target, weight?; ignore_index, reduction, label_smoothing) ----
bool prob_target(const Tensor& target) { return is_floating_point(target.dtype()); }

std::vector<TensorMeta> meta_cross_entropy(const OpCall& c) {
  const Tensor &input = c.in(0), &target = c.in(1), &weight = c.in(2);
  const char* op = c.name();
  const std::string& red = c.attrs.str(1);
  check_reduction(red, op);
  double ls = c.attrs.f(2);
  KILN_CHECK(ls >= 0.0 && ls <= 1.0, op, ": label_smoothing must be between 0.0 and 1.0, got ", ls);
  Shape s;
  if (prob_target(target)) {
    KILN_CHECK(input.dim() >= 1 && is_floating_point(input.dtype()), op,
               ": expected a floating input of shape (C), (N, C) or (N, C, d1, ...), got shape ",
               shape_str(input.sizes()), " of dtype ", input.dtype());
    KILN_CHECK(target.sizes() == input.sizes(), op, ": expected class-probability target of the input's shape ",
               shape_str(input.sizes()), ", got shape ", shape_str(target.sizes()));
    int64_t C = input.sizes()[class_dim(input)];
    KILN_CHECK(!weight.defined() || (weight.dim() == 1 && weight.numel() == C), op,
               ": weight tensor should be defined either for all ", C,
               " classes or no classes but got weight of shape ", shape_str(weight.sizes()));
    for (int64_t i = 0; i < input.dim(); ++i)
      if (i != class_dim(input)) s.push_back(input.sizes()[i]);
  } else {
    s = check_class_target(input, target, weight, op);
  }
  const DType out = c.attrs.opt_dtype(3).value_or(input.dtype());
  KILN_CHECK(is_floating_point(out), op, ": expected a floating dtype, got ", out);
  return one_output(red == "none" ? s : Shape{}, out, input.device());
}
KILN_REGISTER_META(cross_entropy, meta_cross_entropy);

std::vector<Tensor> decomp_cross_entropy(const OpCall& c) {
  const DType out = meta_cross_entropy(c)[0].dtype;
  Tensor input = c.in(0), target = c.in(1), weight = c.in(2);
  int64_t ignore = c.attrs.i(0);
  const std::string& red = c.attrs.str(1);
  double ls = c.attrs.f(2);
  int64_t cd = class_dim(input), C = input.sizes()[cd];
  // The fused kernels compute in the logits' opmath dtype and read them as they are: autocast's
  // float32 result from bf16 logits without a cast copy (AUTOCAST_FP32_DTYPE), and without
  // autocast a bf16 result as torch's, cast from the float32 loss.
  if (out != input.dtype() && out != opmath(input.dtype())) input = input.to(out);
  if (!prob_target(target))
    if (std::optional<Tensor> fused = fused_cross_entropy(input, target, weight, ignore, red, ls))
      return {fused->dtype() == out ? *fused : fused->to(out)};
  // Elsewhere, given a dtype (autocast's float32), the decomposition runs on the inputs cast as
  // AUTOCAST_FP32 would cast them: the logits and a weight that is not float64.
  if (!c.attrs.none(3)) {
    input = input.to(out);
    if (weight.defined() && weight.dtype() != DType::Float64) weight = weight.to(out);
  }
  Tensor logp = log_softmax(input, cd);
  Tensor wb = weight.defined() ? reshape(weight.to(input.dtype()), channel_shape(input.dim(), C, cd)) : Tensor();
  if (prob_target(target)) {
    Tensor t = target.to(input.dtype());
    if (ls > 0) t = t * (1.0 - ls) + ls / static_cast<double>(C);
    Tensor prod = logp * t;
    if (wb.defined()) prod = prod * wb;
    if (red == "none") return {neg(sum(prod, {cd}))};
    Tensor total = neg(sum(prod));
    if (red == "sum") return {total};
    return {total / static_cast<double>(C == 0 ? 0 : input.numel() / C)};
  }
  Tensor nll = nll_loss(logp, target, weight, ignore, red);
  if (ls == 0) return {nll};
  // torch's label smoothing: (1 - ls) * nll + ls / C * (-sum_c w_c log p_c), ignored entries 0.
  PickedWeights pw = pick_weights(input, target, weight, ignore);
  Tensor smooth = neg(sum(wb.defined() ? logp * wb : logp, {cd}));
  smooth = where(pw.ignored, Scalar(0.0), smooth);
  Tensor sred;
  if (red == "none") sred = smooth;
  else if (red == "sum") sred = sum(smooth);
  else sred = sum(smooth) / sum(pw.w);
  return {nll * (1.0 - ls) + sred * (ls / static_cast<double>(C))};
}
KILN_REGISTER_DECOMP(cross_entropy, decomp_cross_entropy);

// ---- elementwise regression losses: (input, target; reduction[, beta]) ----
std::vector<TensorMeta> meta_pointwise_loss(const OpCall& c) {
  const std::string& red = c.attrs.str(0);
  check_reduction(red, c.name());
  Shape s = broadcast_shapes(c.in(0).sizes(), c.in(1).sizes(), c.name());
  DType t = result_type(c.inputs.subspan(0, 2));
  KILN_CHECK(is_floating_point(t), c.name(), ": expected floating input and target, got dtypes ", c.in(0).dtype(),
             " and ", c.in(1).dtype());
  if (c.op == OpId::smooth_l1_loss)
    KILN_CHECK(c.attrs.f(1) >= 0, "smooth_l1_loss: does not support negative values for beta, got ", c.attrs.f(1));
  return one_output(red == "none" ? s : Shape{}, t, output_device(c.inputs));
}
KILN_REGISTER_META(mse_loss, meta_pointwise_loss);
KILN_REGISTER_META(l1_loss, meta_pointwise_loss);
KILN_REGISTER_META(smooth_l1_loss, meta_pointwise_loss);

std::vector<Tensor> decomp_pointwise_loss(const OpCall& c) {
  meta_pointwise_loss(c);
  Tensor d = c.in(0) - c.in(1);
  Tensor loss;
  if (c.op == OpId::mse_loss) {
    loss = d * d;
  } else if (c.op == OpId::l1_loss) {
    loss = abs(d);
  } else {
    double beta = c.attrs.f(1);
    Tensor ad = abs(d);
    loss = beta == 0 ? ad : where(lt(ad, beta), d * d * (0.5 / beta), ad - 0.5 * beta);
  }
  return {reduce_loss(loss, c.attrs.str(0))};
}
KILN_REGISTER_DECOMP(mse_loss, decomp_pointwise_loss);
KILN_REGISTER_DECOMP(l1_loss, decomp_pointwise_loss);
KILN_REGISTER_DECOMP(smooth_l1_loss, decomp_pointwise_loss);

// ---- binary cross entropy: (input, target, weight?[, pos_weight?]; reduction) ----
std::vector<TensorMeta> meta_bce(const OpCall& c) {
  const Tensor &x = c.in(0), &t = c.in(1);
  const char* op = c.name();
  const std::string& red = c.attrs.str(0);
  check_reduction(red, op);
  KILN_CHECK(is_floating_point(x.dtype()), op, ": expected a floating input, got dtype ", x.dtype());
  KILN_CHECK(is_floating_point(t.dtype()), op, ": expected a floating target, got dtype ", t.dtype());
  KILN_CHECK(t.sizes() == x.sizes(), op, ": expected target of the same shape as input, got target of shape ",
             shape_str(t.sizes()), " and input of shape ", shape_str(x.sizes()));
  Shape s = x.sizes().vec();
  DType dt = promote_types(x.dtype(), t.dtype());
  for (size_t i = 2; i < c.inputs.size(); ++i) {
    const Tensor& w = c.in(i);
    if (!w.defined()) continue;
    KILN_CHECK(is_floating_point(w.dtype()), op, ": expected a floating ", (i == 2 ? "weight" : "pos_weight"),
               ", got dtype ", w.dtype());
    Shape b = broadcast_shapes(s, w.sizes(), op);
    KILN_CHECK(b == s, op, ": ", (i == 2 ? "weight" : "pos_weight"), " of shape ", shape_str(w.sizes()),
               " can't be broadcast to the input's shape ", shape_str(s));
    dt = promote_types(dt, w.dtype());
  }
  return one_output(red == "none" ? s : Shape{}, dt, x.device());
}
KILN_REGISTER_META(binary_cross_entropy, meta_bce);
KILN_REGISTER_META(binary_cross_entropy_with_logits, meta_bce);

// Logs are clamped at -100 (as torch) so a saturated probability gives a finite loss.
// Inputs outside [0, 1] (or NaN) are refused as torch does, compiled too (Note [Value checks]).
std::vector<Tensor> decomp_bce(const OpCall& c) {
  meta_bce(c);
  const Tensor &x = c.in(0), &t = c.in(1), &w = c.in(2);
  if (has_values_to_check(x)) {
    NoGradGuard no_grad;
    Tensor bad = logical_or(logical_or(lt(x, Scalar(0)), gt(x, Scalar(1))), isnan(x));
    KILN_CHECK(!any(bad).item<bool>(), "binary_cross_entropy: all elements of input should be between 0 and 1");
  }
  Tensor loss = neg(t * clamp_min(log(x), -100.0) + (1.0 - t) * clamp_min(log1p(neg(x)), -100.0));
  if (w.defined()) loss = loss * w;
  return {reduce_loss(loss, c.attrs.str(0))};
}
KILN_REGISTER_DECOMP(binary_cross_entropy, decomp_bce);

// loss = (1 - t) x - log_sigmoid(x) * (1 + (pos_weight - 1) t), with the
// stable log_sigmoid(x) = min(x, 0) - log1p(exp(-|x|)).
std::vector<Tensor> decomp_bce_logits(const OpCall& c) {
  meta_bce(c);
  const Tensor &x = c.in(0), &t = c.in(1), &w = c.in(2), &pw = c.in(3);
  // minimum, not clamp_max: at x == 0 its tie rule gives d/dx = 1/2 = d log_sigmoid(0)/dx.
  Tensor zero = zeros(IntArrayRef{}, TensorOptions(x.dtype()).device(x.device()));
  Tensor log_sig = minimum(x, zero) - log1p(exp(neg(abs(x))));
  if (pw.defined()) log_sig = log_sig * ((pw - 1.0) * t + 1.0);
  Tensor loss = (1.0 - t) * x - log_sig;
  if (w.defined()) loss = loss * w;
  return {reduce_loss(loss, c.attrs.str(0))};
}
KILN_REGISTER_DECOMP(binary_cross_entropy_with_logits, decomp_bce_logits);

}  // namespace

Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                const std::string& reduction) {
  return call_op1(OpId::nll_loss, {input, target, weight}, {ignore_index, reduction});
}
Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                     const std::string& reduction, double label_smoothing) {
  return call_op1(OpId::cross_entropy, {input, target, weight},
                  {ignore_index, reduction, label_smoothing, std::monostate{}});
}
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  return call_op1(OpId::mse_loss, {input, target}, {reduction});
}
Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  return call_op1(OpId::l1_loss, {input, target}, {reduction});
}
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction, double beta) {
  return call_op1(OpId::smooth_l1_loss, {input, target}, {reduction, beta});
}
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                            const std::string& reduction) {
  return call_op1(OpId::binary_cross_entropy, {input, target, weight}, {reduction});
}
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight,
                                        const std::string& reduction, const Tensor& pos_weight) {
  return call_op1(OpId::binary_cross_entropy_with_logits, {input, target, weight, pos_weight}, {reduction});
}

}  // namespace kiln
