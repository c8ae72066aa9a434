// Identity, Linear, Bilinear, Flatten, Unflatten — torch.nn names, parameter names and default init.
#pragma once
#include <cstdint>
#include <vector>

#include "kiln/nn/module.h"

namespace kiln::nn {

class Identity : public Module {
 public:
  Identity() : Module("Identity") {}
  Tensor forward(const Tensor& x) override { return x; }
};

// y = x Wᵀ + b; weight [out, in], bias [out]; W, b ~ U(-1/√in, 1/√in) (kaiming_uniform a=√5).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  void reset_parameters();
  int64_t in_features, out_features;
  Tensor weight, bias;
};

// y = x1ᵀ A x2 + b; weight [out, in1, in2], bias [out]; U(-1/√in1, 1/√in1).
class Bilinear : public Module {
 public:
  Bilinear(int64_t in1_features, int64_t in2_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x1, const Tensor& x2);
  Tensor operator()(const Tensor& x1, const Tensor& x2) { return forward(x1, x2); }
  std::string extra_repr() const override;
  void reset_parameters();
  int64_t in1_features, in2_features, out_features;
  Tensor weight, bias;
};

class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  int64_t start_dim, end_dim;
};

// Splits dim into unflattened_size (one entry may be -1), as torch.nn.Unflatten.
class Unflatten : public Module {
 public:
  Unflatten(int64_t dim, std::vector<int64_t> unflattened_size);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  int64_t dim;
  std::vector<int64_t> unflattened_size;
};

}  // namespace kiln::nn
