// torchvision's ResNet with BasicBlock (resnet18): the same modules, names, shapes and init, so a
// torchvision state_dict loads directly (conv1, bn1, layer1..4.{i}.{conv1,bn1,conv2,bn2,
// downsample.0,downsample.1}, fc).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "kiln/nn/activation.h"
#include "kiln/nn/container.h"
#include "kiln/nn/conv.h"
#include "kiln/nn/linear.h"
#include "kiln/nn/norm.h"
#include "kiln/nn/pooling.h"

namespace kiln::models {

// Two 3×3 convs with batch norm and a residual; `downsample` (1×1 conv + BN) when the stride or
// width changes, else null.
class BasicBlock : public nn::Module {
 public:
  static constexpr int64_t expansion = 1;
  BasicBlock(int64_t inplanes, int64_t planes, int64_t stride = 1,
             std::shared_ptr<nn::Sequential> downsample = nullptr);
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2;
  std::shared_ptr<nn::ReLU> relu;
  std::shared_ptr<nn::Sequential> downsample;
};

class ResNet : public nn::Module {
 public:
  // layers: blocks per stage ({2, 2, 2, 2} for resnet18). zero_init_residual zeroes each block's
  // last BN weight, as torchvision's flag. width: the first stage's channels (64 in torchvision;
  // the stages have width, 2, 4 and 8 times it), smaller for tests.
  explicit ResNet(const std::vector<int64_t>& layers, int64_t num_classes = 1000, bool zero_init_residual = false,
                  int64_t width = 64);
  Tensor forward(const Tensor& x) override;  // x [N, 3, H, W] → logits [N, num_classes]
  std::shared_ptr<nn::Conv2d> conv1;
  std::shared_ptr<nn::BatchNorm2d> bn1;
  std::shared_ptr<nn::ReLU> relu;
  std::shared_ptr<nn::MaxPool2d> maxpool;
  std::shared_ptr<nn::Sequential> layer1, layer2, layer3, layer4;
  std::shared_ptr<nn::AdaptiveAvgPool2d> avgpool;
  std::shared_ptr<nn::Linear> fc;

 private:
  std::shared_ptr<nn::Sequential> make_layer(int64_t planes, int64_t blocks, int64_t stride);
  int64_t inplanes_ = 64;
};

std::shared_ptr<ResNet> resnet18(int64_t num_classes = 1000);

}  // namespace kiln::models
