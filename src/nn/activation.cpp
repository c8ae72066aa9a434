// Parameter-free layers: activations, Softmax, Dropout.
#include "kiln/nn/activation.h"

#include <cmath>

#include "kiln/nn/functional.h"
#include "kiln/ops/activation.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/pointwise.h"
#include "nn/nn_util.h"

namespace kiln::nn {

using detail::py_bool;
using detail::py_float;

Tensor ReLU::forward(const Tensor& x) {
  if (!inplace) return relu(x);
  Tensor y = x;  // shares x's impl: relu_ writes into the caller's tensor, as torch's inplace=True
  y.relu_();
  return y;
}

std::string ReLU::extra_repr() const { return inplace ? "inplace=True" : ""; }

Tensor ReLU6::forward(const Tensor& x) { return functional::relu6(x, inplace); }

std::string ReLU6::extra_repr() const { return inplace ? "inplace=True" : ""; }

Hardtanh::Hardtanh(double min_val, double max_val, bool inplace)
    : Module("Hardtanh"), min_val(min_val), max_val(max_val), inplace(inplace) {
  KILN_CHECK(max_val > min_val, "Hardtanh: max_val (", max_val, ") must be greater than min_val (", min_val, ")");
}

Tensor Hardtanh::forward(const Tensor& x) { return functional::hardtanh(x, min_val, max_val, inplace); }

std::string Hardtanh::extra_repr() const {
  return "min_val=" + py_float(min_val) + ", max_val=" + py_float(max_val) + (inplace ? ", inplace=True" : "");
}

Tensor LeakyReLU::forward(const Tensor& x) { return functional::leaky_relu(x, negative_slope, inplace); }
std::string LeakyReLU::extra_repr() const {
  return "negative_slope=" + py_float(negative_slope) + (inplace ? ", inplace=True" : "");
}

Tensor ELU::forward(const Tensor& x) { return functional::elu(x, alpha, inplace); }
std::string ELU::extra_repr() const { return "alpha=" + py_float(alpha) + (inplace ? ", inplace=True" : ""); }

Tensor SELU::forward(const Tensor& x) { return functional::selu(x, inplace); }
std::string SELU::extra_repr() const { return inplace ? "inplace=True" : ""; }

Tensor CELU::forward(const Tensor& x) { return functional::celu(x, alpha, inplace); }
std::string CELU::extra_repr() const { return "alpha=" + py_float(alpha) + (inplace ? ", inplace=True" : ""); }

Tensor Softplus::forward(const Tensor& x) { return softplus(x, beta, threshold); }
// torch's defaults are the ints 1 and 20, which print without a decimal point.
std::string Softplus::extra_repr() const {
  auto num = [](double v) {
    return v == std::trunc(v) && std::abs(v) < 1e15 ? std::to_string(int64_t(v)) : py_float(v);
  };
  return "beta=" + num(beta) + ", threshold=" + num(threshold);
}

Tensor Softsign::forward(const Tensor& x) { return softsign(x); }
Tensor Hardsigmoid::forward(const Tensor& x) { return functional::hardsigmoid(x, inplace); }
Tensor Hardswish::forward(const Tensor& x) { return functional::hardswish(x, inplace); }
Tensor Mish::forward(const Tensor& x) { return functional::mish(x, inplace); }
Tensor LogSigmoid::forward(const Tensor& x) { return logsigmoid(x); }

Tensor GLU::forward(const Tensor& x) { return glu(x, dim); }
std::string GLU::extra_repr() const { return "dim=" + std::to_string(dim); }

PReLU::PReLU(int64_t num_parameters, double init) : Module("PReLU"), num_parameters(num_parameters) {
  KILN_CHECK(num_parameters >= 1, "PReLU: num_parameters must be at least 1, got ", num_parameters);
  weight = register_parameter("weight", full({num_parameters}, init));
}
Tensor PReLU::forward(const Tensor& x) { return prelu(x, weight); }
std::string PReLU::extra_repr() const { return "num_parameters=" + std::to_string(num_parameters); }

GELU::GELU(std::string approximate) : Module("GELU"), approximate(std::move(approximate)) {
  KILN_CHECK(this->approximate == "none" || this->approximate == "tanh",
             "GELU: approximate must be 'none' or 'tanh', got '", this->approximate, "'");
}

Tensor GELU::forward(const Tensor& x) { return gelu(x, approximate); }

std::string GELU::extra_repr() const { return "approximate='" + approximate + "'"; }

Tensor SiLU::forward(const Tensor& x) { return silu(x); }
Tensor Tanh::forward(const Tensor& x) { return tanh(x); }
Tensor Sigmoid::forward(const Tensor& x) { return sigmoid(x); }

Tensor Softmax::forward(const Tensor& x) { return softmax(x, dim); }

std::string Softmax::extra_repr() const { return "dim=" + std::to_string(dim); }

Dropout::Dropout(double p, bool inplace) : Module("Dropout"), p(p), inplace(inplace) {
  KILN_CHECK(p >= 0 && p <= 1, "Dropout: dropout probability has to be between 0 and 1, but got ", p);
}

Tensor Dropout::forward(const Tensor& x) {
  if (!inplace) return dropout(x, p, is_training());
  if (!is_training() || p == 0) return x;
  // In place (torch's inplace=True): scale the caller's tensor by the dropout mask, so autograd
  // records a mul_ by a constant rather than a copy over an input it saved.
  Tensor mask = dropout(ones_like(x), p, true);
  Tensor out = x;
  out.mul_(mask);
  return out;
}

std::string Dropout::extra_repr() const { return "p=" + py_float(p) + ", inplace=" + py_bool(inplace); }

// ---- the layers of torch.nn added for PyTorch parity (#30) ----
namespace {
// inplace=True: the result written into the caller's tensor (torch's in-place forms).
Tensor write_back(const Tensor& x, const Tensor& r) {
  Tensor out = x;
  out.copy_(r);
  return out;
}
}  // namespace

RReLU::RReLU(double lower, double upper, bool inplace) : Module("RReLU"), lower(lower), upper(upper), inplace(inplace) {
  KILN_CHECK(lower <= upper, "RReLU: Lower bound should be less than or equal to the upper bound, got lower ", lower,
             " and upper ", upper);
}
Tensor RReLU::forward(const Tensor& x) {
  Tensor r = rrelu(x, lower, upper, is_training());
  return inplace ? write_back(x, r) : r;
}
std::string RReLU::extra_repr() const {
  return "lower=" + py_float(lower) + ", upper=" + py_float(upper) + (inplace ? ", inplace=True" : "");
}

Tensor Tanhshrink::forward(const Tensor& x) { return tanhshrink(x); }

Softshrink::Softshrink(double lambd) : Module("Softshrink"), lambd(lambd) {
  KILN_CHECK(lambd >= 0, "Softshrink: lambda must be greater or equal to 0, but found to be ", lambd);
}
Tensor Softshrink::forward(const Tensor& x) { return softshrink(x, lambd); }
std::string Softshrink::extra_repr() const { return py_float(lambd); }

Tensor Hardshrink::forward(const Tensor& x) { return hardshrink(x, lambd); }
std::string Hardshrink::extra_repr() const { return py_float(lambd); }

Tensor Softmin::forward(const Tensor& x) { return softmin(x, dim); }
std::string Softmin::extra_repr() const { return "dim=" + std::to_string(dim); }

DropoutNd::DropoutNd(const char* name, double p, bool inplace) : Module(name), p(p), inplace(inplace) {
  KILN_CHECK(p >= 0 && p <= 1, name, ": dropout probability has to be between 0 and 1, but got ", p);
}
std::string DropoutNd::extra_repr() const { return "p=" + py_float(p) + ", inplace=" + py_bool(inplace); }
Tensor AlphaDropout::forward(const Tensor& x) {
  Tensor r = alpha_dropout(x, p, is_training());
  return inplace && !r.is_same(x) ? write_back(x, r) : r;
}
Tensor FeatureAlphaDropout::forward(const Tensor& x) {
  Tensor r = feature_alpha_dropout(x, p, is_training());
  return inplace && !r.is_same(x) ? write_back(x, r) : r;
}
Tensor Dropout2d::forward(const Tensor& x) {
  Tensor r = dropout2d(x, p, is_training());
  return inplace && !r.is_same(x) ? write_back(x, r) : r;
}

}  // namespace kiln::nn
