// optim::RMSprop, as torch.optim.RMSprop. State: "step" (0-d float32), "square_avg",
// "momentum_buffer" (momentum > 0) and "grad_avg" (centered).
#pragma once
#include "kiln/optim/optimizer.h"

namespace kiln::optim {

struct RMSpropOptions {
  double lr = 1e-2;
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0;
  double momentum = 0;
  bool centered = false;
  bool maximize = false;
  bool foreach = true;  // multi-tensor ops over each group (bit-identical to the per-tensor loop)
};

class RMSprop : public Optimizer {
 public:
  explicit RMSprop(std::vector<Tensor> params, RMSpropOptions options = {});
  explicit RMSprop(std::vector<ParamGroup> groups, RMSpropOptions options = {});
  using Optimizer::step;
  void step() override;

 protected:
  // Made together on a parameter's first step (momentum_buffer and grad_avg when first needed).
  std::vector<std::string> required_state() const override { return {"step", "square_avg"}; }
};

}  // namespace kiln::optim
