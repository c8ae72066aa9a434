// VJP rules of softmax, log_softmax, layer_norm and batch_norm, written with
// kiln ops (so double backward works), so autograd does not differentiate
// through their decompositions. Statistics are recomputed from the saved input.
#include <utility>

#include "kiln/autograd.h"
#include "ops/grad_util.h"
#include "ops/nn_util.h"

namespace kiln {

using namespace nn_detail;

namespace {

std::vector<Tensor> vjp_softmax(const VjpCall& v) {
  const Tensor& y = v.outputs[0];
  Tensor g = v.grads[0].to(y.dtype());
  std::vector<Tensor> r(1);
  if (!v.needs(0)) return r;
  if (y.dim() == 0) return {reduce_grad(v, 0, g * 0.0)};  // softmax of one element is constant
  int64_t d = wrap_dim(v.attrs.i(0), y.dim(), "softmax");
  if (!grad_needs_graph(v)) {
    r[0] = reduce_grad(v, 0, call_op1(OpId::_softmax_backward_data, {g, y}, {d, v.op == OpId::log_softmax}));
    return r;
  }
  Tensor gx;
  if (v.op == OpId::softmax) gx = y * (g - sum(g * y, {d}, true));
  else gx = g - exp(y) * sum(g, {d}, true);
  r[0] = reduce_grad(v, 0, gx);
  return r;
}
KILN_REGISTER_VJP(softmax, vjp_softmax);
KILN_REGISTER_VJP(log_softmax, vjp_softmax);

// Shared by layer_norm and batch_norm: with xhat = (x - mean) * rstd over
// `dims`, and gh = dL/dxhat, dL/dx = rstd * (gh - mean(gh) - xhat * mean(gh * xhat)).
Tensor norm_input_grad(const Tensor& gh, const Tensor& xhat, const Tensor& rstd, const std::vector<int64_t>& dims) {
  return rstd * (gh - mean(gh, dims, true) - xhat * mean(gh * xhat, dims, true));
}

std::vector<Tensor> vjp_layer_norm(const VjpCall& v) {
  const Tensor &x0 = v.inputs[0], &w = v.inputs[1];
  int64_t k = static_cast<int64_t>(v.attrs.ints(0).size());
  double eps = v.attrs.f(1);
  std::vector<Tensor> r(3);
  if (x0.numel() == 0) {
    for (size_t i = 0; i < 3; ++i)
      if (v.needs(i)) r[i] = zeros(v.input_meta[i].sizes, TensorOptions(v.input_meta[i].dtype).device(x0.device()));
    return r;
  }
  if (!grad_needs_graph(v)) {
    Tensor g = v.grads[0].dtype() == x0.dtype() ? v.grads[0] : v.grads[0].to(x0.dtype());
    std::vector<Tensor> gs = call_op(OpId::_layer_norm_backward, {g, x0, w}, {v.attrs.ints(0), eps});
    for (size_t i = 0; i < 3; ++i)
      if (v.needs(i)) r[i] = reduce_grad(v, i, gs[i]);
    return r;
  }
  DType ct = opmath(x0.dtype());
  Tensor x = x0.to(ct), g = v.grads[0].to(ct);
  std::vector<int64_t> dims = last_dims(x.dim(), k), lead = last_dims(x.dim() - k, x.dim() - k);
  Tensor d = x - mean(x, dims, true);
  Tensor rstd = rsqrt(mean(d * d, dims, true) + eps);
  Tensor xhat = d * rstd;
  auto sum_lead = [&](const Tensor& t) { return lead.empty() ? t : sum(t, lead); };
  if (v.needs(0)) r[0] = reduce_grad(v, 0, norm_input_grad(w.defined() ? g * w.to(ct) : g, xhat, rstd, dims));
  if (v.needs(1)) r[1] = reduce_grad(v, 1, sum_lead(g * xhat));
  if (v.needs(2)) r[2] = reduce_grad(v, 2, sum_lead(g));
  return r;
}
KILN_REGISTER_VJP(layer_norm, vjp_layer_norm);

// Note [Fused norm and activation backward]
// As _batch_norm_backward (Note [Fused batch_norm backward] below): layer_norm's, softmax's,
// log_softmax's and gelu's rules written with ops make 3-15 passes over the activation (the
// statistics recomputed, each intermediate in float32); _layer_norm_backward,
// _softmax_backward_data and _gelu_backward (grad_pointwise.cpp) are one kernel each, as
// torch's native_layer_norm_backward, _softmax_backward_data and gelu_backward. They are
// NONDIFF, so a gradient that is itself differentiated (grad_needs_graph) runs the op formula.

// Note [Fused batch_norm backward]
// The rule below, written with ops, makes ~10 passes over the activation; the
// _batch_norm_backward prim makes two (per-channel sums of g and g * xhat, then grad_x) and is
// what eager backward and traced backward graphs run. It is NONDIFF, so when the gradient is
// itself to be differentiated (grad mode on in a create_graph pass, with anything here
// requiring grad: grad_needs_graph) the op formula runs instead and double backward works as before.
// batch_norm's gradients for x, weight and bias (r[ix], r[iw], r[ib], where v needs them) from g.
void batch_norm_grads(const VjpCall& v, const Tensor& g0, const Tensor& x0, const Tensor& w, const Tensor& rm,
                      const Tensor& rv, bool training, double eps, size_t ix, size_t iw, size_t ib,
                      std::vector<Tensor>& r) {
  if (x0.numel() == 0) {
    for (size_t i : {ix, iw, ib})
      if (v.needs(i)) r[i] = zeros(v.input_meta[i].sizes, TensorOptions(v.input_meta[i].dtype).device(x0.device()));
    return;
  }
  if (!grad_needs_graph(v)) {
    Tensor g = g0.dtype() == x0.dtype() ? g0 : g0.to(x0.dtype());
    std::vector<Tensor> gs = call_op(OpId::_batch_norm_backward,
                                     {g, x0, w, training ? Tensor() : rm, training ? Tensor() : rv}, {training, eps});
    for (auto [i, k] : {std::pair<size_t, size_t>{ix, 0}, {iw, 1}, {ib, 2}})
      if (v.needs(i)) r[i] = reduce_grad(v, i, gs[k]);
    return;
  }
  int64_t nd = x0.dim(), C = x0.sizes()[1];
  Shape cs = channel_shape(nd, C);
  std::vector<int64_t> dims{0};
  for (int64_t i = 2; i < nd; ++i) dims.push_back(i);
  DType ct = opmath(x0.dtype());
  Tensor x = x0.to(ct), g = g0.to(ct);
  Tensor xhat, rstd;
  if (training) {
    Tensor d = x - mean(x, dims, true);
    rstd = rsqrt(mean(d * d, dims, true) + eps);
    xhat = d * rstd;
  } else {
    rstd = reshape(rsqrt(rv.to(ct) + eps), cs);
    xhat = (x - reshape(rm.to(ct), cs)) * rstd;
  }
  if (v.needs(ix)) {
    Tensor gh = w.defined() ? g * reshape(w.to(ct), cs) : g;
    r[ix] = reduce_grad(v, ix, training ? norm_input_grad(gh, xhat, rstd, dims) : gh * rstd);
  }
  if (v.needs(iw)) r[iw] = reduce_grad(v, iw, reshape(sum(g * xhat, dims), {C}));
  if (v.needs(ib)) r[ib] = reduce_grad(v, ib, reshape(sum(g, dims), {C}));
}

std::vector<Tensor> vjp_batch_norm(const VjpCall& v) {
  std::vector<Tensor> r(5);
  batch_norm_grads(v, v.grads[0], v.inputs[0], v.inputs[3], v.inputs[1], v.inputs[2], v.attrs.b(0), v.attrs.f(2), 0,
                   3, 4, r);
  return r;
}
KILN_REGISTER_VJP(batch_norm, vjp_batch_norm);

// Note [Batch norm's training node]: output gradients arrive undefined where none flowed
// (UNDEFINED_GRADS), so the statistics' terms, d mean / dx = 1/M and d var / dx = 2 (x - mean) / M
// over a channel's M values, cost nothing when only the output is differentiated.
std::vector<Tensor> vjp_batch_norm_training(const VjpCall& v) {
  const Tensor &x0 = v.inputs[0], &w = v.inputs[1];
  std::vector<Tensor> r(3);
  if (v.grads[0].defined()) batch_norm_grads(v, v.grads[0], x0, w, Tensor(), Tensor(), true, v.attrs.f(0), 0, 1, 2, r);
  const bool gm = v.grads[1].defined(), gv = v.grads[2].defined();
  if (!v.needs(0) || !(gm || gv) || x0.numel() == 0) return r;
  const int64_t nd = x0.dim(), C = x0.sizes()[1];
  const Shape cs = channel_shape(nd, C);
  std::vector<int64_t> dims{0};
  for (int64_t i = 2; i < nd; ++i) dims.push_back(i);
  const DType ct = opmath(x0.dtype());
  const Tensor x = x0.to(ct);
  const double M = static_cast<double>(x0.numel() / C);
  Tensor t = zeros_like(x);
  if (gm) t = t + reshape(v.grads[1].to(ct), cs) * (1.0 / M);
  if (gv) t = t + (x - mean(x, dims, true)) * reshape(v.grads[2].to(ct), cs) * (2.0 / M);
  Tensor gx = reduce_grad(v, 0, t);
  r[0] = r[0].defined() ? r[0] + gx : gx;
  return r;
}
KILN_REGISTER_VJP(_batch_norm_training, vjp_batch_norm_training);

// binary_cross_entropy, as torch's binary_cross_entropy_backward: the input's
// gradient is w (x - t) / max(x (1 - x), 1e-12), finite at x = 0 and 1 where the
// decomposition's clamped logs would give 0; the target's is w (log(1 - x) - log(x)).
std::vector<Tensor> vjp_bce(const VjpCall& v) {
  const Tensor &x = v.inputs[0], &t = v.inputs[1], &w = v.inputs[2];
  const std::string& red = v.attrs.str(0);
  Tensor g = v.grads[0];
  if (red != "none") {
    if (red == "mean") g = g / static_cast<double>(std::max<int64_t>(x.numel(), 1));
    g = g.expand(x.sizes().vec());
  }
  if (w.defined()) g = g * w;
  std::vector<Tensor> r(3);
  if (v.needs(0)) r[0] = reduce_grad(v, 0, g * (x - t) / clamp_min(x * (1.0 - x), 1e-12));
  if (v.needs(1)) r[1] = reduce_grad(v, 1, g * (log1p(neg(x)) - log(x)));
  if (v.needs(2)) {
    Tensor loss = neg(t * clamp_min(log(x), -100.0) + (1.0 - t) * clamp_min(log1p(neg(x)), -100.0));
    Tensor gw = v.grads[0];
    if (red == "mean") gw = gw / static_cast<double>(std::max<int64_t>(x.numel(), 1));
    r[2] = reduce_grad(v, 2, gw * loss);
  }
  return r;
}
KILN_REGISTER_VJP(binary_cross_entropy, vjp_bce);

// Note [Flash attention]: the backward op recomputes the weights from the saved logsumexp.
std::vector<Tensor> vjp_flash_attention(const VjpCall& v) {
  std::vector<Tensor> r(3);
  if (!v.needs(0) && !v.needs(1) && !v.needs(2)) return r;
  std::vector<Tensor> g = call_op(OpId::_scaled_dot_product_flash_attention_backward,
                                  {v.grads[0].to(v.outputs[0].dtype()), v.inputs[0], v.inputs[1], v.inputs[2],
                                   v.outputs[0], v.outputs[1], v.grads[1].to(v.outputs[1].dtype())},
                                  v.attrs);
  for (size_t i = 0; i < 3; ++i)
    if (v.needs(i)) r[i] = g[i];
  return r;
}
KILN_REGISTER_VJP(_scaled_dot_product_flash_attention, vjp_flash_attention);

// The fused backward's own derivative (a second derivative of the attention): the backward's
// formula written with ops in the opmath dtype, as a function of its seven inputs, differentiated
// by autograd. It materializes the L x S weights (the fused kernel's saving is for first
// derivatives); torch's flash backward has none.
//   P = exp(q k^T * scale - lse) (zero where masked), D = rowsum(dO * out) - grad_lse,
//   dS = P * (dO v^T - D), dq = dS k * scale, dk = dS^T q * scale, dv = P^T dO.
std::vector<Tensor> vjp_flash_attention_backward(const VjpCall& v) {
  const bool causal = v.attrs.b(0), create_graph = is_grad_enabled();
  const double scale = v.attrs.f(1);
  std::vector<Tensor> r(7), in(7), wrt;
  std::vector<size_t> slot;
  EnableGradGuard grad;
  for (size_t i = 0; i < 7; ++i) {
    const Tensor& t = v.inputs[i];
    if (!t.defined()) continue;
    // Under create_graph an input with history is used as is (higher derivatives follow it);
    // otherwise a detached leaf stands for it.
    in[i] = create_graph && t.requires_grad() ? t : t.detach().requires_grad_(v.needs(i));
    if (v.needs(i)) {
      wrt.push_back(in[i]);
      slot.push_back(i);
    }
  }
  if (wrt.empty()) return r;
  const DType ct = opmath(in[1].dtype());
  Tensor go = in[0].to(ct), q = in[1].to(ct), k = in[2].to(ct), vv = in[3].to(ct), out = in[4].to(ct),
         lse = in[5].to(ct);
  const int64_t L = q.size(-2), S = k.size(-2);
  Tensor p = exp(matmul(q, transpose(k, -2, -1)) * scale - unsqueeze(lse, -1));
  if (causal) p = where(tril(ones({L, S}, TensorOptions(kBool).device(q.device()))), p, Scalar(0.0));
  Tensor d = sum(go * out, {-1}, false);
  if (in[6].defined()) d = d - in[6].to(ct);
  Tensor ds = p * (matmul(go, transpose(vv, -2, -1)) - unsqueeze(d, -1));
  const Tensor fwd[3] = {matmul(ds, k) * scale, matmul(transpose(ds, -2, -1), q) * scale,
                         matmul(transpose(p, -2, -1), go)};
  std::vector<Tensor> roots, cot;
  // An output that depends on no input needing a gradient (dv = P^T dO when only v needs one)
  // adds nothing, and autograd::grad refuses a root without history.
  for (size_t j = 0; j < 3; ++j)
    if (v.grads[j].defined() && fwd[j].requires_grad()) {
      roots.push_back(fwd[j]);
      cot.push_back(v.grads[j].to(ct));
    }
  if (roots.empty()) return r;
  std::vector<Tensor> g = autograd::grad(roots, wrt, cot, create_graph, create_graph, /*allow_unused=*/true);
  for (size_t j = 0; j < slot.size(); ++j)
    if (g[j].defined()) r[slot[j]] = g[j].to(v.inputs[slot[j]].dtype());
  return r;
}
KILN_REGISTER_VJP(_scaled_dot_product_flash_attention_backward, vjp_flash_attention_backward);

}  // namespace
}  // namespace kiln
