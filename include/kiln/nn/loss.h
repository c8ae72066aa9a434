// Loss modules: forward(input, target), reduction "mean" (default), "sum" or "none".
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kiln/nn/module.h"

namespace kiln::nn {

// torch's _Loss: the reduction every loss holds, checked once. allow_batchmean: KLDivLoss's extra mode.
class LossBase : public Module {
 public:
  std::string reduction;

 protected:
  LossBase(const char* type_name, std::string reduction, bool allow_batchmean = false);
  using Module::forward;
};

// A loss of (input, target).
class Loss : public LossBase {
 public:
  virtual Tensor forward(const Tensor& input, const Tensor& target) = 0;
  Tensor operator()(const Tensor& input, const Tensor& target) { return forward(input, target); }

 protected:
  Loss(const char* type_name, std::string reduction, bool allow_batchmean = false)
      : LossBase(type_name, std::move(reduction), allow_batchmean) {}
};

// A loss of three tensors: (input1, input2, target), (anchor, positive, negative) or (input, target, var).
class Loss3 : public LossBase {
 public:
  virtual Tensor forward(const Tensor& a, const Tensor& b, const Tensor& c) = 0;
  Tensor operator()(const Tensor& a, const Tensor& b, const Tensor& c) { return forward(a, b, c); }

