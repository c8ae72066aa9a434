// The losses of include/kiln/ops/nn_loss_extra.h as compositions of kiln ops, each written as
// torch 1.13's CompositeImplicitAutograd kernel or Python function is, so values and gradients
// (ties and clamps included) follow torch's. Checks of tensor values (class ranges, negative
// variances) are made compiled too (Note [Value checks]).
#include <cmath>
#include <numbers>

#include "kiln/autograd.h"
#include "kiln/ops/activation.h"
#include "kiln/ops/nn_loss_extra.h"
#include "ops/nn_util.h"

namespace kiln {

using namespace nn_detail;

namespace {

Shape loss_broadcast(const Tensor& a, const Tensor& b, const char* op) {
  KILN_CHECK(a.defined() && b.defined(), op, ": input and target must be defined");
  return broadcast_shapes(a.sizes(), b.sizes(), op);
}

void check_floating_pair(const Tensor& a, const Tensor& b, const char* op) {
  KILN_CHECK(is_floating_point(a.dtype()) && is_floating_point(b.dtype()), op,
             ": expected floating input and target, got dtypes ", a.dtype(), " and ", b.dtype());
}

// The value check of class-index targets: false when any lies outside [lo, hi).
bool targets_in_range(const Tensor& t, int64_t lo, int64_t hi) {
  if (!has_values_to_check(t)) return true;
  NoGradGuard no_grad;
  return !any(logical_or(lt(t, Scalar(lo)), ge(t, Scalar(hi)))).item<bool>();
}

// An int64 class-index target (torch's kernels take Long only).
void check_index_target(const Tensor& t, const char* op) {
  KILN_CHECK(t.defined(), op, ": target must be defined");
  KILN_CHECK(t.dtype() == kInt64, op, ": expected scalar type Long for target (class indices), but found ", t.dtype());
}

// [N, C] from torch's accepted (N, C), (C) and 0-d inputs of the margin losses.
Tensor as_frames(const Tensor& x) {
  if (x.dim() == 0) return reshape(x, {1, 1});
  if (x.dim() == 1) return unsqueeze(x, 0);
  return x;
}

void check_margin_input(const Tensor& x, const char* op) {
  KILN_CHECK(x.defined(), op, ": input must be defined");
  int64_t nd = x.dim();
  KILN_CHECK((nd == 2 && x.sizes()[1] != 0) || (nd == 1 && x.sizes()[0] != 0) || nd == 0, op,
             ": Expected non-empty vector or matrix with optional 0-dim batch size, but got: ", shape_str(x.sizes()));
  KILN_CHECK(is_floating_point(x.dtype()), op, ": expected a floating input, got dtype ", x.dtype());
}

}  // namespace

Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction, bool log_target) {
  const char* op = "kl_div";
  KILN_CHECK(reduction == "none" || reduction == "mean" || reduction == "sum" || reduction == "batchmean", op,
             ": reduction must be 'none', 'batchmean', 'mean' or 'sum', got '", reduction, "'");
  loss_broadcast(input, target, op);
  KILN_CHECK(is_floating_point(input.dtype()) && is_floating_point(target.dtype()), op,
             ": Integral inputs not supported, got dtypes ", input.dtype(), " and ", target.dtype());
  Tensor loss = log_target ? exp(target) * (target - input) : xlogy(target, target) - target * input;
  if (reduction != "batchmean") return reduce_loss(loss, reduction);
  // torch: the sum divided by the batch size, and the plain sum of a 0-d input.
  Tensor s = sum(loss);
  return input.dim() == 0 ? s : s / static_cast<double>(input.sizes()[0]);
}

Tensor huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction, double delta) {
  const char* op = "huber_loss";
  check_reduction(reduction, op);
  loss_broadcast(input, target, op);
  check_floating_pair(input, target, op);
  KILN_CHECK(delta > 0, op, ": does not support non-positive values for delta, got ", delta);
  Tensor d = input - target;
  Tensor ad = abs(d);
  // |d| == delta takes the linear branch: its gradient there is delta * sign(d), as torch's.
  return reduce_loss(where(lt(ad, delta), d * d * 0.5, (ad - 0.5 * delta) * delta), reduction);
}

