// optim::AdamW: Adam's step with decoupled weight decay (src/optim/adam.cpp).
#include "kiln/optim/adamw.h"

namespace kiln::optim {
namespace {
AdamOptions as_adam(const AdamWOptions& o) {
  return {.lr = o.lr,
          .beta1 = o.beta1,
          .beta2 = o.beta2,
          .eps = o.eps,
          .weight_decay = o.weight_decay,
          .amsgrad = o.amsgrad,
          .maximize = o.maximize,
          .foreach = o.foreach,
          .fused = o.fused,
          .decoupled_weight_decay = true,
          .capturable = o.capturable};
}
}  // namespace

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : AdamW(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options) {}

AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions options)
    : Adam("AdamW", std::move(groups), as_adam(options)) {}

}  // namespace kiln::optim
