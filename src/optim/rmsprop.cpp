// optim::RMSprop, torch.optim.RMSprop's algorithm:
//   g = -grad if maximize else grad;  g += weight_decay * p
//   v = alpha * v + (1 - alpha) * g * g
//   centered: a = lerp(a, g, 1 - alpha);  d = sqrt(v - a * a) + eps;  else d = sqrt(v) + eps
//   momentum > 0: b = momentum * b + g / d;  p -= lr * b;   else p -= lr * g / d
#include "kiln/optim/rmsprop.h"

#include "kiln/autograd.h"
#include "kiln/compile.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/foreach.h"
#include "kiln/ops/pointwise.h"

namespace kiln::optim {
namespace {

struct Hyper {
  double lr, alpha, eps, weight_decay, momentum;
  bool centered, maximize;
};

// One group's tensors, position by position (bufs with momentum, grad_avgs when centered).
struct Lists {
  std::vector<Tensor> params, grads, square_avgs, grad_avgs, bufs, steps;
};

std::map<std::string, double> rmsprop_defaults(const RMSpropOptions& o) {
  KILN_CHECK(o.lr >= 0, "RMSprop: invalid learning rate: ", o.lr);
  KILN_CHECK(o.eps >= 0, "RMSprop: invalid epsilon value: ", o.eps);
  KILN_CHECK(o.momentum >= 0, "RMSprop: invalid momentum value: ", o.momentum);
  KILN_CHECK(o.weight_decay >= 0, "RMSprop: invalid weight_decay value: ", o.weight_decay);
  KILN_CHECK(o.alpha >= 0, "RMSprop: invalid alpha value: ", o.alpha);
  return {{"lr", o.lr},
          {"alpha", o.alpha},
          {"eps", o.eps},
          {"weight_decay", o.weight_decay},
          {"momentum", o.momentum},
          {"centered", o.centered},
          {"maximize", o.maximize},
          {"foreach", o.foreach}};
}

// capturable: lr as a tensor operand while compiling (Note [Capturable optimizer steps]).
void rmsprop_single(const Lists& s, const Hyper& h, bool capturable) {
  for (size_t i = 0; i < s.params.size(); ++i) {
    Tensor p = s.params[i], v = s.square_avgs[i], step_t = s.steps[i];
    step_t.add_(1);
    Tensor g = h.maximize ? s.grads[i].neg() : s.grads[i];
    if (h.weight_decay != 0) g = g.add(p, h.weight_decay);
    v.mul_(h.alpha).addcmul_(g, g, 1 - h.alpha);
    Tensor avg;
    if (h.centered) {
      Tensor a = s.grad_avgs[i];
      a.lerp_(g, 1 - h.alpha);
      avg = addcmul(v, a, a, -1).sqrt_();
    } else {
      avg = v.sqrt();
    }
    avg.add_(h.eps);
    if (h.momentum > 0) {
      Tensor b = s.bufs[i];
      b.mul_(h.momentum).addcdiv_(g, avg);
      if (capturable)
        p.add_(b * -h.lr);
      else
        p.add_(b, -h.lr);
    } else if (capturable) {
      p.add_(g / avg * -h.lr);
    } else {
      p.addcdiv_(g, avg, -h.lr);
    }
  }
}

void rmsprop_foreach(const Lists& s, const Hyper& h) {
  _foreach_add_(s.steps, 1);
  std::vector<Tensor> g = h.maximize ? _foreach_neg(s.grads) : s.grads;
  if (h.weight_decay != 0) g = _foreach_add(g, s.params, h.weight_decay);
  _foreach_mul_(s.square_avgs, h.alpha);
  _foreach_addcmul_(s.square_avgs, g, g, 1 - h.alpha);
  std::vector<Tensor> avg;
  if (h.centered) {
    _foreach_lerp_(s.grad_avgs, g, 1 - h.alpha);
    avg = _foreach_sqrt(_foreach_addcmul(s.square_avgs, s.grad_avgs, s.grad_avgs, -1));
  } else {
    avg = _foreach_sqrt(s.square_avgs);
  }
  _foreach_add_(avg, h.eps);
  if (h.momentum > 0) {
    _foreach_mul_(s.bufs, h.momentum);
    _foreach_addcdiv_(s.bufs, g, avg);
    _foreach_add_(s.params, s.bufs, -h.lr);
  } else {
    _foreach_addcdiv_(s.params, g, avg, -h.lr);
  }
}

}  // namespace

RMSprop::RMSprop(std::vector<Tensor> params, RMSpropOptions options)
    : RMSprop(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options) {}

RMSprop::RMSprop(std::vector<ParamGroup> groups, RMSpropOptions options)
    : Optimizer("RMSprop", std::move(groups), rmsprop_defaults(options)) {}

void RMSprop::step() {
  NoGradGuard no_grad;
  for (ParamGroup& group : param_groups()) {
    GroupGrads gg = with_grads(group);
    if (gg.params.empty()) continue;
    const Hyper h{group.get("lr"),           group.get("alpha"),    group.get("eps"),
                  group.get("weight_decay"), group.get("momentum"), group.get("centered") != 0,
                  group.get("maximize") != 0};
    Lists s;
    s.params = gg.params;
    s.grads = gg.grads;
    for (const Tensor& p : gg.params) {
      StateDict& st = state(p);
      if (!st.contains("step")) {
        st.insert("step", scalar_tensor(0.0, TensorOptions(kFloat32)));
        st.insert("square_avg", zeros_like(p));
      }
      // Made when first needed, so momentum or centering turned on later works (torch would fail).
      if (h.momentum > 0 && !st.contains("momentum_buffer")) st.insert("momentum_buffer", zeros_like(p));
      if (h.centered && !st.contains("grad_avg")) st.insert("grad_avg", zeros_like(p));
      s.steps.push_back(st.at("step"));
      s.square_avgs.push_back(st.at("square_avg"));
      if (h.momentum > 0) s.bufs.push_back(st.at("momentum_buffer"));
      if (h.centered) s.grad_avgs.push_back(st.at("grad_avg"));
    }
    if (compiler::is_compiling())
      rmsprop_single(s, h, /*capturable=*/true);
    else if (group.get("foreach") != 0)
      rmsprop_foreach(s, h);
    else
      rmsprop_single(s, h, /*capturable=*/false);
  }
}

}  // namespace kiln::optim
