// Multi-tensor (foreach) ops, as torch._foreach_*: one call updates every tensor of a list, the
// way optimizers step all parameters of a group at once. All lists of one call have the same
// length; tensors at the same position have the same shape, dtype and device (floating point).
// Scalar-list overloads take one value per tensor. The ops are not differentiable: with grad mode
// on, a tensor that requires grad is an error (run them under NoGradGuard, as optimizers do).
#pragma once
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

// Out of place: a new list.
std::vector<Tensor> _foreach_neg(const std::vector<Tensor>& self);
std::vector<Tensor> _foreach_sqrt(const std::vector<Tensor>& self);
// self[i] + alpha * other[i]
std::vector<Tensor> _foreach_add(const std::vector<Tensor>& self, const std::vector<Tensor>& other,
                                 const Scalar& alpha = 1);
// self[i] + value * tensor1[i] * tensor2[i]
std::vector<Tensor> _foreach_addcmul(const std::vector<Tensor>& self, const std::vector<Tensor>& tensor1,
                                     const std::vector<Tensor>& tensor2, const Scalar& value = 1);
std::vector<Tensor> _foreach_addcmul(const std::vector<Tensor>& self, const std::vector<Tensor>& tensor1,
                                     const std::vector<Tensor>& tensor2, const std::vector<double>& values);

// In place on `self`.
void _foreach_add_(const std::vector<Tensor>& self, const std::vector<Tensor>& other, const Scalar& alpha = 1);
void _foreach_add_(const std::vector<Tensor>& self, const Scalar& scalar);
void _foreach_add_(const std::vector<Tensor>& self, const std::vector<double>& scalars);
void _foreach_mul_(const std::vector<Tensor>& self, const Scalar& scalar);
void _foreach_mul_(const std::vector<Tensor>& self, const std::vector<double>& scalars);
void _foreach_div_(const std::vector<Tensor>& self, const Scalar& scalar);
void _foreach_div_(const std::vector<Tensor>& self, const std::vector<double>& scalars);
// self[i] += value * tensor1[i] * tensor2[i]   /   self[i] += value * tensor1[i] / tensor2[i]
void _foreach_addcmul_(const std::vector<Tensor>& self, const std::vector<Tensor>& tensor1,
                       const std::vector<Tensor>& tensor2, const Scalar& value = 1);
void _foreach_addcmul_(const std::vector<Tensor>& self, const std::vector<Tensor>& tensor1,
                       const std::vector<Tensor>& tensor2, const std::vector<double>& values);
void _foreach_addcdiv_(const std::vector<Tensor>& self, const std::vector<Tensor>& tensor1,
                       const std::vector<Tensor>& tensor2, const Scalar& value = 1);
void _foreach_addcdiv_(const std::vector<Tensor>& self, const std::vector<Tensor>& tensor1,
                       const std::vector<Tensor>& tensor2, const std::vector<double>& values);
// self[i] += weight * (end[i] - self[i])
void _foreach_lerp_(const std::vector<Tensor>& self, const std::vector<Tensor>& end, const Scalar& weight);
void _foreach_lerp_(const std::vector<Tensor>& self, const std::vector<Tensor>& end,
                    const std::vector<double>& weights);
// self[i] = maximum(self[i], other[i]) (NaN-propagating)
void _foreach_maximum_(const std::vector<Tensor>& self, const std::vector<Tensor>& other);

// Adam/AdamW's step over every position in one pass (torch._fused_adam_ / _fused_adamw_ with
// decoupled = true), the same arithmetic as optim::Adam's foreach step (Note [Fused Adam]):
// updates params, exp_avgs, exp_avg_sqs and, with amsgrad, max_exp_avg_sqs (else pass {}).
// step_sizes[i] = lr / (1 - beta1^t_i) and bias_correction2_sqrts[i] = sqrt(1 - beta2^t_i) for
// position i's step count t_i. CUDA: one multi-tensor launch per dtype for dense tensors.
void _fused_adam_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                  const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                  const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<double>& step_sizes,
                  const std::vector<double>& bias_correction2_sqrts, double lr, double beta1, double beta2, double eps,
                  double weight_decay, bool amsgrad, bool maximize, bool decoupled);

}  // namespace kiln
