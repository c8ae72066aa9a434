// Pointwise activations (torch.nn.functional's, with its default arguments). The `inplace`
// forms are in kiln/nn/functional.h; the `_` functions write their input.
#pragma once
#include "kiln/tensor.h"

namespace kiln {

// clamp(x, min_val, max_val); the gradient is zero at and beyond the bounds and a NaN passes it.
// Integer inputs keep their dtype (the bounds are truncated to integers).
Tensor hardtanh(const Tensor& x, const Scalar& min_val = -1.0, const Scalar& max_val = 1.0);
Tensor& hardtanh_(Tensor& x, const Scalar& min_val = -1.0, const Scalar& max_val = 1.0);

}  // namespace kiln
