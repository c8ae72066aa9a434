// Gradient clipping, as torch.nn.utils.clip_grad_norm_ / clip_grad_value_. Parameters without a
// gradient are skipped; gradients are changed in place without recording autograd.
#pragma once
#include <limits>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::nn::utils {

// Scales the gradients so that their total norm (the norm of the per-gradient norms) is at most
// max_norm: g *= min(1, max_norm / (total + 1e-6)). norm_type may be infinity (max |g|). Returns
// the total norm before clipping (a 0-d tensor; 0 when no parameter has a gradient). With
// error_if_nonfinite, a NaN or infinite total norm is an error and nothing is changed.
Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);
Tensor clip_grad_norm_(const Tensor& parameter, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

// Clamps every gradient to [-clip_value, clip_value].
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value);
void clip_grad_value_(const Tensor& parameter, double clip_value);

}  // namespace kiln::nn::utils
