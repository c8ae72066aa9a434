// optim::AdamW, as torch.optim.AdamW: Adam with decoupled weight decay (default 1e-2).
#pragma once
#include "kiln/optim/adam.h"

namespace kiln::optim {

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
  bool maximize = false;
  bool foreach = true;
  std::optional<bool> fused = std::nullopt;  // as AdamOptions::fused
  bool capturable = false;                    // as AdamOptions::capturable
};

class AdamW : public Adam {
 public:
  explicit AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  explicit AdamW(std::vector<ParamGroup> groups, AdamWOptions options = {});
};

}  // namespace kiln::optim
