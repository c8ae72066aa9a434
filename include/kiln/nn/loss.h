// Loss modules: forward(input, target), reduction "mean" (default), "sum" or "none".
#pragma once
#include <cstdint>
#include <string>

#include "kiln/nn/module.h"

namespace kiln::nn {

class Loss : public Module {
 public:
  virtual Tensor forward(const Tensor& input, const Tensor& target) = 0;
  Tensor operator()(const Tensor& input, const Tensor& target) { return forward(input, target); }
  std::string reduction;

 protected:
  Loss(const char* type_name, std::string reduction);
  using Module::forward;
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

}  // namespace kiln::nn
