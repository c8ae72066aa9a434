// optim::Adam and AdamW's step, torch.optim.Adam's algorithm (t counts each parameter's steps):
//   g = -grad if maximize else grad
//   weight decay: p *= 1 - lr * wd (decoupled, AdamW) or g += wd * p
//   m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
//   vmax = max(vmax, v) with amsgrad, used in place of v below
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
#include "kiln/optim/adam.h"

#include <cmath>

#include "kiln/autograd.h"
#include "kiln/compile.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/foreach.h"
#include "kiln/ops/pointwise.h"

namespace kiln::optim {
namespace {

struct Hyper {
  double lr, beta1, beta2, eps, weight_decay;
  bool amsgrad, maximize, decoupled;
};

// One group's tensors, position by position (max_exp_avg_sqs only with amsgrad).
struct Lists {
  std::vector<Tensor> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps;
};

// The group option "fused": 0, 1, or this for AdamOptions::fused unset (also what a state dict
// saved before the option existed gets).
constexpr double kFusedAuto = -1;

std::map<std::string, double> adam_defaults(const std::string& name, const AdamOptions& o) {
  KILN_CHECK(o.lr >= 0, name, ": invalid learning rate: ", o.lr);
  KILN_CHECK(o.eps >= 0, name, ": invalid epsilon value: ", o.eps);
  KILN_CHECK(o.beta1 >= 0 && o.beta1 < 1, name, ": invalid beta parameter at index 0: ", o.beta1);
  KILN_CHECK(o.beta2 >= 0 && o.beta2 < 1, name, ": invalid beta parameter at index 1: ", o.beta2);
  KILN_CHECK(o.weight_decay >= 0, name, ": invalid weight_decay value: ", o.weight_decay);
  return {{"lr", o.lr},
          {"beta1", o.beta1},
          {"beta2", o.beta2},
          {"eps", o.eps},
          {"weight_decay", o.weight_decay},
          {"amsgrad", o.amsgrad},
          {"maximize", o.maximize},
          {"foreach", o.foreach},
          {"fused", o.fused ? double(*o.fused) : kFusedAuto},
          {"decoupled_weight_decay", o.decoupled_weight_decay},
          {"capturable", o.capturable}};
}

// The bias corrections of step t: lr / (1 - beta1^t) and sqrt(1 - beta2^t).
struct Corrections {
  double step_size, bc2_sqrt;
};
Corrections corrections(const Tensor& step_t, const Hyper& h) {
  const double t = step_t.item<float>();
  return {h.lr / (1 - std::pow(h.beta1, t)), std::sqrt(1 - std::pow(h.beta2, t))};
}

// The step count and both moments of parameter i, updated in place; returns the denominator's
// square root before its bias correction (of vmax with amsgrad).
Tensor adam_moments(const Lists& s, size_t i, const Hyper& h) {
  Tensor p = s.params[i], m = s.exp_avgs[i], v = s.exp_avg_sqs[i], step_t = s.steps[i];
  step_t.add_(1);
  Tensor g = h.maximize ? s.grads[i].neg() : s.grads[i];
  if (h.weight_decay != 0) {
    if (h.decoupled)
      p.mul_(1 - h.lr * h.weight_decay);
    else
      g = g.add(p, h.weight_decay);
  }
  m.lerp_(g, 1 - h.beta1);
  v.mul_(h.beta2).addcmul_(g, g, 1 - h.beta2);
  if (!h.amsgrad) return v.sqrt();
  Tensor vmax = s.max_exp_avg_sqs[i];
  vmax.copy_(maximum(vmax, v));
  return vmax.sqrt();
}

void adam_single(const Lists& s, const Hyper& h) {
  for (size_t i = 0; i < s.params.size(); ++i) {
    Tensor denom = adam_moments(s, i, h);
    const Corrections c = corrections(s.steps[i], h);
    denom.div_(c.bc2_sqrt).add_(h.eps);
    Tensor p = s.params[i];
    p.addcdiv_(s.exp_avgs[i], denom, -c.step_size);
  }
}

// Note [Capturable optimizer steps]
// While compiling (compiler::is_compiling()), the step count is never read
// on the host: the bias corrections are 0-d float64 tensors computed from
// the step tensors, so a captured training step is the same graph at every
// step (as torch.optim's capturable=True), and no item() breaks the graph.
// The step tensors of CUDA parameters are made on the GPU while compiling (and
// with the option capturable), so that the compiled step has no host work and
// mode "reduce-overhead" replays it as one CUDA graph; a group with such steps
// takes this path in eager mode too (the fused and foreach paths read the
// count on the host).
void adam_capturable(const Lists& s, const Hyper& h) {
  for (size_t i = 0; i < s.params.size(); ++i) {
    Tensor denom = adam_moments(s, i, h);
    Tensor t = s.steps[i].to(kFloat64);
    Tensor neg_step_size = -h.lr / (1 - pow(h.beta1, t));
    Tensor bc2_sqrt = (1 - pow(h.beta2, t)).sqrt();
    denom = denom / bc2_sqrt + h.eps;
    Tensor p = s.params[i];
    p.add_(s.exp_avgs[i] / denom * neg_step_size);
  }
}

void adam_foreach(const Lists& s, const Hyper& h) {
  _foreach_add_(s.steps, 1);
  std::vector<Tensor> g = h.maximize ? _foreach_neg(s.grads) : s.grads;
  if (h.weight_decay != 0) {
    if (h.decoupled)
      _foreach_mul_(s.params, 1 - h.lr * h.weight_decay);
    else
      g = _foreach_add(g, s.params, h.weight_decay);
  }
  _foreach_lerp_(s.exp_avgs, g, 1 - h.beta1);
  _foreach_mul_(s.exp_avg_sqs, h.beta2);
  _foreach_addcmul_(s.exp_avg_sqs, g, g, 1 - h.beta2);
  std::vector<double> neg_step_size, bc2_sqrt;
  for (const Tensor& step_t : s.steps) {
    const Corrections c = corrections(step_t, h);
    neg_step_size.push_back(-c.step_size);
    bc2_sqrt.push_back(c.bc2_sqrt);
  }
  std::vector<Tensor> denom;
  if (h.amsgrad) {
    _foreach_maximum_(s.max_exp_avg_sqs, s.exp_avg_sqs);
    denom = _foreach_sqrt(s.max_exp_avg_sqs);
  } else {
    denom = _foreach_sqrt(s.exp_avg_sqs);
  }
  _foreach_div_(denom, bc2_sqrt);
  _foreach_add_(denom, h.eps);
  _foreach_addcdiv_(s.params, s.exp_avgs, denom, neg_step_size);
}

// Note [Fused Adam]: one _fused_adam_ call updates the whole group, each element of p, g, m, v
// (and vmax) read once and p, m, v written once, where adam_foreach makes ~9 passes. The
// arithmetic is adam_foreach's, op by op (math::AdamStep), so both agree to float rounding.
void adam_fused(const Lists& s, const Hyper& h) {
  _foreach_add_(s.steps, 1);
  std::vector<double> step_size, bc2_sqrt;
  for (const Tensor& step_t : s.steps) {
    const Corrections c = corrections(step_t, h);
    step_size.push_back(c.step_size);
    bc2_sqrt.push_back(c.bc2_sqrt);
  }
  _fused_adam_(s.params, s.grads, s.exp_avgs, s.exp_avg_sqs, s.max_exp_avg_sqs, step_size, bc2_sqrt, h.lr, h.beta1,
               h.beta2, h.eps, h.weight_decay, h.amsgrad, h.maximize, h.decoupled);
}

// What fused = unset picks: dense (contiguous) floating tensors, all on one device, which the
// CUDA kernel takes in its multi-tensor launches and the CPU one in a vectorized loop (Note
// [Fused Adam on the CPU]: a float step in ~1/5 of the foreach step's time, the same bits);
// anything else keeps the foreach path.
bool fused_by_default(const Lists& s) {
  const Device dev = s.params.front().device();
  for (const auto* list : {&s.params, &s.grads, &s.exp_avgs, &s.exp_avg_sqs, &s.max_exp_avg_sqs})
    for (const Tensor& t : *list)
      if (t.device() != dev || !is_floating_point(t.dtype()) || !t.is_contiguous()) return false;
  return true;
}

}  // namespace

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : Adam(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options) {}

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions options) : Adam("Adam", std::move(groups), options) {}

