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

// x > 0 ? x : negative_slope * x, as torch.nn.LeakyReLU.
class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(double negative_slope = 0.01, bool inplace = false)
      : Module("LeakyReLU"), negative_slope(negative_slope), inplace(inplace) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double negative_slope;
  bool inplace;
};

class ELU : public Module {
 public:
  explicit ELU(double alpha = 1.0, bool inplace = false) : Module("ELU"), alpha(alpha), inplace(inplace) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double alpha;
  bool inplace;
};

class SELU : public Module {
 public:
  explicit SELU(bool inplace = false) : Module("SELU"), inplace(inplace) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  bool inplace;
};

class CELU : public Module {
 public:
  explicit CELU(double alpha = 1.0, bool inplace = false) : Module("CELU"), alpha(alpha), inplace(inplace) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double alpha;
  bool inplace;
};

class Softplus : public Module {
 public:
  explicit Softplus(double beta = 1, double threshold = 20) : Module("Softplus"), beta(beta), threshold(threshold) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double beta, threshold;
};

class Softsign : public Module {
 public:
  Softsign() : Module("Softsign") {}
  Tensor forward(const Tensor& x) override;
};

class Hardsigmoid : public Module {
 public:
  explicit Hardsigmoid(bool inplace = false) : Module("Hardsigmoid"), inplace(inplace) {}
  Tensor forward(const Tensor& x) override;
  bool inplace;
};

class Hardswish : public Module {
 public:
  explicit Hardswish(bool inplace = false) : Module("Hardswish"), inplace(inplace) {}
  Tensor forward(const Tensor& x) override;
  bool inplace;
};

class Mish : public Module {
 public:
  explicit Mish(bool inplace = false) : Module("Mish"), inplace(inplace) {}
  Tensor forward(const Tensor& x) override;
  bool inplace;
};

class LogSigmoid : public Module {
 public:
  LogSigmoid() : Module("LogSigmoid") {}
  Tensor forward(const Tensor& x) override;
};

// The first half of x along dim times the sigmoid of the second, as torch.nn.GLU.
class GLU : public Module {
 public:
  explicit GLU(int64_t dim = -1) : Module("GLU"), dim(dim) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  int64_t dim;
};

// x > 0 ? x : weight * x with a learned weight: one value, or one per channel (dim 1), as
// torch.nn.PReLU; the parameter is "weight", [num_parameters], filled with init.
class PReLU : public Module {
 public:
  explicit PReLU(int64_t num_parameters = 1, double init = 0.25);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  int64_t num_parameters;
  Tensor weight;
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

// The layers over src/ops/activation_extra.cpp, as torch.nn's.
// x >= 0 ? x : x * r: r uniform in [lower, upper] per element in training, (lower + upper) / 2 in eval.
class RReLU : public Module {
 public:
  explicit RReLU(double lower = 1.0 / 8, double upper = 1.0 / 3, bool inplace = false);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double lower, upper;
  bool inplace;
};

class Tanhshrink : public Module {
 public:
  Tanhshrink() : Module("Tanhshrink") {}
  Tensor forward(const Tensor& x) override;
};

class Softshrink : public Module {
 public:
  explicit Softshrink(double lambd = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double lambd;
};

class Hardshrink : public Module {
 public:
  explicit Hardshrink(double lambd = 0.5) : Module("Hardshrink"), lambd(lambd) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double lambd;
};

// softmax(-x, dim); dim is required (torch's implicit-dim default is deprecated).
class Softmin : public Module {
 public:
  explicit Softmin(int64_t dim) : Module("Softmin"), dim(dim) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  int64_t dim;
};

// The dropout variants' shared state (torch's _DropoutNd): identity in eval mode; they draw from the
// default generator of the input's device; inplace writes the result into the caller's tensor.
class DropoutNd : public Module {
 public:
  std::string extra_repr() const override;
  double p;
  bool inplace;

 protected:
  DropoutNd(const char* name, double p, bool inplace);
};
class AlphaDropout : public DropoutNd {
 public:
  explicit AlphaDropout(double p = 0.5, bool inplace = false) : DropoutNd("AlphaDropout", p, inplace) {}
  Tensor forward(const Tensor& x) override;
};
// One draw per (N, C) channel.
class FeatureAlphaDropout : public DropoutNd {
 public:
  explicit FeatureAlphaDropout(double p = 0.5, bool inplace = false) : DropoutNd("FeatureAlphaDropout", p, inplace) {}
  Tensor forward(const Tensor& x) override;
};
// Whole channels of an (N, C, H, W) or (N, C, L) input (kiln::dropout2d).
class Dropout2d : public DropoutNd {
 public:
  explicit Dropout2d(double p = 0.5, bool inplace = false) : DropoutNd("Dropout2d", p, inplace) {}
  Tensor forward(const Tensor& x) override;
};

}  // namespace kiln::nn
