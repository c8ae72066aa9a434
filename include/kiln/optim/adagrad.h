// optim::Adagrad, as torch.optim.Adagrad. State: "step" (0-d float32) and "sum", made for every
// parameter at construction (as torch).
#pragma once
#include "kiln/optim/optimizer.h"

namespace kiln::optim {

struct AdagradOptions {
  double lr = 1e-2;
  double lr_decay = 0;
  double weight_decay = 0;
  double initial_accumulator_value = 0;
  double eps = 1e-10;
  bool maximize = false;
  bool foreach = true;  // multi-tensor ops over each group (bit-identical to the per-tensor loop)
};

class Adagrad : public Optimizer {
 public:
  explicit Adagrad(std::vector<Tensor> params, AdagradOptions options = {});
  explicit Adagrad(std::vector<ParamGroup> groups, AdagradOptions options = {});
  using Optimizer::step;
  void step() override;

 protected:
  // Made together for every parameter, in the constructor.
  std::vector<std::string> required_state() const override { return {"step", "sum"}; }

 private:
  void init_state(const Tensor& param, double initial_accumulator_value);
};

}  // namespace kiln::optim
