// optim::SGD: stochastic gradient descent with momentum, dampening, Nesterov momentum, weight
// decay and maximize, as torch.optim.SGD. State: "momentum_buffer" (when momentum != 0).
#pragma once
#include "kiln/optim/optimizer.h"

namespace kiln::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  bool maximize = false;
  bool foreach = true;  // multi-tensor ops over each group (bit-identical to the per-tensor loop)
};

class SGD : public Optimizer {
 public:
  explicit SGD(std::vector<Tensor> params, SGDOptions options = {});
  explicit SGD(std::vector<ParamGroup> groups, SGDOptions options = {});
  using Optimizer::step;
  void step() override;
};

}  // namespace kiln::optim