Tensor soft_margin_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  const char* op = "soft_margin_loss";
  check_reduction(reduction, op);
  Shape s = loss_broadcast(input, target, op);
  check_floating_pair(input, target, op);
  // torch writes into an input-shaped output: the target may broadcast to the input, not beyond.
  KILN_CHECK(s == input.sizes().vec(), op, ": output with shape ", shape_str(input.sizes()),
             " doesn't match the broadcast shape ", shape_str(s), " (target of shape ", shape_str(target.sizes()), ")");
  return reduce_loss(log1p(exp(neg(input * target))), reduction);
}

Tensor multilabel_soft_margin_loss(const Tensor& input, const Tensor& target, const Tensor& weight,
                                   const std::string& reduction) {
  const char* op = "multilabel_soft_margin_loss";
  check_reduction(reduction, op);
  loss_broadcast(input, target, op);
  check_floating_pair(input, target, op);
  KILN_CHECK(input.dim() >= 1, op, ": expected input of shape (N, C) or (C), got a 0-d input");
  Tensor loss = neg(target * logsigmoid(input) + (1.0 - target) * logsigmoid(neg(input)));
  if (weight.defined()) loss = loss * weight;
  int64_t cd = input.dim() - 1;
  loss = sum(loss, {loss.dim() - 1}) / static_cast<double>(input.sizes()[cd]);
  return reduce_loss(loss, reduction);
}

Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target, double margin,
                           const std::string& reduction) {
  const char* op = "margin_ranking_loss";
  check_reduction(reduction, op);
  KILN_CHECK(input1.defined() && input2.defined() && target.defined(), op,
             ": input1, input2 and target must be defined");
  KILN_CHECK(input1.dim() == input2.dim() && input1.dim() == target.dim(), op,
             " : All input tensors should have same dimension but got sizes: input1: ", shape_str(input1.sizes()),
             ", input2: ", shape_str(input2.sizes()), ", target: ", shape_str(target.sizes()));
  return reduce_loss(clamp_min(neg(target) * (input1 - input2) + margin, 0.0), reduction);
}

Tensor hinge_embedding_loss(const Tensor& input, const Tensor& target, double margin, const std::string& reduction) {
  const char* op = "hinge_embedding_loss";
  check_reduction(reduction, op);
  loss_broadcast(input, target, op);
  KILN_CHECK(is_floating_point(input.dtype()), op, ": expected a floating input, got dtype ", input.dtype());
  Tensor margin_clamp = clamp_min(neg(input) + margin, 0.0);
  Tensor out =
      where(ne(target, Scalar(1)), margin_clamp, Scalar(0.0)) + where(ne(target, Scalar(-1)), input, Scalar(0.0));
  return reduce_loss(out, reduction);
}

Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target, double margin,
                             const std::string& reduction) {
  const char* op = "cosine_embedding_loss";
  check_reduction(reduction, op);
  KILN_CHECK(input1.defined() && input2.defined() && target.defined(), op,
             ": input1, input2 and target must be defined");
  int64_t td = target.dim();
  KILN_CHECK(td == 1 || td == 0, op,
             ": 0D or 1D target tensor expected, multi-target not supported, got target of shape ",
             shape_str(target.sizes()));
  if (td == 1) {
    KILN_CHECK(input1.dim() == 2 && input2.dim() == 2, op,
               ": 1D target tensor expects 2D input tensors, but found inputs with sizes ", shape_str(input1.sizes()),
               " and ", shape_str(input2.sizes()), ".");
  } else {
    KILN_CHECK(input1.dim() == 1 && input2.dim() == 1, op,
               ": 0D target tensor expects 1D input tensors, but found inputs with sizes ", shape_str(input1.sizes()),
               " and ", shape_str(input2.sizes()), ".");
  }
  constexpr double kEps = 1e-12;  // torch's EPSILON
  Tensor prod_sum = sum(input1 * input2, {td});
  Tensor mag1 = sum(input1 * input1, {td}) + kEps;
  Tensor mag2 = sum(input2 * input2, {td}) + kEps;
  Tensor cos = prod_sum / sqrt(mag1 * mag2);
  Tensor pos = neg(cos) + 1.0;
  Tensor negv = clamp_min(cos - margin, 0.0);
  Tensor out = where(eq(target, Scalar(1)), pos, Scalar(0.0)) + where(eq(target, Scalar(-1)), negv, Scalar(0.0));
  return reduce_loss(out, reduction);
}

