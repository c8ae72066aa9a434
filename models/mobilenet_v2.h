// torchvision's MobileNetV2: the same modules, names, shapes and init, so a torchvision state_dict
// loads directly (features.0 conv-BN-ReLU6, features.1..17 InvertedResidual with `conv`,
// features.18 1×1 conv-BN-ReLU6, classifier.1 Linear).
#pragma once
#include <cstdint>
#include <memory>

#include "kiln/nn/activation.h"
#include "kiln/nn/container.h"
#include "kiln/nn/conv.h"
#include "kiln/nn/norm.h"

namespace kiln::models {

// torchvision's Conv2dNormActivation with BatchNorm2d and ReLU6: children "0" conv (no bias,
// padding (k-1)/2), "1" BN, "2" ReLU6.
class ConvBNReLU6 : public nn::Module {
 public:
  ConvBNReLU6(int64_t in_channels, int64_t out_channels, int64_t kernel_size = 3, int64_t stride = 1,
              int64_t groups = 1);
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<nn::Conv2d> conv;
  std::shared_ptr<nn::BatchNorm2d> bn;
  std::shared_ptr<nn::ReLU6> act;
};

// Expand (1×1, skipped when expand_ratio is 1), depthwise 3×3, project (1×1 + BN, linear); a
// residual when the stride is 1 and the width is kept.
class InvertedResidual : public nn::Module {
 public:
  InvertedResidual(int64_t inp, int64_t oup, int64_t stride, int64_t expand_ratio);
  Tensor forward(const Tensor& x) override;
  bool use_res_connect;
  std::shared_ptr<nn::Sequential> conv;
};

class MobileNetV2 : public nn::Module {
 public:
  explicit MobileNetV2(int64_t num_classes = 1000, double width_mult = 1.0, int64_t round_nearest = 8,
                       double dropout = 0.2);
  Tensor forward(const Tensor& x) override;  // x [N, 3, H, W] → logits [N, num_classes]
  int64_t last_channel;
  std::shared_ptr<nn::Sequential> features, classifier;
};

std::shared_ptr<MobileNetV2> mobilenet_v2(int64_t num_classes = 1000);

}  // namespace kiln::models
