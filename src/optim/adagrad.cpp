// optim::Adagrad, torch.optim.Adagrad's algorithm (t counts each parameter's steps):
//   g = -grad if maximize else grad;  g += weight_decay * p
//   clr = lr / (1 + (t - 1) * lr_decay)
//   sum += g * g;  p -= clr * g / (sqrt(sum) + eps)
#include "kiln/optim/adagrad.h"

#include "kiln/autograd.h"
#include "kiln/compile.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/foreach.h"

namespace kiln::optim {
namespace {

struct Hyper {
  double lr, lr_decay, weight_decay, eps;
  bool maximize;
};

struct Lists {
  std::vector<Tensor> params, grads, sums, steps;
};

std::map<std::string, double> adagrad_defaults(const AdagradOptions& o) {
  KILN_CHECK(o.lr >= 0, "Adagrad: invalid learning rate: ", o.lr);
  KILN_CHECK(o.lr_decay >= 0, "Adagrad: invalid lr_decay value: ", o.lr_decay);
  KILN_CHECK(o.weight_decay >= 0, "Adagrad: invalid weight_decay value: ", o.weight_decay);
  KILN_CHECK(o.initial_accumulator_value >= 0,
             "Adagrad: invalid initial_accumulator_value value: ", o.initial_accumulator_value);
  KILN_CHECK(o.eps >= 0, "Adagrad: invalid epsilon value: ", o.eps);
  return {{"lr", o.lr},
          {"lr_decay", o.lr_decay},
          {"weight_decay", o.weight_decay},
          {"initial_accumulator_value", o.initial_accumulator_value},
          {"eps", o.eps},
          {"maximize", o.maximize},
          {"foreach", o.foreach}};
}

double clr(const Tensor& step_t, const Hyper& h) {
  const double t = step_t.item<float>();
  return h.lr / (1 + (t - 1) * h.lr_decay);
}

// capturable: while compiling the decayed lr is a 0-d tensor computed from the step tensor, never
// read on the host (Note [Capturable optimizer steps]).
void adagrad_single(const Lists& s, const Hyper& h, bool capturable) {
  for (size_t i = 0; i < s.params.size(); ++i) {
    Tensor p = s.params[i], sum = s.sums[i], step_t = s.steps[i];
    step_t.add_(1);
    Tensor g = h.maximize ? s.grads[i].neg() : s.grads[i];
    if (h.weight_decay != 0) g = g.add(p, h.weight_decay);
    if (capturable) {
      Tensor neg_lr_t = -h.lr / (1 + (step_t.to(kFloat64) - 1) * h.lr_decay);
      sum.addcmul_(g, g, 1);
      Tensor std = sum.sqrt().add_(h.eps);
      p.add_(g / std * neg_lr_t);
      continue;
    }
    const double lr_t = clr(step_t, h);
    sum.addcmul_(g, g, 1);
    Tensor std = sum.sqrt().add_(h.eps);
    p.addcdiv_(g, std, -lr_t);
  }
}

void adagrad_foreach(const Lists& s, const Hyper& h) {
  _foreach_add_(s.steps, 1);
  std::vector<Tensor> g = h.maximize ? _foreach_neg(s.grads) : s.grads;
  if (h.weight_decay != 0) g = _foreach_add(g, s.params, h.weight_decay);
  std::vector<double> neg_clr;
  for (const Tensor& step_t : s.steps) neg_clr.push_back(-clr(step_t, h));
  _foreach_addcmul_(s.sums, g, g, 1);
  std::vector<Tensor> std = _foreach_sqrt(s.sums);
  _foreach_add_(std, h.eps);
  _foreach_addcdiv_(s.params, g, std, neg_clr);
}

}  // namespace

Adagrad::Adagrad(std::vector<Tensor> params, AdagradOptions options)
    : Adagrad(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options) {}

Adagrad::Adagrad(std::vector<ParamGroup> groups, AdagradOptions options)
    : Optimizer("Adagrad", std::move(groups), adagrad_defaults(options)) {
  for (const ParamGroup& g : param_groups())
    for (const Tensor& p : g.params) init_state(p, g.get("initial_accumulator_value"));
}

void Adagrad::init_state(const Tensor& param, double initial_accumulator_value) {
  StateDict& st = state(param);
  if (st.contains("step")) return;
  st.insert("step", scalar_tensor(0.0, TensorOptions(kFloat32)));
  st.insert("sum", full_like(param, initial_accumulator_value));
}

void Adagrad::step() {
  NoGradGuard no_grad;
  for (ParamGroup& group : param_groups()) {
    GroupGrads gg = with_grads(group);
    if (gg.params.empty()) continue;
    const Hyper h{group.get("lr"), group.get("lr_decay"), group.get("weight_decay"), group.get("eps"),
                  group.get("maximize") != 0};
    Lists s;
    s.params = gg.params;
    s.grads = gg.grads;
    for (const Tensor& p : gg.params) {
      init_state(p, group.get("initial_accumulator_value"));  // groups added after construction
      s.steps.push_back(state(p).at("step"));
      s.sums.push_back(state(p).at("sum"));
    }
    if (compiler::is_compiling())
      adagrad_single(s, h, /*capturable=*/true);
    else if (group.get("foreach") != 0)
      adagrad_foreach(s, h);
    else
      adagrad_single(s, h, /*capturable=*/false);
  }
}

}  // namespace kiln::optim
