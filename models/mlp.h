// The zoo's MLP (torch_zoo.py's MLP): d_in → n × (Linear d + ReLU) → d_out, all in `net`, so the
// state_dict keys are torch's net.0.weight ... net.{2n}.bias.
#pragma once
#include <cstdint>
#include <memory>

#include "kiln/nn/container.h"

namespace kiln::models {

class MLP : public nn::Module {
 public:
  explicit MLP(int64_t d_in = 784, int64_t d = 1024, int64_t n = 4, int64_t d_out = 10);
  Tensor forward(const Tensor& x) override;  // x [B, d_in] → logits [B, d_out]
  std::shared_ptr<nn::Sequential> net;
};

}  // namespace kiln::models
