// optim::SGD, torch.optim.SGD's algorithm:
//   g = -grad if maximize else grad;  g += weight_decay * p
//   with momentum: b = g on the first step, else momentum * b + (1 - dampening) * g;
//                  g = g + momentum * b (nesterov) or g = b
//   p -= lr * g
#include "kiln/optim/sgd.h"

#include "kiln/autograd.h"
#include "kiln/compile.h"
#include "kiln/ops/foreach.h"

namespace kiln::optim {
namespace {

struct Hyper {
  double lr, momentum, dampening, weight_decay;
  bool nesterov, maximize;
};

std::map<std::string, double> sgd_defaults(const SGDOptions& o) {
  KILN_CHECK(o.lr >= 0, "SGD: invalid learning rate: ", o.lr);
  KILN_CHECK(o.momentum >= 0, "SGD: invalid momentum value: ", o.momentum);
  KILN_CHECK(o.weight_decay >= 0, "SGD: invalid weight_decay value: ", o.weight_decay);
  KILN_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0),
             "SGD: Nesterov momentum requires a momentum and zero dampening (got momentum ", o.momentum, ", dampening ",
             o.dampening, ")");
  return {{"lr", o.lr},
          {"momentum", o.momentum},
          {"dampening", o.dampening},
          {"weight_decay", o.weight_decay},
          {"nesterov", o.nesterov},
          {"maximize", o.maximize},
          {"foreach", o.foreach}};
}

// bufs[i] is undefined until a parameter's first step with momentum; it is created here.
// capturable: while compiling, lr enters as a tensor operand (a graph input), not an attr, so a
// scheduler's changing lr keeps the captured step one graph (Note [Capturable optimizer steps]).
void sgd_single(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, std::vector<Tensor>& bufs,
                const Hyper& h, bool capturable) {
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor p = params[i];
    Tensor g = h.maximize ? grads[i].neg() : grads[i];
    if (h.weight_decay != 0) g = g.add(p, h.weight_decay);
    if (h.momentum != 0) {
      if (!bufs[i].defined())
        bufs[i] = g.clone();
      else
        bufs[i].mul_(h.momentum).add_(g, 1 - h.dampening);
      g = h.nesterov ? g.add(bufs[i], h.momentum) : bufs[i];
    }
    if (capturable)
      p.add_(g * -h.lr);
    else
      p.add_(g, -h.lr);
  }
}

void sgd_foreach(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, std::vector<Tensor>& bufs,
                 const Hyper& h) {
  std::vector<Tensor> g = h.maximize ? _foreach_neg(grads) : grads;
  if (h.weight_decay != 0) g = _foreach_add(g, params, h.weight_decay);
  if (h.momentum != 0) {
    std::vector<Tensor> old_bufs, old_g;
    for (size_t i = 0; i < params.size(); ++i) {
      if (bufs[i].defined()) {
        old_bufs.push_back(bufs[i]);
        old_g.push_back(g[i]);
      } else {
        bufs[i] = g[i].clone();
      }
    }
    if (!old_bufs.empty()) {
      _foreach_mul_(old_bufs, h.momentum);
      _foreach_add_(old_bufs, old_g, 1 - h.dampening);
    }
    g = h.nesterov ? _foreach_add(g, bufs, h.momentum) : bufs;
  }
  _foreach_add_(params, g, -h.lr);
}

}  // namespace

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : SGD(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options) {}

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions options)
    : Optimizer("SGD", std::move(groups), sgd_defaults(options)) {}

void SGD::step() {
  NoGradGuard no_grad;
  for (ParamGroup& group : param_groups()) {
    GroupGrads gg = with_grads(group);
    if (gg.params.empty()) continue;
    const Hyper h{group.get("lr"),           group.get("momentum"),      group.get("dampening"),
                  group.get("weight_decay"), group.get("nesterov") != 0, group.get("maximize") != 0};
    std::vector<Tensor> bufs;
    for (const Tensor& p : gg.params) bufs.push_back(state_or_none(p, "momentum_buffer"));
    if (compiler::is_compiling())
      sgd_single(gg.params, gg.grads, bufs, h, /*capturable=*/true);
    else if (group.get("foreach") != 0)
      sgd_foreach(gg.params, gg.grads, bufs, h);
    else
      sgd_single(gg.params, gg.grads, bufs, h, /*capturable=*/false);
    if (h.momentum != 0)
      for (size_t i = 0; i < gg.params.size(); ++i) state(gg.params[i]).insert("momentum_buffer", bufs[i]);
  }
}

}  // namespace kiln::optim