Tensor multi_margin_loss(const Tensor& input, const Tensor& target, int64_t p, double margin, const Tensor& weight,
                         const std::string& reduction) {
  const char* op = "multi_margin_loss";
  check_reduction(reduction, op);
  KILN_CHECK(p == 1 || p == 2, op, ": only p == 1 and p == 2 supported, got p = ", p);
  KILN_CHECK(!weight.defined() || weight.dim() == 1, op, ": weight must be one-dimensional, got weight of shape ",
             shape_str(weight.sizes()));
  check_margin_input(input, op);
  check_index_target(target, op);
  const int64_t nframe = input.dim() <= 1 ? 1 : input.sizes()[0];
  const int64_t C = input.dim() == 0 ? 1 : input.sizes()[input.dim() - 1];
  KILN_CHECK(target.dim() <= 1 && target.numel() == nframe, op, ": inconsistent target size, expected ", nframe,
             " but got ", shape_str(target.sizes()));
  KILN_CHECK(!weight.defined() || weight.numel() == C, op, ": inconsistent weight size, expected ", C, " but got ",
             shape_str(weight.sizes()));
  KILN_CHECK(targets_in_range(target, 0, C), op, ": target out of range (expected class indices in [0, ", C, "))");
  Tensor x = as_frames(input);              // [N, C]
  Tensor t = reshape(target, {nframe, 1});  // [N, 1]
  Tensor z = clamp_min(x - gather(x, 1, t) + margin, 0.0);
  if (p == 2) z = z * z;
  if (weight.defined()) z = z * reshape(index_select(weight, 0, flatten(t)), {nframe, 1});
  Tensor own = eq(arange(C, TensorOptions(kInt64).device(x.device())).reshape({1, C}), t);
  Tensor per = sum(where(own, Scalar(0.0), z), {1}) / static_cast<double>(C);  // [N]
  if (reduction == "none") return target.dim() == 0 ? reshape(per, {}) : per;
  if (reduction == "sum") return sum(per);
  // torch's kernel divides the sum by the frame count: an empty batch gives 0, not NaN.
  return sum(per) / static_cast<double>(std::max<int64_t>(nframe, 1));
}

