// The fused cross_entropy path (Note [Fused cross_entropy] in loss_fused.cpp).
#pragma once
#include <optional>
#include <string>

#include "kiln/tensor.h"

namespace kiln {

// cross_entropy reduced by `reduction` through _fused_cross_entropy when it takes the call
// (CUDA [N, C] logits, [N] class indices, a weight that needs no gradient), in the logits'
// opmath dtype (float32 for bf16/fp16: the caller casts it where it wants theirs); nullopt otherwise.
std::optional<Tensor> fused_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                                          int64_t ignore_index, const std::string& reduction, double label_smoothing);

}  // namespace kiln
