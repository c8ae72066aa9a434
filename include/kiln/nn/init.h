// nn::init, as torch.nn.init: fill a tensor in place (without recording autograd) and return it.
// Random fills draw from `gen`, or the default generator of the tensor's device.
#pragma once
#include <string>
#include <utility>

#include "kiln/generator.h"
#include "kiln/tensor.h"

namespace kiln::nn::init {

// (fan_in, fan_out) of a weight: dim 1 × receptive field, dim 0 × receptive field; needs ≥ 2-D.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t);
// nonlinearity: "linear", "conv1d", "conv2d", "sigmoid", "tanh", "relu", "leaky_relu", "selu".
double calculate_gain(const std::string& nonlinearity, double param = 0.01);

Tensor& uniform_(Tensor& t, double a = 0.0, double b = 1.0, Generator* gen = nullptr);
Tensor& normal_(Tensor& t, double mean = 0.0, double std = 1.0, Generator* gen = nullptr);
Tensor& trunc_normal_(Tensor& t, double mean = 0.0, double std = 1.0, double a = -2.0, double b = 2.0,
                      Generator* gen = nullptr);
Tensor& constant_(Tensor& t, double value);
Tensor& zeros_(Tensor& t);
Tensor& ones_(Tensor& t);
Tensor& xavier_uniform_(Tensor& t, double gain = 1.0, Generator* gen = nullptr);
Tensor& xavier_normal_(Tensor& t, double gain = 1.0, Generator* gen = nullptr);
// mode "fan_in" or "fan_out"; nonlinearity as calculate_gain.
Tensor& kaiming_uniform_(Tensor& t, double a = 0.0, const std::string& mode = "fan_in",
                         const std::string& nonlinearity = "leaky_relu", Generator* gen = nullptr);
Tensor& kaiming_normal_(Tensor& t, double a = 0.0, const std::string& mode = "fan_in",
                        const std::string& nonlinearity = "leaky_relu", Generator* gen = nullptr);

}  // namespace kiln::nn::init