Tensor multilabel_margin_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  const char* op = "multilabel_margin_loss";
  check_reduction(reduction, op);
  check_margin_input(input, op);
  check_index_target(target, op);
  int64_t nframe, C;
  if (input.dim() <= 1) {
    nframe = 1;
    C = input.dim() == 0 ? 1 : input.sizes()[0];
    KILN_CHECK(target.dim() <= 1 && target.numel() == C, op, ": inconsistent size ", shape_str(target.sizes()),
               " for argument #2 'target' (input of shape ", shape_str(input.sizes()), ")");
  } else {
    nframe = input.sizes()[0];
    C = input.sizes()[1];
    KILN_CHECK(target.dim() == 2 && target.sizes()[0] == nframe && target.sizes()[1] == C, op, ": inconsistent size ",
               shape_str(target.sizes()), " for argument #2 'target' (input of shape ", shape_str(input.sizes()), ")");
  }
  KILN_CHECK(targets_in_range(target, -1, C), op,
             ": argument #2 'target' is out of range (expected class indices in [0, ", C, ") or -1)");
  Tensor x = as_frames(input);              // [N, C]
  Tensor t = reshape(target, {nframe, C});  // [N, J = C]
  // A row's targets are its entries before the first -1 (repeats count each time, as torch).
  Tensor valid = ne(cumprod(ne(t, Scalar(-1)).to(kInt64), 1), Scalar(0));
  Tensor safe = where(valid, t, Scalar(int64_t(0)));
  Tensor classes = arange(C, TensorOptions(kInt64).device(x.device())).reshape({1, 1, C});
  Tensor is_target = any(logical_and(eq(unsqueeze(safe, 2), classes), unsqueeze(valid, 2)), 1);  // [N, C]
  Tensor xy = gather(x, 1, safe);                                                                // [N, J]
  Tensor terms = clamp_min(unsqueeze(x, 1) - unsqueeze(xy, 2) + 1.0, 0.0);                       // [N, J, C]
  Tensor counted = logical_and(unsqueeze(valid, 2), logical_not(unsqueeze(is_target, 1)));
  Tensor per = sum(where(counted, terms, Scalar(0.0)), {1, 2}) / static_cast<double>(C);  // [N]
  if (reduction == "none") return target.dim() <= 1 ? reshape(per, {}) : per;
  return reduce_loss(per, reduction);
}

Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative, double margin,
                           double p, double eps, bool swap, const std::string& reduction) {
  const char* op = "triplet_margin_loss";
  check_reduction(reduction, op);
  KILN_CHECK(anchor.defined() && positive.defined() && negative.defined(), op,
             ": anchor, positive and negative must be defined");
  KILN_CHECK(anchor.dim() == positive.dim() && positive.dim() == negative.dim(), op,
             ": All inputs should have same dimension but got ", anchor.dim(), "D, ", positive.dim(), "D and ",
             negative.dim(), "D inputs.");
  Tensor dist_pos = pairwise_distance(anchor, positive, p, eps);
  Tensor dist_neg = pairwise_distance(anchor, negative, p, eps);
  if (swap) dist_neg = minimum(dist_neg, pairwise_distance(positive, negative, p, eps));
  return reduce_loss(clamp_min(dist_pos - dist_neg + margin, 0.0), reduction);
}

Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, bool log_input, bool full, double eps,
                        const std::string& reduction) {
  const char* op = "poisson_nll_loss";
  check_reduction(reduction, op);
  loss_broadcast(input, target, op);
  check_floating_pair(input, target, op);
  Tensor loss = log_input ? exp(input) - target * input : input - target * log(input + eps);
  if (full) {
    // Stirling's approximation of log(target!), 0 for target <= 1 (torch's masked_fill).
    Tensor stirling = target * log(target) - target + log(target * (2.0 * std::numbers::pi)) * 0.5;
    loss = loss + where(le(target, Scalar(1)), Scalar(0.0), stirling);
  }
  return reduce_loss(loss, reduction);
}

Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var_in, bool full, double eps,
                         const std::string& reduction) {
  const char* op = "gaussian_nll_loss";
  KILN_CHECK(input.defined() && target.defined() && var_in.defined(), op, ": input, target and var must be defined");
  Tensor var = var_in;
  if (!(var.sizes() == input.sizes())) {
    // Homoscedastic: var is input's shape without its last dim, or with a last dim of 1.
    IntArrayRef is = input.sizes(), vs = var.sizes();
    std::vector<int64_t> lead(is.begin(), is.empty() ? is.end() : is.end() - 1);
    if (vs.vec() == lead) {
      var = unsqueeze(var, -1);
    } else {
      bool ok = !vs.empty() && vs.back() == 1 && std::vector<int64_t>(vs.begin(), vs.end() - 1) == lead;
      KILN_CHECK(ok, op, ": var is of incorrect size: var of shape ", shape_str(vs), " for input of shape ",
                 shape_str(is), " (expected the input's shape, or it without its last dim or with a last dim of 1)");
    }
  }
  check_reduction(reduction, op);
  check_floating_pair(input, target, op);
  KILN_CHECK(is_floating_point(var.dtype()), op, ": expected a floating var, got dtype ", var.dtype());
  if (has_values_to_check(var)) {
    NoGradGuard no_grad;
    KILN_CHECK(!any(lt(var, Scalar(0))).item<bool>(), op, ": var has negative entry/entries");
  }
  // torch clamps a clone of var in place under no_grad: the value is clamped, the gradient passes
  // straight through to var.
  var = var + (clamp_min(var, eps) - var).detach();
  Tensor d = input - target;
  Tensor loss = (log(var) + d * d / var) * 0.5;
  if (full) loss = loss + 0.5 * std::log(2.0 * std::numbers::pi);
  return reduce_loss(loss, reduction);
}

}  // namespace kiln