 protected:
  Loss3(const char* type_name, std::string reduction) : LossBase(type_name, std::move(reduction)) {}
};

class CrossEntropyLoss : public Loss {
 public:
  explicit CrossEntropyLoss(const Tensor& weight = {}, int64_t ignore_index = -100,
                            const std::string& reduction = "mean", double label_smoothing = 0.0);
  Tensor forward(const Tensor& input, const Tensor& target) override;
  int64_t ignore_index;
  double label_smoothing;
  Tensor weight;  // a buffer when given, as torch
};

class NLLLoss : public Loss {
 public:
  explicit NLLLoss(const Tensor& weight = {}, int64_t ignore_index = -100, const std::string& reduction = "mean");
  Tensor forward(const Tensor& input, const Tensor& target) override;
  int64_t ignore_index;
  Tensor weight;
};

class MSELoss : public Loss {
 public:
  explicit MSELoss(const std::string& reduction = "mean") : Loss("MSELoss", reduction) {}
  Tensor forward(const Tensor& input, const Tensor& target) override;
};

class L1Loss : public Loss {
 public:
  explicit L1Loss(const std::string& reduction = "mean") : Loss("L1Loss", reduction) {}
  Tensor forward(const Tensor& input, const Tensor& target) override;
};

class SmoothL1Loss : public Loss {
 public:
  explicit SmoothL1Loss(const std::string& reduction = "mean", double beta = 1.0);
  Tensor forward(const Tensor& input, const Tensor& target) override;
  double beta;
};

class BCELoss : public Loss {
 public:
  explicit BCELoss(const Tensor& weight = {}, const std::string& reduction = "mean");
  Tensor forward(const Tensor& input, const Tensor& target) override;
  Tensor weight;
};

class BCEWithLogitsLoss : public Loss {
 public:
  explicit BCEWithLogitsLoss(const Tensor& weight = {}, const std::string& reduction = "mean",
                             const Tensor& pos_weight = {});
  Tensor forward(const Tensor& input, const Tensor& target) override;
  Tensor weight, pos_weight;
};

// ---- the losses of include/kiln/ops/nn_loss_extra.h, torch's constructor arguments in torch's order ----
class KLDivLoss : public Loss {  // reduction also "batchmean"
 public:
  explicit KLDivLoss(const std::string& reduction = "mean", bool log_target = false);
  Tensor forward(const Tensor& input, const Tensor& target) override;
  bool log_target;
};

class HuberLoss : public Loss {
 public:
  explicit HuberLoss(const std::string& reduction = "mean", double delta = 1.0);
  Tensor forward(const Tensor& input, const Tensor& target) override;
  double delta;
};

class SoftMarginLoss : public Loss {
 public:
  explicit SoftMarginLoss(const std::string& reduction = "mean") : Loss("SoftMarginLoss", reduction) {}
  Tensor forward(const Tensor& input, const Tensor& target) override;
};

class MultiLabelSoftMarginLoss : public Loss {
 public:
  explicit MultiLabelSoftMarginLoss(const Tensor& weight = {}, const std::string& reduction = "mean");
  Tensor forward(const Tensor& input, const Tensor& target) override;
  Tensor weight;  // a buffer when given, as torch's _WeightedLoss
};

class HingeEmbeddingLoss : public Loss {
 public:
  explicit HingeEmbeddingLoss(double margin = 1.0, const std::string& reduction = "mean");
  Tensor forward(const Tensor& input, const Tensor& target) override;
  double margin;
};

class MultiMarginLoss : public Loss {
 public:
  explicit MultiMarginLoss(int64_t p = 1, double margin = 1.0, const Tensor& weight = {},
                           const std::string& reduction = "mean");
  Tensor forward(const Tensor& input, const Tensor& target) override;
  int64_t p;
  double margin;
  Tensor weight;
};

class MultiLabelMarginLoss : public Loss {
 public:
  explicit MultiLabelMarginLoss(const std::string& reduction = "mean") : Loss("MultiLabelMarginLoss", reduction) {}
  Tensor forward(const Tensor& input, const Tensor& target) override;
};

class PoissonNLLLoss : public Loss {
 public:
  explicit PoissonNLLLoss(bool log_input = true, bool full = false, double eps = 1e-8,
                          const std::string& reduction = "mean");
  Tensor forward(const Tensor& log_input_or_input, const Tensor& target) override;
  bool log_input, full;
  double eps;
};

class MarginRankingLoss : public Loss3 {  // forward(input1, input2, target)
 public:
  explicit MarginRankingLoss(double margin = 0.0, const std::string& reduction = "mean");
  Tensor forward(const Tensor& input1, const Tensor& input2, const Tensor& target) override;
  double margin;
};

class CosineEmbeddingLoss : public Loss3 {  // forward(input1, input2, target)
 public:
  explicit CosineEmbeddingLoss(double margin = 0.0, const std::string& reduction = "mean");
  Tensor forward(const Tensor& input1, const Tensor& input2, const Tensor& target) override;
  double margin;
};

class TripletMarginLoss : public Loss3 {  // forward(anchor, positive, negative)
 public:
  explicit TripletMarginLoss(double margin = 1.0, double p = 2.0, double eps = 1e-6, bool swap = false,
                             const std::string& reduction = "mean");
  Tensor forward(const Tensor& anchor, const Tensor& positive, const Tensor& negative) override;
  double margin, p, eps;
  bool swap;
};

class GaussianNLLLoss : public Loss3 {  // forward(input, target, var)
 public:
  explicit GaussianNLLLoss(bool full = false, double eps = 1e-6, const std::string& reduction = "mean");
  Tensor forward(const Tensor& input, const Tensor& target, const Tensor& var) override;
  bool full;
  double eps;
};

// forward(log_probs, targets, input_lengths, target_lengths), as F.ctc_loss (include/kiln/ops/nn_loss_extra.h).
class CTCLoss : public LossBase {
 public:
  explicit CTCLoss(int64_t blank = 0, const std::string& reduction = "mean", bool zero_infinity = false);
  Tensor forward(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                 const Tensor& target_lengths);
  Tensor forward(const Tensor& log_probs, const Tensor& targets, const std::vector<int64_t>& input_lengths,
                 const std::vector<int64_t>& target_lengths);
  Tensor operator()(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                    const Tensor& target_lengths) {
    return forward(log_probs, targets, input_lengths, target_lengths);
  }
  Tensor operator()(const Tensor& log_probs, const Tensor& targets, const std::vector<int64_t>& input_lengths,
                    const std::vector<int64_t>& target_lengths) {
    return forward(log_probs, targets, input_lengths, target_lengths);
  }
  int64_t blank;
  bool zero_infinity;
};

}  // namespace kiln::nn
