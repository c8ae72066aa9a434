// Loss modules over the functional loss ops. Class weights are buffers named "weight" (and
// "pos_weight"), registered absent when not given, as torch's _WeightedLoss.
#include "kiln/nn/loss.h"

#include "kiln/ops/nn.h"

namespace kiln::nn {

namespace {

// A new handle on the caller's data: Module::to then converts the buffer without touching the
// caller's tensor (torch rebinds the buffer the same way).
Tensor as_buffer(const Tensor& t) { return t.defined() ? t.detach() : Tensor(); }

}  // namespace

Loss::Loss(const char* type_name, std::string reduction) : Module(type_name), reduction(std::move(reduction)) {
  KILN_CHECK(this->reduction == "mean" || this->reduction == "sum" || this->reduction == "none", type_name, ": '",
             this->reduction, "' is not a valid value for reduction (expected 'mean', 'sum' or 'none')");
}

CrossEntropyLoss::CrossEntropyLoss(const Tensor& weight, int64_t ignore_index, const std::string& reduction,
                                   double label_smoothing)
    : Loss("CrossEntropyLoss", reduction), ignore_index(ignore_index), label_smoothing(label_smoothing) {
  KILN_CHECK(label_smoothing >= 0 && label_smoothing <= 1,
             "CrossEntropyLoss: label_smoothing must be between 0.0 and 1.0, got ", label_smoothing);
  this->weight = register_buffer("weight", as_buffer(weight));
}

Tensor CrossEntropyLoss::forward(const Tensor& input, const Tensor& target) {
  return cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing);
}

NLLLoss::NLLLoss(const Tensor& weight, int64_t ignore_index, const std::string& reduction)
    : Loss("NLLLoss", reduction), ignore_index(ignore_index) {
  this->weight = register_buffer("weight", as_buffer(weight));
}

Tensor NLLLoss::forward(const Tensor& input, const Tensor& target) {
  return nll_loss(input, target, weight, ignore_index, reduction);
}

Tensor MSELoss::forward(const Tensor& input, const Tensor& target) { return mse_loss(input, target, reduction); }

Tensor L1Loss::forward(const Tensor& input, const Tensor& target) { return l1_loss(input, target, reduction); }

SmoothL1Loss::SmoothL1Loss(const std::string& reduction, double beta) : Loss("SmoothL1Loss", reduction), beta(beta) {
  KILN_CHECK(beta >= 0, "SmoothL1Loss: beta must be non-negative, got ", beta);
}

Tensor SmoothL1Loss::forward(const Tensor& input, const Tensor& target) {
  return smooth_l1_loss(input, target, reduction, beta);
}

BCELoss::BCELoss(const Tensor& weight, const std::string& reduction) : Loss("BCELoss", reduction) {
  this->weight = register_buffer("weight", as_buffer(weight));
}

Tensor BCELoss::forward(const Tensor& input, const Tensor& target) {
  return binary_cross_entropy(input, target, weight, reduction);
}

BCEWithLogitsLoss::BCEWithLogitsLoss(const Tensor& weight, const std::string& reduction, const Tensor& pos_weight)
    : Loss("BCEWithLogitsLoss", reduction) {
  this->weight = register_buffer("weight", as_buffer(weight));
  this->pos_weight = register_buffer("pos_weight", as_buffer(pos_weight));
}

Tensor BCEWithLogitsLoss::forward(const Tensor& input, const Tensor& target) {
  return binary_cross_entropy_with_logits(input, target, weight, reduction, pos_weight);
}

}  // namespace kiln::nn
