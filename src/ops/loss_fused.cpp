// Note [Fused cross_entropy]
// cross_entropy of [N, C] logits by its decomposition materializes log_softmax (N x C in the
// opmath type, kept for backward), then gathers, and its backward makes several more N x C
// passes (a zero-filled scatter, exp, a product, a difference). At a language model's head (N =
// 8192 tokens, C = 50304: 1.6 GB per float32 N x C tensor) those passes are a large share of a
// step. _fused_cross_entropy reads the logits once per row (online max and sum of exp, the
// target's logit, and for label smoothing the weighted sum of the row) and gives per-row losses,
// the rows' target weights (0 where ignored: the "mean" divisor) and logsumexp;
// _fused_cross_entropy_backward writes the logits' gradient in one pass, in their dtype:
//   d loss_i / d x_ic = (1 - ls) w_t (p_c - [c == t]) + (ls / C) (W p_c - w_c),
//   d lse_i / d x_ic = p_c,
// p_c = exp(x_ic - lse_i), w_t the target's class weight, W the sum of the class weights (C
// without weights); 0 on ignored rows. The reduction stays in ops on the [N] losses. Both ops
// index the row and the weights by the target, so both throw on one that is neither in [0, C)
// nor ignore_index (the CPU before reading; CUDA from a flag the kernel sets, read back once).
//
// Both read the logits as they are and compute in their opmath dtype: the losses, target weights
// and logsumexp are float32 for bf16/fp16 logits (and grad_loss is read in float32), so under
// autocast (cross_entropy's AUTOCAST_FP32_DTYPE) no cast kernel runs on the logits or their
// gradient, and without autocast only the reduced loss is cast back to the logits' dtype.
//
// cross_entropy's decomposition sends CUDA [N, C] logits with class-index targets (and a weight
// that needs no gradient; the op's VJP has the weight's gradient in ops, for direct calls) here;
// the CPU and compiled graphs keep the decomposition (the CPU kernels are the reference the CUDA
// ones are tested against).
#include "kiln/autograd.h"
#include "ops/grad_util.h"
#include "ops/loss_fused.h"
#include "ops/nn_util.h"
#include "ops/save_rule.h"

