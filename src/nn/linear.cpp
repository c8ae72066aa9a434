// Linear, Bilinear, Flatten, Unflatten (Identity is inline in the header).
#include "kiln/nn/linear.h"

#include <cmath>

#include "kiln/nn/functional.h"
#include "kiln/nn/init.h"
#include "kiln/ops/creation.h"
#include "nn/nn_util.h"

namespace kiln::nn {

using detail::init_bias_from_fan_in;
using detail::py_bool;
using detail::py_tuple;

Linear::Linear(int64_t in_features, int64_t out_features, bool bias)
    : Module("Linear"), in_features(in_features), out_features(out_features) {
  KILN_CHECK(in_features >= 0 && out_features >= 0, "Linear: expected non-negative in_features and out_features, got ",
             in_features, " and ", out_features);
  weight = register_parameter("weight", empty({out_features, in_features}));
  this->bias = register_parameter("bias", bias ? empty({out_features}) : Tensor());
  reset_parameters();
}

void Linear::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  init_bias_from_fan_in(bias, in_features);
}

Tensor Linear::forward(const Tensor& x) { return linear(x, weight, bias); }

std::string Linear::extra_repr() const {
  return "in_features=" + std::to_string(in_features) + ", out_features=" + std::to_string(out_features) +
         ", bias=" + py_bool(bias.defined());
}

Bilinear::Bilinear(int64_t in1_features, int64_t in2_features, int64_t out_features, bool bias)
    : Module("Bilinear"), in1_features(in1_features), in2_features(in2_features), out_features(out_features) {
  KILN_CHECK(in1_features >= 0 && in2_features >= 0 && out_features >= 0,
             "Bilinear: expected non-negative feature sizes, got ", in1_features, ", ", in2_features, ", ",
             out_features);
  weight = register_parameter("weight", empty({out_features, in1_features, in2_features}));
  this->bias = register_parameter("bias", bias ? empty({out_features}) : Tensor());
  reset_parameters();
}

// As torch: weight and bias both U(-1/√in1, 1/√in1).
void Bilinear::reset_parameters() {
  double bound = in1_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in1_features)) : 0.0;
  init::uniform_(weight, -bound, bound);
  if (bias.defined()) init::uniform_(bias, -bound, bound);
}

Tensor Bilinear::forward(const Tensor& x1, const Tensor& x2) { return functional::bilinear(x1, x2, weight, bias); }

std::string Bilinear::extra_repr() const {
  return "in1_features=" + std::to_string(in1_features) + ", in2_features=" + std::to_string(in2_features) +
         ", out_features=" + std::to_string(out_features) + ", bias=" + py_bool(bias.defined());
}

Flatten::Flatten(int64_t start_dim, int64_t end_dim) : Module("Flatten"), start_dim(start_dim), end_dim(end_dim) {}

Tensor Flatten::forward(const Tensor& x) { return x.flatten(start_dim, end_dim); }

std::string Flatten::extra_repr() const {
  return "start_dim=" + std::to_string(start_dim) + ", end_dim=" + std::to_string(end_dim);
}

Unflatten::Unflatten(int64_t dim, std::vector<int64_t> unflattened_size)
    : Module("Unflatten"), dim(dim), unflattened_size(std::move(unflattened_size)) {
  KILN_CHECK(!this->unflattened_size.empty(), "Unflatten: unflattened_size must not be empty");
}

Tensor Unflatten::forward(const Tensor& x) { return x.unflatten(dim, unflattened_size); }

std::string Unflatten::extra_repr() const {
  return "dim=" + std::to_string(dim) + ", unflattened_size=" + py_tuple(unflattened_size);
}

}  // namespace kiln::nn
