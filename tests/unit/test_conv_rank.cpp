// The convolution and pooling code is one piece over the spatial rank; these pin what that must
// keep apart per rank: a 1-D op's errors name that op and show the user's own 1-D values (the
// 1-D pools run as 2-D prims with a leading 1, which once leaked into messages as "[1, 0]"),
// and each module keeps its torch name, repr and parameter names.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "tests/unit/expect_error.h"

namespace kiln {
namespace {

using testing::expect_error;

Tensor x1() { return randn({1, 2, 6}); }
bool same(const Tensor& a, const Tensor& b) { return a.sizes() == b.sizes() && all(eq(a, b)).item<bool>(); }

TEST(ConvRank, MaxPool1dMessagesShowTheUsersValues) {
  const Tensor x = x1();
  expect_error([&] { (void)max_pool1d(x, {2}, {}, {0}, {0}); },
               {"max_pool1d: dilation should be greater than zero, but got dilation [0]"}, {"[1, 0]"});
  expect_error([&] { (void)max_pool1d(x, {0}); },
               {"max_pool1d: kernel size should be greater than zero, but got kernel_size [0]"}, {"[1, 0]"});
  expect_error([&] { (void)max_pool1d(x, {2}, {0}); },
               {"max_pool1d: stride should be greater than zero, but got stride [0]"}, {"[1, 0]"});
  expect_error([&] { (void)max_pool1d(x, {2}, {1}, {2}); },
               {"max_pool1d: pad should be at most half", "padding [2] for kernel_size [2]"}, {"[0, 2]", "[1, 2]"});
  expect_error([&] { (void)max_pool1d(x, {7}); },
               {"max_pool1d: given input size (2x6), calculated output size (2x0) is too small"}, {"x1x"});
  expect_error(
      [&] {
        (void)max_pool1d(randn({2, 0, 5}), {2});
      },
      {"max_pool1d: expected a 2-D or 3-D", "got shape [2, 0, 5]"}, {"[2, 0, 1, 5]"});
  expect_error(
      [&] {
        (void)max_pool1d(x, {2, 2});
      },
      {"max_pool1d: expected kernel_size to be a single int, got 2 values"});
  expect_error([&] { (void)max_pool1d_with_indices(x, {2}, {}, {0}, {0}); }, {"max_pool1d:", "dilation [0]"},
               {"[1, 0]"});
}

TEST(ConvRank, AvgAndLpPool1dMessagesShowTheUsersValues) {
  const Tensor x = x1();
  expect_error([&] { (void)avg_pool1d(x, {0}); },
               {"avg_pool1d: kernel size should be greater than zero, but got kernel_size [0]"}, {"[1, 0]"});
  expect_error([&] { (void)avg_pool1d(x, {2}, {0}); },
               {"avg_pool1d: stride should be greater than zero, but got stride [0]"}, {"[1, 0]"});
  expect_error([&] { (void)avg_pool1d(x, {2}, {1}, {2}); }, {"avg_pool1d:", "padding [2] for kernel_size [2]"},
               {"[0, 2]"});
  expect_error([&] { (void)avg_pool1d(x, {7}); }, {"avg_pool1d: given input size (2x6), calculated output size (2x0)"},
               {"x1x"});
  expect_error([&] { (void)avg_pool1d(randn({1, 1, 4, 4}), {2}); }, {"avg_pool1d: expected a 2-D or 3-D"});
  // lp_pool1d runs avg_pool1d: its errors still name lp_pool1d.
  expect_error([&] { (void)nn::functional::lp_pool1d(x, 2, {0}); },
               {"lp_pool1d: kernel size should be greater than zero, but got kernel_size [0]"}, {"avg_pool", "[1, 0]"});
  expect_error([&] { (void)nn::functional::lp_pool1d(x, 2, {7}); },
               {"lp_pool1d: given input size (2x6), calculated output size (2x0)"}, {"avg_pool", "x1x"});
  expect_error([&] { (void)nn::functional::lp_pool1d(x, 2, {2}, {0}); },
               {"lp_pool1d: stride should be greater than zero"}, {"avg_pool"});
  expect_error(
      [&] {
        (void)nn::functional::lp_pool2d(randn({1, 1, 4, 4}), 2, {0, 2});
      },
      {"lp_pool2d: kernel size should be greater than zero, but got kernel_size [0, 2]"}, {"avg_pool"});
}

TEST(ConvRank, AdaptivePool1dMessages) {
  const Tensor x = x1();
  expect_error(
      [&] {
        (void)adaptive_avg_pool1d(x, {2, 2});
      },
      {"adaptive_avg_pool1d: expected output_size to be a single int, got 2 values"});
  expect_error([&] { (void)adaptive_avg_pool1d(x, {-1}); },
               {"adaptive_avg_pool1d: output_size must be non-negative, got [-1]"}, {"[1, -1]"});
  expect_error([&] { (void)adaptive_max_pool1d(x, {-1}); },
               {"adaptive_max_pool1d: output_size must be non-negative, got [-1]"}, {"[1, 1, -1]"});
  expect_error(
      [&] {
        (void)adaptive_avg_pool1d(randn({1, 1, 4, 4}), {2});
      },
      {"adaptive_avg_pool1d: expected a 2-D or 3-D input"});
  expect_error([&] { (void)adaptive_max_pool1d(randn({1, 0, 4}), {2}); }, {"adaptive_max_pool1d:", "non-zero size"});
  expect_error(
      [&] {
        (void)adaptive_avg_pool2d(x, {2, 2, 2});
      },
      {"adaptive_avg_pool2d: expected output_size to be a single int or a pair of ints, got 3 values"});
}

TEST(ConvRank, Conv1dMessagesNameTheOp) {
  const Tensor x = x1();
  expect_error(
      [&] {
        (void)conv1d(x, randn({1, 2, 3}), {}, {0});
      },
      {"conv1d: non-positive stride is not supported, got stride [0]"}, {"convolution:"});
  expect_error(
      [&] {
        (void)conv1d(x, randn({1, 2, 3}), {}, {1}, {0}, {0});
      },
      {"conv1d: dilation should be greater than zero, got dilation [0]"}, {"convolution:"});
  expect_error(
      [&] {
        (void)conv1d(x, randn({1, 2, 7}));
      },
      {"conv1d: calculated padded input size per channel: (6). Kernel size: (7)."}, {"convolution:"});
  expect_error(
      [&] {
        (void)conv1d(x, randn({1, 3, 3}));
      },
      {"conv1d: given groups=1", "to have 3 channels, but got 2"}, {"convolution:"});
  expect_error(
      [&] {
        (void)conv_transpose1d(x, randn({2, 1, 3}), {}, {1}, {0}, {2});
      },
      {"conv_transpose1d: output padding must be smaller than either stride or dilation, but got "
       "output_padding [2], stride [1], dilation [1]"},
      {"convolution:"});
  expect_error(
      [&] {
        (void)conv_transpose1d(x, randn({2, 1, 3}), {}, {0});
      },
      {"conv_transpose1d: non-positive stride", "[0]"}, {"convolution:"});
  expect_error(
      [&] {
        (void)conv2d(randn({1, 2, 5, 5}), randn({1, 2, 3, 3}), {}, {1, 0});
      },
      {"conv2d: non-positive stride is not supported, got stride [1, 0]"});
}

// The 2-D and 3-D pools share the 1-D pools' checks; their messages are as before.
TEST(ConvRank, Pool2d3dMessagesUnchanged) {
  expect_error(
      [&] {
        (void)max_pool2d(randn({1, 1, 4, 4}), {2}, {}, {0}, {1, 0});
      },
      {"max_pool2d: dilation should be greater than zero, but got dilation [1, 0]"});
  expect_error(
      [&] {
        (void)avg_pool2d(randn({1, 1, 4, 4}), {2}, {1}, {2});
      },
      {"avg_pool2d: pad should be at most half of effective kernel size, but got padding [2, 2] for "
       "kernel_size [2, 2]"});
  expect_error(
      [&] {
        (void)max_pool2d(randn({1, 1, 2, 2}), {3});
      },
      {"max_pool2d: given input size (1x2x2), calculated output size (1x0x0) is too small"});
  expect_error(
      [&] {
        (void)max_pool3d(randn({1, 1, 4, 4, 4}), {2}, {0});
      },
      {"max_pool3d: stride should be greater than zero, but got stride [0, 0, 0]"});
  expect_error(
      [&] {
        (void)avg_pool3d(randn({4, 4, 4}), {2});
      },
      {"avg_pool3d: expected a 4-D or 5-D (batch mode) input"});
  expect_error(
      [&] {
        (void)max_pool2d(randn({1, 1, 4, 4}), {2, 2, 2});
      },
      {"max_pool2d: expected kernel_size to be a single int or a pair of ints, got 3 values"});
  expect_error(
      [&] {
        (void)max_pool3d(randn({1, 1, 4, 4, 4}), {2, 2});
      },
      {"max_pool3d: expected kernel_size to be a single int or 3 ints, got 2 values"});
}

std::vector<std::string> names(const std::vector<std::pair<std::string, Tensor>>& v) {
  std::vector<std::string> r;
  for (const auto& p : v) r.push_back(p.first);
  return r;
}

TEST(ConvRank, ConvModulesKeepTheirNamesReprAndShapes) {
  nn::Conv1d c1(2, 4, 3, 2, 1, 1, 2, false);
  EXPECT_EQ(c1.type_name(), "Conv1d");
  EXPECT_EQ(c1.extra_repr(), "2, 4, kernel_size=(3,), stride=(2,), padding=(1,), groups=2, bias=False");
  EXPECT_EQ(c1.weight.sizes(), IntArrayRef({4, 1, 3}));
  EXPECT_FALSE(c1.bias.defined());
  EXPECT_EQ(names(c1.named_parameters()), std::vector<std::string>({"weight"}));
  nn::Conv2d c2(2, 4, {3, 1}, 1, "same", 1, 1, true, "reflect");
  EXPECT_EQ(c2.type_name(), "Conv2d");
  EXPECT_EQ(c2.extra_repr(), "2, 4, kernel_size=(3, 1), stride=(1, 1), padding=same, padding_mode=reflect");
  EXPECT_EQ(c2.forward(randn({1, 2, 5, 6})).sizes(), IntArrayRef({1, 4, 5, 6}));
  nn::Conv3d c3(1, 2, 2);
  EXPECT_EQ(c3.type_name(), "Conv3d");
  EXPECT_EQ(c3.weight.sizes(), IntArrayRef({2, 1, 2, 2, 2}));
  EXPECT_EQ(c3.forward(randn({1, 1, 3, 3, 3})).sizes(), IntArrayRef({1, 2, 2, 2, 2}));
  EXPECT_EQ(names(c3.named_parameters()), std::vector<std::string>({"weight", "bias"}));
  nn::ConvTranspose2d t2(4, 6, 3, 2, 1, 1, 2);
  EXPECT_EQ(t2.type_name(), "ConvTranspose2d");
  EXPECT_EQ(t2.extra_repr(),
            "4, 6, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), output_padding=(1, 1), groups=2");
  EXPECT_EQ(t2.weight.sizes(), IntArrayRef({4, 3, 3, 3}));
  EXPECT_EQ(t2.forward(randn({1, 4, 3, 3})).sizes(), IntArrayRef({1, 6, 6, 6}));
  nn::ConvTranspose1d t1(2, 2, 3);
  EXPECT_EQ(t1.type_name(), "ConvTranspose1d");
  EXPECT_EQ(t1.forward(randn({2, 5})).sizes(), IntArrayRef({2, 7}));
  nn::ConvTranspose3d t3(1, 1, 2);
  EXPECT_EQ(t3.type_name(), "ConvTranspose3d");
  expect_error([] { nn::ConvTranspose3d(1, 1, 2, 1, 0, 1); }, "ConvTranspose3d: output padding");
  expect_error([] { nn::Conv1d(2, 3, 3, 1, 0, 1, 2); }, "Conv1d: out_channels (3) must be divisible");
  expect_error([] { nn::Conv2d(3, 4, 3, 1, 0, 1, 2); }, "Conv2d: in_channels (3) must be divisible");
  expect_error([] { nn::Conv1d(2, 2, {3, 3}); }, "Conv1d");
}

TEST(ConvRank, PoolModulesKeepTheirNamesAndRepr) {
  nn::MaxPool2d m2({2, 2});
  EXPECT_EQ(m2.type_name(), "MaxPool2d");
  EXPECT_EQ(m2.extra_repr(), "kernel_size=(2, 2), stride=(2, 2), padding=0, dilation=1, ceil_mode=False");
  const Tensor x = randn({1, 2, 4, 4});
  auto [v, i] = m2.forward_with_indices(x);
  auto [ev, ei] = max_pool2d_with_indices(x, {2, 2});
  EXPECT_TRUE(same(v, ev));
  EXPECT_TRUE(same(i, ei));
  EXPECT_TRUE(same(m2.forward(x), ev));
  nn::MaxPool1d m1(3, 2, 1);
  EXPECT_EQ(m1.type_name(), "MaxPool1d");
  EXPECT_EQ(m1.extra_repr(), "kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=False");
  EXPECT_EQ(nn::MaxPool3d(2).type_name(), "MaxPool3d");
  nn::AvgPool1d a1(3);
  EXPECT_EQ(a1.type_name(), "AvgPool1d");
  EXPECT_EQ(a1.extra_repr(), "kernel_size=(3,), stride=(3,), padding=(0,)");
  EXPECT_FALSE(a1.divisor_override.has_value());
  nn::AvgPool2d a2(2, {}, 0, false, true, 3);
  EXPECT_EQ(a2.type_name(), "AvgPool2d");
  EXPECT_EQ(a2.extra_repr(), "kernel_size=2, stride=2, padding=0");
  EXPECT_TRUE(allclose(a2.forward(ones({1, 1, 4, 4})), full({1, 1, 2, 2}, 4.0 / 3.0)));
  expect_error([] { nn::AvgPool3d(2, {}, 0, false, true, 0); }, "AvgPool3d: divisor_override");
  expect_error([] { nn::MaxPool1d({2, 2}); }, "MaxPool1d: expected kernel_size to be a single int, got 2");
  expect_error([] { nn::MaxPool2d({2, 2, 2}); }, "MaxPool2d: expected kernel_size to be a single int or a pair");
  nn::AdaptiveAvgPool2d p2({3, 2});
  EXPECT_EQ(p2.type_name(), "AdaptiveAvgPool2d");
  EXPECT_EQ(p2.extra_repr(), "output_size=(3, 2)");
  EXPECT_EQ(p2.forward(x).sizes(), IntArrayRef({1, 2, 3, 2}));
  EXPECT_EQ(nn::AdaptiveAvgPool1d(2).forward(x1()).sizes(), IntArrayRef({1, 2, 2}));
  EXPECT_EQ(nn::AdaptiveAvgPool3d(1).type_name(), "AdaptiveAvgPool3d");
  nn::LPPool1d l1(2, 3);
  EXPECT_EQ(l1.type_name(), "LPPool1d");
  EXPECT_EQ(l1.extra_repr(), "norm_type=2, kernel_size=3, stride=None, ceil_mode=False");
  nn::LPPool2d l2(1.5, {2, 2}, 1);
  EXPECT_EQ(l2.type_name(), "LPPool2d");
  EXPECT_EQ(l2.extra_repr(), "norm_type=1.5, kernel_size=(2, 2), stride=1, ceil_mode=False");
  EXPECT_EQ(l2.forward(x).sizes(), IntArrayRef({1, 2, 3, 3}));
}

// BatchNorm and InstanceNorm share torch's _NormBase: the same parameter and buffer names.
TEST(ConvRank, NormModulesShareTheirParametersAndBuffers) {
  nn::BatchNorm2d bn(3);
  nn::InstanceNorm2d in(3, 1e-5, 0.1, true, true);
  const std::vector<std::string> want{"weight", "bias", "running_mean", "running_var", "num_batches_tracked"};
  std::vector<std::string> bn_keys, in_keys;
  for (const auto& [k, t] : bn.state_dict()) bn_keys.push_back(k);
  for (const auto& [k, t] : in.state_dict()) in_keys.push_back(k);
  std::sort(bn_keys.begin(), bn_keys.end());
  std::sort(in_keys.begin(), in_keys.end());
  std::vector<std::string> sorted = want;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(bn_keys, sorted);
  EXPECT_EQ(in_keys, sorted);
  EXPECT_TRUE(same(in.weight, ones({3})));
  EXPECT_TRUE(same(in.running_var, ones({3})));
  EXPECT_EQ(in.type_name(), "InstanceNorm2d");
  EXPECT_EQ(in.extra_repr(), "3, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True");
  nn::InstanceNorm1d plain(4);
  EXPECT_FALSE(plain.weight.defined());
  EXPECT_FALSE(plain.running_mean.defined());
  expect_error([] { nn::InstanceNorm3d(0); }, "InstanceNorm3d: num_features must be positive");
  expect_error([] { nn::BatchNorm1d(0); }, "BatchNorm1d: num_features must be positive");
  in.train();
  (void)in.forward(randn({2, 3, 4, 4}));
  EXPECT_FALSE(same(in.running_mean, zeros({3})));
  in.reset_running_stats();
  EXPECT_TRUE(same(in.running_mean, zeros({3})));
}

}  // namespace
}  // namespace kiln