namespace kiln {

using namespace nn_detail;

namespace {

// (input [N, C], target [N] class indices, weight? [C]): the shared checks, naming `op`.
void check_fused(const Tensor& input, const Tensor& target, const Tensor& weight, double ls, const char* op) {
  KILN_CHECK(input.dim() == 2 && is_floating_point(input.dtype()), op, ": expected floating logits [N, C], got shape ",
             shape_str(input.sizes()), " of dtype ", input.dtype());
  KILN_CHECK(target.dim() == 1 && target.sizes()[0] == input.sizes()[0] && is_integral(target.dtype(), false), op,
             ": expected integer class indices of shape [", input.sizes()[0], "], got shape ",
             shape_str(target.sizes()), " of dtype ", target.dtype());
  KILN_CHECK(!weight.defined() ||
                 (weight.dim() == 1 && weight.numel() == input.sizes()[1] && is_floating_point(weight.dtype())),
             op, ": expected a floating class weight of shape [", input.sizes()[1], "], got ",
             weight.defined() ? shape_str(weight.sizes()) : std::string("none"));
  KILN_CHECK(ls >= 0.0 && ls <= 1.0, op, ": label_smoothing must be between 0.0 and 1.0, got ", ls);
}

std::vector<TensorMeta> meta_fused_ce(const OpCall& c) {
  const Tensor& x = c.in(0);
  check_fused(x, c.in(1), c.in(2), c.attrs.f(1), c.name());
  const Device d = output_device(c.inputs);
  TensorMeta loss, tw, lse;
  loss.sizes = tw.sizes = lse.sizes = {x.sizes()[0]};
  loss.dtype = tw.dtype = lse.dtype = opmath(x.dtype());
  loss.device = tw.device = lse.device = d;
  return {loss, tw, lse};
}
KILN_REGISTER_META(_fused_cross_entropy, meta_fused_ce);

std::vector<TensorMeta> meta_fused_ce_backward(const OpCall& c) {
  const Tensor &g = c.in(0), &x = c.in(1), &lse = c.in(4), &gl = c.in(5);
  const char* op = c.name();
  check_fused(x, c.in(2), c.in(3), c.attrs.f(1), op);
  const int64_t N = x.sizes()[0];
  KILN_CHECK(g.dim() == 1 && g.sizes()[0] == N && lse.dim() == 1 && lse.sizes()[0] == N &&
                 (!gl.defined() || (gl.dim() == 1 && gl.sizes()[0] == N)),
             op, ": expected grad_loss, logsumexp and grad_logsumexp of shape [", N, "], got ", shape_str(g.sizes()),
             ", ", shape_str(lse.sizes()), " and ", gl.defined() ? shape_str(gl.sizes()) : std::string("none"));
  return one_output(x.sizes().vec(), x.dtype(), output_device(c.inputs));
}
KILN_REGISTER_META(_fused_cross_entropy_backward, meta_fused_ce_backward);

// The VJP reads the inputs and the target weights and logsumexp, never the losses.
SaveSet save_fused_ce(uint64_t, const Attrs&) {
  SaveSet s;
  s.outputs = 0b110;
  return s;
}
KILN_REGISTER_SAVE_RULE(_fused_cross_entropy, save_fused_ce);

std::vector<Tensor> vjp_fused_ce(const VjpCall& v) {
  const Tensor &x = v.inputs[0], &target = v.inputs[1], &weight = v.inputs[2];
  const Tensor &tw = v.outputs[1], &lse = v.outputs[2];
  const int64_t ignore = v.attrs.i(0), C = x.sizes()[1];
  const double ls = v.attrs.f(1);
  std::vector<Tensor> r(3);
  // The outputs and their gradients are in the opmath dtype cd (float32 for bf16 logits); the
  // logits' gradient comes back in their own dtype.
  const DType cd = lse.dtype();
  const Tensor g = v.grads[0].to(cd);
  const Tensor gl = v.grads[2].to(cd);  // zeros unless the logsumexp output was used
  // The formula in ops (double backward; the class weight's gradient), in cd: the one-hot
  // targets and the kept rows as [N, C] / [N, 1] masks.
  auto hot = [&] {
    return eq(unsqueeze(target.to(kInt64), 1),
              arange(Scalar(int64_t(0)), Scalar(C), Scalar(int64_t(1)), TensorOptions(kInt64).device(x.device())))
        .to(cd);
  };
  auto keep = [&] { return unsqueeze(ne(target.to(kInt64), Scalar(ignore)).to(cd), 1); };
  if (v.needs(0)) {
    if (!grad_needs_graph(v)) {
      r[0] = call_op1(OpId::_fused_cross_entropy_backward, {g, x, target, weight, lse, gl}, v.attrs);
    } else {
      Tensor p = exp(x.to(cd) - unsqueeze(lse, 1));
      Tensor gx = unsqueeze(tw.to(cd), 1) * (p - hot());
      if (ls > 0) {
        Tensor w = weight.defined() ? unsqueeze(weight.to(cd), 0) : ones_like(p);
        Tensor W = weight.defined() ? sum(weight.to(cd)) : scalar(static_cast<double>(C));
        gx = gx * (1.0 - ls) + keep() * (p * W - w) * (ls / static_cast<double>(C));
      }
      r[0] = reduce_grad(v, 0, gx * unsqueeze(g, 1) + unsqueeze(gl, 1) * p);
    }
  }
  if (v.needs(2)) {
    // loss_i = (1 - ls) w_t (lse_i - x_it) + ls / C sum_c w_c (lse_i - x_ic) and target_weight_i
    // = w_t on kept rows.
    Tensor diff = unsqueeze(lse, 1) - x.to(cd), h = hot(), k = keep();
    Tensor per = h * diff * (1.0 - ls);
    if (ls > 0) per = per + diff * (ls / static_cast<double>(C));
    Tensor gw = sum(k * (unsqueeze(g, 1) * per + unsqueeze(v.grads[1].to(cd), 1) * h), {0});
    r[2] = reduce_grad(v, 2, gw);
  }
  return r;
}
KILN_REGISTER_VJP(_fused_cross_entropy, vjp_fused_ce);

}  // namespace

std::optional<Tensor> fused_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                                          int64_t ignore_index, const std::string& reduction, double label_smoothing) {
  if (!input.is_cuda() || input.dim() != 2 || !is_integral(target.dtype(), false) || target.dim() != 1) return {};
  if (weight.defined() && weight.requires_grad()) return {};
  if (!op_info(OpId::_fused_cross_entropy).kernels[static_cast<int>(DeviceType::CUDA)]) return {};
  std::vector<Tensor> r =
      call_op(OpId::_fused_cross_entropy, {input, target, weight}, {ignore_index, label_smoothing});
  if (reduction == "none") return r[0];
  if (reduction == "sum") return sum(r[0]);
  return sum(r[0]) / sum(r[1]);
}

}  // namespace kiln
