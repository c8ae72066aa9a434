#include "models/mobilenet_v2.h"

#include <algorithm>
#include <cmath>

#include "kiln/nn/init.h"
#include "kiln/nn/linear.h"
#include "kiln/ops/nn.h"
#include "models/common.h"

namespace kiln::models {

namespace {

// torchvision's _make_divisible: round to a multiple of `divisor`, never more than 10 % down.
int64_t make_divisible(double v, int64_t divisor) {
  int64_t out = std::max(divisor, static_cast<int64_t>(v + divisor / 2.0) / divisor * divisor);
  if (static_cast<double>(out) < 0.9 * v) out += divisor;
  return out;
}

}  // namespace

ConvBNReLU6::ConvBNReLU6(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride, int64_t groups)
    : Module("Conv2dNormActivation") {
  conv = register_module("0", std::make_shared<nn::Conv2d>(in_channels, out_channels, kernel_size, stride,
                                                           (kernel_size - 1) / 2, 1, groups, /*bias=*/false));
  bn = register_module("1", std::make_shared<nn::BatchNorm2d>(out_channels));
  act = register_module("2", std::make_shared<nn::ReLU6>());
}

Tensor ConvBNReLU6::forward(const Tensor& x) { return act->forward(bn->forward(conv->forward(x))); }

InvertedResidual::InvertedResidual(int64_t inp, int64_t oup, int64_t stride, int64_t expand_ratio)
    : Module("InvertedResidual") {
  KILN_CHECK(stride == 1 || stride == 2, "InvertedResidual: stride must be 1 or 2, got ", stride);
  const auto hidden = static_cast<int64_t>(std::round(static_cast<double>(inp * expand_ratio)));
  use_res_connect = stride == 1 && inp == oup;
  conv = register_module("conv", std::make_shared<nn::Sequential>());
  if (expand_ratio != 1) conv->push_back(std::make_shared<ConvBNReLU6>(inp, hidden, 1));
  conv->push_back(std::make_shared<ConvBNReLU6>(hidden, hidden, 3, stride, /*groups=*/hidden));
  conv->push_back(std::make_shared<nn::Conv2d>(hidden, oup, 1, 1, 0, 1, 1, /*bias=*/false));
  conv->push_back(std::make_shared<nn::BatchNorm2d>(oup));
}

Tensor InvertedResidual::forward(const Tensor& x) { return use_res_connect ? x + conv->forward(x) : conv->forward(x); }

MobileNetV2::MobileNetV2(int64_t num_classes, double width_mult, int64_t round_nearest, double dropout)
    : Module("MobileNetV2") {
  KILN_CHECK(num_classes > 0 && width_mult > 0 && round_nearest > 0,
             "MobileNetV2: num_classes, width_mult and round_nearest must be positive, got ", num_classes, ", ",
             width_mult, ", ", round_nearest);
  // (expansion t, channels c, repeats n, first stride s) per stage, as torchvision.
  const int64_t setting[7][4] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                                 {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  int64_t input_channel = make_divisible(32 * width_mult, round_nearest);
  last_channel = make_divisible(1280 * std::max(1.0, width_mult), round_nearest);
  features = register_module("features", std::make_shared<nn::Sequential>());
  features->push_back(std::make_shared<ConvBNReLU6>(3, input_channel, 3, 2));
  for (const auto& [t, c, n, s] : setting) {
    const int64_t output_channel = make_divisible(static_cast<double>(c) * width_mult, round_nearest);
    for (int64_t i = 0; i < n; ++i) {
      features->push_back(std::make_shared<InvertedResidual>(input_channel, output_channel, i == 0 ? s : 1, t));
      input_channel = output_channel;
    }
  }
  features->push_back(std::make_shared<ConvBNReLU6>(input_channel, last_channel, 1));
  classifier = register_module(
      "classifier",
      std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
          std::make_shared<nn::Dropout>(dropout), std::make_shared<nn::Linear>(last_channel, num_classes)}));

  // torchvision's init: He-normal (fan_out) convs with zero bias, BN 1/0, Linear N(0, 0.01) with zero bias.
  for (auto& [name, m] : named_modules()) {
    if (auto* conv = dynamic_cast<nn::Conv2d*>(m)) {
      nn::init::kaiming_normal_(conv->weight, 0.0, "fan_out");
      if (conv->bias.defined()) nn::init::zeros_(conv->bias);
    } else if (auto* bn = dynamic_cast<nn::BatchNorm*>(m)) {
      nn::init::ones_(bn->weight);
      nn::init::zeros_(bn->bias);
    } else if (auto* fc = dynamic_cast<nn::Linear*>(m)) {
      nn::init::normal_(fc->weight, 0.0, 0.01);
      nn::init::zeros_(fc->bias);
    }
  }
}

Tensor MobileNetV2::forward(const Tensor& x) {
  KILN_CHECK(x.dim() == 4 && x.size(1) == 3, "MobileNetV2: expected x [N, 3, H, W], got ", detail::sizes_str(x));
  Tensor y = adaptive_avg_pool2d(features->forward(x), {1, 1});
  return classifier->forward(y.flatten(1));
}

std::shared_ptr<MobileNetV2> mobilenet_v2(int64_t num_classes) { return std::make_shared<MobileNetV2>(num_classes); }

}  // namespace kiln::models
