// Gradient clipping (torch.nn.utils.clip_grad_norm_ / clip_grad_value_).
#include "kiln/nn/clip_grad.h"

#include <cmath>

#include "kiln/autograd.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/pointwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"

namespace kiln::nn::utils {

namespace {
std::vector<Tensor> grads_of(const std::vector<Tensor>& parameters) {
  std::vector<Tensor> grads;
  for (const Tensor& p : parameters)
    if (p.defined() && p.grad().defined()) grads.push_back(p.grad());
  return grads;
}
}  // namespace

Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  NoGradGuard no_grad;
  std::vector<Tensor> grads = grads_of(parameters);
  if (grads.empty()) return scalar_tensor(0.0);
  KILN_CHECK(!std::isnan(norm_type), "clip_grad_norm_: norm_type is NaN");
  std::vector<Tensor> norms;
  for (const Tensor& g : grads) norms.push_back(g.norm(norm_type).to(grads[0].device()));
  Tensor total = stack(norms).norm(norm_type);
  if (error_if_nonfinite) {
    const double t = total.item<double>();
    KILN_CHECK(std::isfinite(t), "clip_grad_norm_: the total norm of order ", norm_type,
               " for gradients from `parameters` is non-finite (", t,
               "), so it cannot be clipped. To disable this error and scale the gradients by the non-finite norm "
               "anyway, set `error_if_nonfinite=false`");
  }
  // Multiplying by the clamped coefficient (also when it is 1) avoids a device sync, as torch.
  Tensor coef = (max_norm / (total + 1e-6)).clamp(std::nullopt, 1.0);
  for (Tensor g : grads) g.mul_(coef.to(g.device()));
  return total;
}

Tensor clip_grad_norm_(const Tensor& parameter, double max_norm, double norm_type, bool error_if_nonfinite) {
  return clip_grad_norm_(std::vector<Tensor>{parameter}, max_norm, norm_type, error_if_nonfinite);
}

void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value) {
  NoGradGuard no_grad;
  for (Tensor g : grads_of(parameters)) g.clamp_(-clip_value, clip_value);
}

void clip_grad_value_(const Tensor& parameter, double clip_value) {
  clip_grad_value_(std::vector<Tensor>{parameter}, clip_value);
}

}  // namespace kiln::nn::utils
