// Parameter-free layers: activations, Softmax, Dropout.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "kiln/nn/module.h"

namespace kiln::nn {

class ReLU : public Module {
 public:
  explicit ReLU(bool inplace = false) : Module("ReLU"), inplace(inplace) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  bool inplace;
};

// min(max(x, 0), 6), as torch.nn.ReLU6 (MobileNetV2's activation).
class ReLU6 : public Module {
 public:
  explicit ReLU6(bool inplace = false) : Module("ReLU6"), inplace(inplace) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  bool inplace;
};

// clamp(x, min_val, max_val) with hardtanh's gradient, as torch.nn.Hardtanh (max_val > min_val).
class Hardtanh : public Module {
 public:
  explicit Hardtanh(double min_val = -1.0, double max_val = 1.0, bool inplace = false);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double min_val, max_val;
  bool inplace;
};

class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");  // "none" or "tanh"
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::string approximate;
};

class SiLU : public Module {
 public:
  SiLU() : Module("SiLU") {}
  Tensor forward(const Tensor& x) override;
};

class Tanh : public Module {
 public:
  Tanh() : Module("Tanh") {}
  Tensor forward(const Tensor& x) override;
};

class Sigmoid : public Module {
 public:
  Sigmoid() : Module("Sigmoid") {}
  Tensor forward(const Tensor& x) override;
};

class Softmax : public Module {
 public:
  explicit Softmax(int64_t dim) : Module("Softmax"), dim(dim) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  int64_t dim;
};

// Zeroes elements with probability p in training mode and scales the rest by 1/(1-p); identity
// in eval mode. Draws from the default generator of the input's device.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5, bool inplace = false);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double p;
  bool inplace;
};

}  // namespace kiln::nn