Adam::Adam(std::string name, std::vector<ParamGroup> groups, const AdamOptions& options)
    : Optimizer(name, std::move(groups), adam_defaults(name, options)) {}

void Adam::step() {
  NoGradGuard no_grad;
  for (ParamGroup& group : param_groups()) {
    GroupGrads gg = with_grads(group);
    if (gg.params.empty()) continue;
    const Hyper h{group.get("lr"),
                  group.get("beta1"),
                  group.get("beta2"),
                  group.get("eps"),
                  group.get("weight_decay"),
                  group.get("amsgrad") != 0,
                  group.get("maximize") != 0,
                  group.get("decoupled_weight_decay") != 0};
    Lists s;
    s.params = gg.params;
    s.grads = gg.grads;
    const bool capturable = group.get("capturable") != 0;
    bool device_steps = false;
    for (const Tensor& p : gg.params) {
      StateDict& st = state(p);
      if (!st.contains("step")) {
        const bool on_device = capturable || (compiler::is_compiling() && p.is_cuda());
        st.insert("step", scalar_tensor(0.0, TensorOptions(kFloat32).device(on_device ? p.device() : Device(kCPU))));
        st.insert("exp_avg", zeros_like(p));
        st.insert("exp_avg_sq", zeros_like(p));
      }
      if (h.amsgrad && !st.contains("max_exp_avg_sq")) st.insert("max_exp_avg_sq", zeros_like(p));
      s.steps.push_back(st.at("step"));
      device_steps = device_steps || !s.steps.back().is_cpu();
      s.exp_avgs.push_back(st.at("exp_avg"));
      s.exp_avg_sqs.push_back(st.at("exp_avg_sq"));
      if (h.amsgrad) s.max_exp_avg_sqs.push_back(st.at("max_exp_avg_sq"));
    }
    const double fused = group.get("fused");
    if (compiler::is_compiling() || capturable || device_steps)
      adam_capturable(s, h);
    else if (fused == 1 || (fused == kFusedAuto && fused_by_default(s)))
      adam_fused(s, h);
    else if (group.get("foreach") != 0)
      adam_foreach(s, h);
    else
      adam_single(s, h);
  }
}

}  // namespace kiln::optim
