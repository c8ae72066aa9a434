// Helpers shared by VJP rules.
#pragma once
#include "ops/registry.h"

namespace kiln {

// Sums a broadcast gradient back to `shape` (the inverse of broadcasting).
Tensor sum_to(const Tensor& grad, IntArrayRef shape);
// The gradient for input i reduced to its shape and converted to its dtype.
Tensor reduce_grad(const VjpCall& v, size_t i, const Tensor& grad);

}  // namespace kiln
