// optim::Adam, as torch.optim.Adam (betas given as beta1/beta2; group options "beta1", "beta2").
// State: "step" (0-d float32), "exp_avg", "exp_avg_sq", and "max_exp_avg_sq" with amsgrad.
#pragma once
#include <optional>

#include "kiln/optim/optimizer.h"

namespace kiln::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool amsgrad = false;
  bool maximize = false;
  bool foreach = true;  // multi-tensor ops over each group (bit-identical to the per-tensor loop)
  // One _fused_adam_ call per group (Note [Fused Adam]), torch's fused=True; it takes precedence
  // over foreach. Unset: fused where the group's parameters, gradients and states are dense
  // floating tensors on one device, CPU or CUDA (not while compiling, which keeps the
  // capturable step); torch leaves CPU parameters on the per-tensor loop unless asked.
  std::optional<bool> fused = std::nullopt;
  // AdamW's weight decay: p *= 1 - lr * weight_decay instead of adding weight_decay * p to the
  // gradient (torch's Adam(decoupled_weight_decay=True)).
  bool decoupled_weight_decay = false;
  // torch's capturable=True: the step count lives on the parameter's device and the update is
  // computed from it there, never read on the host, so a CUDA graph can capture the step (Note
  // [Capturable optimizer steps]). While compiling, a CUDA parameter's new state is made so
  // whatever this says, as torch.compile does.
  bool capturable = false;
};

class Adam : public Optimizer {
 public:
  explicit Adam(std::vector<Tensor> params, AdamOptions options = {});
  explicit Adam(std::vector<ParamGroup> groups, AdamOptions options = {});
  using Optimizer::step;
  void step() override;

 protected:
  // Made together on a parameter's first step (amsgrad's max_exp_avg_sq when first needed).
  std::vector<std::string> required_state() const override { return {"step", "exp_avg", "exp_avg_sq"}; }
  Adam(std::string name, std::vector<ParamGroup> groups, const AdamOptions& options);
};

}  // namespace kiln::optim
