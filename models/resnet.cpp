#include "models/resnet.h"

#include "kiln/autograd.h"
#include "kiln/nn/init.h"
#include "models/common.h"

namespace kiln::models {

namespace {

std::shared_ptr<nn::Conv2d> conv3x3(int64_t in, int64_t out, int64_t stride = 1) {
  return std::make_shared<nn::Conv2d>(in, out, 3, stride, 1, 1, 1, /*bias=*/false);
}

std::shared_ptr<nn::Conv2d> conv1x1(int64_t in, int64_t out, int64_t stride = 1) {
  return std::make_shared<nn::Conv2d>(in, out, 1, stride, 0, 1, 1, /*bias=*/false);
}

}  // namespace

BasicBlock::BasicBlock(int64_t inplanes, int64_t planes, int64_t stride, std::shared_ptr<nn::Sequential> ds)
    : Module("BasicBlock") {
  conv1 = register_module("conv1", conv3x3(inplanes, planes, stride));
  bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(planes));
  // torchvision's ReLU(inplace=True) only saves memory; kiln's in-place autograd copies, so out of place.
  relu = register_module("relu", std::make_shared<nn::ReLU>());
  conv2 = register_module("conv2", conv3x3(planes, planes));
  bn2 = register_module("bn2", std::make_shared<nn::BatchNorm2d>(planes));
  if (ds) downsample = register_module("downsample", std::move(ds));
}

Tensor BasicBlock::forward(const Tensor& x) {
  Tensor y = relu->forward(bn1->forward(conv1->forward(x)));
  y = bn2->forward(conv2->forward(y));
  return relu->forward(y + (downsample ? downsample->forward(x) : x));
}

ResNet::ResNet(const std::vector<int64_t>& layers, int64_t num_classes, bool zero_init_residual, int64_t width)
    : Module("ResNet"), inplanes_(width) {
  KILN_CHECK(layers.size() == 4, "ResNet: expected 4 stage sizes, got ", layers.size());
  KILN_CHECK(num_classes > 0, "ResNet: num_classes must be positive, got ", num_classes);
  KILN_CHECK(width > 0, "ResNet: width must be positive, got ", width);
  conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(3, width, 7, 2, 3, 1, 1, /*bias=*/false));
  bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(width));
  relu = register_module("relu", std::make_shared<nn::ReLU>());
  maxpool = register_module("maxpool", std::make_shared<nn::MaxPool2d>(3, 2, 1));
  layer1 = register_module("layer1", make_layer(width, layers[0], 1));
  layer2 = register_module("layer2", make_layer(2 * width, layers[1], 2));
  layer3 = register_module("layer3", make_layer(4 * width, layers[2], 2));
  layer4 = register_module("layer4", make_layer(8 * width, layers[3], 2));
  avgpool = register_module("avgpool", std::make_shared<nn::AdaptiveAvgPool2d>(std::vector<int64_t>{1, 1}));
  fc = register_module("fc", std::make_shared<nn::Linear>(8 * width * BasicBlock::expansion, num_classes));

  // torchvision's init: He-normal (fan_out) convs, BN weight 1 / bias 0; fc keeps Linear's default.
  for (auto& [name, m] : named_modules()) {
    if (auto* conv = dynamic_cast<nn::Conv2d*>(m)) {
      nn::init::kaiming_normal_(conv->weight, 0.0, "fan_out", "relu");
    } else if (auto* bn = dynamic_cast<nn::BatchNorm*>(m)) {
      nn::init::ones_(bn->weight);
      nn::init::zeros_(bn->bias);
    }
  }
  if (zero_init_residual)
    for (auto* layer : {layer1.get(), layer2.get(), layer3.get(), layer4.get()})
      for (const auto& b : *layer) nn::init::zeros_(std::static_pointer_cast<BasicBlock>(b)->bn2->weight);
}

std::shared_ptr<nn::Sequential> ResNet::make_layer(int64_t planes, int64_t blocks, int64_t stride) {
  KILN_CHECK(blocks > 0, "ResNet: each stage needs at least one block, got ", blocks);
  std::shared_ptr<nn::Sequential> downsample;
  if (stride != 1 || inplanes_ != planes * BasicBlock::expansion)
    downsample = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        conv1x1(inplanes_, planes * BasicBlock::expansion, stride),
        std::make_shared<nn::BatchNorm2d>(planes * BasicBlock::expansion)});
  auto layer = std::make_shared<nn::Sequential>();
  layer->push_back(std::make_shared<BasicBlock>(inplanes_, planes, stride, downsample));
  inplanes_ = planes * BasicBlock::expansion;
  for (int64_t i = 1; i < blocks; ++i) layer->push_back(std::make_shared<BasicBlock>(inplanes_, planes));
  return layer;
}

Tensor ResNet::forward(const Tensor& x) {
  KILN_CHECK(x.dim() == 4 && x.size(1) == 3, "ResNet: expected x [N, 3, H, W], got ", detail::sizes_str(x));
  Tensor y = maxpool->forward(relu->forward(bn1->forward(conv1->forward(x))));
  y = layer4->forward(layer3->forward(layer2->forward(layer1->forward(y))));
  return fc->forward(avgpool->forward(y).flatten(1));
}

std::shared_ptr<ResNet> resnet18(int64_t num_classes) {
  return std::make_shared<ResNet>(std::vector<int64_t>{2, 2, 2, 2}, num_classes);
}

}  // namespace kiln::models
