// Loss modules over the functional loss ops. Class weights are buffers named "weight" (and
// "pos_weight"), registered absent when not given, as torch's _WeightedLoss.
#include "kiln/nn/loss.h"

#include "core/tensor_impl.h"
#include "kiln/ops/nn.h"

namespace kiln::nn {

namespace {

// A new handle on the caller's data: Module::to then converts the buffer without touching the
// caller's tensor (torch rebinds the buffer the same way).
Tensor as_buffer(const Tensor& t) { return t.defined() ? t.detach() : Tensor(); }

}  // namespace

LossBase::LossBase(const char* type_name, std::string reduction, bool allow_batchmean)
    : Module(type_name), reduction(std::move(reduction)) {
  const std::string& r = this->reduction;
  KILN_CHECK(r == "mean" || r == "sum" || r == "none" || (allow_batchmean && r == "batchmean"), type_name, ": '", r,
             "' is not a valid value for reduction (expected 'mean', 'sum'", (allow_batchmean ? ", 'batchmean'" : ""),
             " or 'none')");
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

KLDivLoss::KLDivLoss(const std::string& reduction, bool log_target)
    : Loss("KLDivLoss", reduction, /*allow_batchmean=*/true), log_target(log_target) {}
Tensor KLDivLoss::forward(const Tensor& input, const Tensor& target) {
  return kl_div(input, target, reduction, log_target);
}

HuberLoss::HuberLoss(const std::string& reduction, double delta) : Loss("HuberLoss", reduction), delta(delta) {}
Tensor HuberLoss::forward(const Tensor& input, const Tensor& target) {
  return huber_loss(input, target, reduction, delta);
}

Tensor SoftMarginLoss::forward(const Tensor& input, const Tensor& target) {
  return soft_margin_loss(input, target, reduction);
}

MultiLabelSoftMarginLoss::MultiLabelSoftMarginLoss(const Tensor& weight, const std::string& reduction)
    : Loss("MultiLabelSoftMarginLoss", reduction) {
  this->weight = register_buffer("weight", as_buffer(weight));
}
Tensor MultiLabelSoftMarginLoss::forward(const Tensor& input, const Tensor& target) {
  return multilabel_soft_margin_loss(input, target, weight, reduction);
}

HingeEmbeddingLoss::HingeEmbeddingLoss(double margin, const std::string& reduction)
    : Loss("HingeEmbeddingLoss", reduction), margin(margin) {}
Tensor HingeEmbeddingLoss::forward(const Tensor& input, const Tensor& target) {
  return hinge_embedding_loss(input, target, margin, reduction);
}

MultiMarginLoss::MultiMarginLoss(int64_t p, double margin, const Tensor& weight, const std::string& reduction)
    : Loss("MultiMarginLoss", reduction), p(p), margin(margin) {
  KILN_CHECK(p == 1 || p == 2, "MultiMarginLoss: only p == 1 and p == 2 supported, got ", p);
  KILN_CHECK(!weight.defined() || weight.dim() == 1, "MultiMarginLoss: weight must be one-dimensional, got shape ",
             shape_str(weight.sizes()));
  this->weight = register_buffer("weight", as_buffer(weight));
}
Tensor MultiMarginLoss::forward(const Tensor& input, const Tensor& target) {
  return multi_margin_loss(input, target, p, margin, weight, reduction);
}

Tensor MultiLabelMarginLoss::forward(const Tensor& input, const Tensor& target) {
  return multilabel_margin_loss(input, target, reduction);
}

PoissonNLLLoss::PoissonNLLLoss(bool log_input, bool full, double eps, const std::string& reduction)
    : Loss("PoissonNLLLoss", reduction), log_input(log_input), full(full), eps(eps) {}
Tensor PoissonNLLLoss::forward(const Tensor& log_input_or_input, const Tensor& target) {
  return poisson_nll_loss(log_input_or_input, target, log_input, full, eps, reduction);
}

MarginRankingLoss::MarginRankingLoss(double margin, const std::string& reduction)
    : Loss3("MarginRankingLoss", reduction), margin(margin) {}
Tensor MarginRankingLoss::forward(const Tensor& input1, const Tensor& input2, const Tensor& target) {
  return margin_ranking_loss(input1, input2, target, margin, reduction);
}

CosineEmbeddingLoss::CosineEmbeddingLoss(double margin, const std::string& reduction)
    : Loss3("CosineEmbeddingLoss", reduction), margin(margin) {}
Tensor CosineEmbeddingLoss::forward(const Tensor& input1, const Tensor& input2, const Tensor& target) {
  return cosine_embedding_loss(input1, input2, target, margin, reduction);
}

TripletMarginLoss::TripletMarginLoss(double margin, double p, double eps, bool swap, const std::string& reduction)
    : Loss3("TripletMarginLoss", reduction), margin(margin), p(p), eps(eps), swap(swap) {}
Tensor TripletMarginLoss::forward(const Tensor& anchor, const Tensor& positive, const Tensor& negative) {
  return triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap, reduction);
}

GaussianNLLLoss::GaussianNLLLoss(bool full, double eps, const std::string& reduction)
    : Loss3("GaussianNLLLoss", reduction), full(full), eps(eps) {}
Tensor GaussianNLLLoss::forward(const Tensor& input, const Tensor& target, const Tensor& var) {
  return gaussian_nll_loss(input, target, var, full, eps, reduction);
}

CTCLoss::CTCLoss(int64_t blank, const std::string& reduction, bool zero_infinity)
    : LossBase("CTCLoss", reduction), blank(blank), zero_infinity(zero_infinity) {}

Tensor CTCLoss::forward(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                        const Tensor& target_lengths) {
  return ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, reduction, zero_infinity);
}

Tensor CTCLoss::forward(const Tensor& log_probs, const Tensor& targets, const std::vector<int64_t>& input_lengths,
                        const std::vector<int64_t>& target_lengths) {
  return ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, reduction, zero_infinity);
}

}  // namespace kiln::nn
