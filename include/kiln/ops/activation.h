// Pointwise activations (torch.nn.functional's, with its default arguments). The `inplace`
// forms are in kiln/nn/functional.h; the `_` functions write their input.
#pragma once
#include "kiln/generator.h"
#include "kiln/tensor.h"

namespace kiln {

// clamp(x, min_val, max_val); the gradient is zero at and beyond the bounds and a NaN passes it.
// Integer inputs keep their dtype (the bounds are truncated to integers).
Tensor hardtanh(const Tensor& x, const Scalar& min_val = -1.0, const Scalar& max_val = 1.0);
Tensor& hardtanh_(Tensor& x, const Scalar& min_val = -1.0, const Scalar& max_val = 1.0);

// x > 0 ? x : negative_slope * x.
Tensor leaky_relu(const Tensor& x, const Scalar& negative_slope = 0.01);
Tensor& leaky_relu_(Tensor& x, const Scalar& negative_slope = 0.01);
// x > 0 ? x : alpha * (exp(x) - 1).
Tensor elu(const Tensor& x, const Scalar& alpha = 1.0);
Tensor& elu_(Tensor& x, const Scalar& alpha = 1.0);
// scale * elu(x, alpha) with torch's (self-normalising) constants.
Tensor selu(const Tensor& x);
Tensor& selu_(Tensor& x);
// max(0, x) + min(0, alpha * (exp(x / alpha) - 1)); alpha != 0.
Tensor celu(const Tensor& x, const Scalar& alpha = 1.0);
Tensor& celu_(Tensor& x, const Scalar& alpha = 1.0);
// log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold.
Tensor softplus(const Tensor& x, const Scalar& beta = 1, const Scalar& threshold = 20);
// x / (1 + |x|) (integer inputs give the default float dtype).
Tensor softsign(const Tensor& x);
// relu6(x + 3) / 6.
Tensor hardsigmoid(const Tensor& x);
Tensor& hardsigmoid_(Tensor& x);
// x * relu6(x + 3) / 6.
Tensor hardswish(const Tensor& x);
Tensor& hardswish_(Tensor& x);
// x * tanh(softplus(x)).
Tensor mish(const Tensor& x);
Tensor& mish_(Tensor& x);
// log(sigmoid(x)), computed without overflow.
Tensor logsigmoid(const Tensor& x);
// a * sigmoid(b), where a and b are the two halves of x along dim (its size must be even).
Tensor glu(const Tensor& x, int64_t dim = -1);
// x > 0 ? x : weight * x; weight holds one value or one per channel (dim 1 of x).
Tensor prelu(const Tensor& x, const Tensor& weight);

// The shrink activations and rrelu (src/ops/activation_extra.cpp).
// x - tanh(x), as torch's Python definition (integer inputs give the default float dtype).
Tensor tanhshrink(const Tensor& x);
// x > lambd ? x - lambd : x < -lambd ? x + lambd : 0 (lambd >= 0; a NaN stays NaN, as PyTorch 2.x).
Tensor softshrink(const Tensor& x, const Scalar& lambd = 0.5);
// |x| <= lambd ? 0 : x.
Tensor hardshrink(const Tensor& x, const Scalar& lambd = 0.5);
// Training: x >= 0 ? x : x * r, r uniform in [lower, upper] per element (drawn from gen, else the
// device's default generator); evaluation: slope (lower + upper) / 2. training defaults to false,
// as torch.nn.functional.rrelu's.
Tensor rrelu(const Tensor& x, const Scalar& lower = 1.0 / 8, const Scalar& upper = 1.0 / 3, bool training = false,
             Generator* gen = nullptr);

}  // namespace kiln
