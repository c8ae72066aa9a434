// conv1d/2d/3d with string padding ("same", "valid") and nn.Conv1d/2d/3d with each padding_mode
// against PyTorch 1.13, gradients included. The fixture (tests/fixtures/torch_convpad.safetensors)
// was written by tests/fixtures/make_torch_convpad_fixture.py: each case holds its inputs
// ("<case>.in<i>") and PyTorch's outputs ("<case>.out", "<case>.out1", ...).
//
// Deliberate difference: torch 1.13's circular F.pad refuses an unbatched input (it takes dim 1
// for channels: "Invalid padding size"); kiln pads its last dims, as later torch versions do.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "tests/unit/torch_fixture.h"

namespace kiln {
namespace {

using kiln::testing::expect_error;
using kiln::testing::grads;
using kiln::testing::Outs;
using kiln::testing::operator+;

const kiln::testing::TorchCases fixture("torch_convpad.safetensors");
// The fp32 convolutions sum C_in x kernel products per output, in another order than torch.
constexpr double kLongSum = kiln::testing::kTorchLongSumTol;

TEST(TorchConvPad, Conv1dSameValid) {
  fixture.check(
      "conv1d",
      [] {
        const std::string c = "conv1d";
        Tensor x = fixture.in(c), w4 = fixture.in(c, 1), w3 = fixture.in(c, 2), w2 = fixture.in(c, 3),
               b = fixture.in(c, 4), wg = fixture.in(c, 5);
        return Outs{conv1d(x, w4, b, 1, "same"),
                    conv1d(x, w3, {}, 1, "same"),
                    conv1d(x, w4, b, 1, "same", 2),
                    conv1d(x, w2, b, 1, "same", 3),
                    conv1d(x, w4, b, 1, "valid"),
                    conv1d(x, w4, b, 2, "valid", 2),
                    conv1d(x[0], w4, b, 1, "same"),
                    conv1d(x, wg, {}, 1, "same", 1, 3),
                    conv1d(x.transpose(1, 2).contiguous().transpose(1, 2), w4, b, {1}, std::string("same"))};
      },
      kLongSum);
  fixture.check(
      "conv1d_grad",
      [] {
        Tensor x = fixture.in("conv1d_grad"), w = fixture.in("conv1d_grad", 1), b = fixture.in("conv1d_grad", 2);
        return grads([](const Outs& a) { return conv1d(a[0], a[1], a[2], 1, "same"); }, {x, w, b}) +
               grads([](const Outs& a) { return conv1d(a[0], a[1], a[2], 1, "same", 3); },
                     {x, w.narrow(2, 0, 2).contiguous(), b});
      },
      kLongSum);
}

TEST(TorchConvPad, Conv2dConv3dSame) {
  fixture.check(
      "conv2d",
      [] {
        Tensor x = fixture.in("conv2d"), wa = fixture.in("conv2d", 1), wb = fixture.in("conv2d", 2),
               b = fixture.in("conv2d", 3);
        return Outs{conv2d(x, wa, b, 1, "same"),     conv2d(x, wb, b, {1, 1}, "same", {1, 2}),
                    conv2d(x, wb, {}, 1, "same", 2), conv2d(x, wa, b, 1, "valid"),
                    conv2d(x[1], wa, b, 1, "same"),  conv2d(x.permute({0, 1, 3, 2}), wa, b, 1, "same")};
      },
      kLongSum);
  fixture.check(
      "conv2d_grad",
      [] {
        return grads(
            [](const Outs& a) {
              return conv2d(a[0], a[1], a[2], 1, "same", {1, 2});
            },
            {fixture.in("conv2d_grad"), fixture.in("conv2d_grad", 1), fixture.in("conv2d_grad", 2)});
      },
      kLongSum);
  fixture.check(
      "conv3d",
      [] {
        Tensor x = fixture.in("conv3d"), w = fixture.in("conv3d", 1), b = fixture.in("conv3d", 2);
        return Outs{conv3d(x, w, b, 1, "same"), conv3d(x, w, b, 1, "same", {2, 1, 1}), conv3d(x, w, {}, 1, "valid"),
                    conv3d(x[0], w, b, 1, "same")};
      },
      kLongSum);
  fixture.check(
      "conv3d_grad",
      [] {
        return grads(
            [](const Outs& a) {
              return conv3d(a[0], a[1], a[2], 1, "same", {2, 1, 1});
            },
            {fixture.in("conv3d_grad"), fixture.in("conv3d_grad", 1), fixture.in("conv3d_grad", 2)});
      },
      kLongSum);
}

TEST(TorchConvPad, StringPaddingErrors) {
  Tensor x = fixture.in("conv1d"), w = fixture.in("conv1d", 1);
  expect_error([&] { (void)conv1d(x, w, {}, 2, "same"); },
               "conv1d: padding='same' is not supported for strided convolutions");
  expect_error(
      [&] {
        (void)conv2d(fixture.in("conv2d"), fixture.in("conv2d", 1), {}, {1, 2}, "same");
      },
      "conv2d: padding='same' is not supported for strided convolutions, got stride=[1, 2]");
  expect_error([&] { (void)conv3d(fixture.in("conv3d"), fixture.in("conv3d", 1), {}, 1, "full"); },
               "conv3d: Invalid padding string: 'full'");
  expect_error([&] { (void)conv1d(x, w, {}, 1, "SAME"); }, "Invalid padding string");
  expect_error([&] { (void)conv1d(x, w, {}, 1, "same", int64_t(1) << 62); }, "conv1d: padding='same' with dilation");
  expect_error([&] { (void)conv1d(x, w, {}, 1, "same", 0); }, "conv1d: dilation must be greater than zero");
  // A weight of the wrong rank is the conv's own error, not an out-of-bounds read.
  expect_error([&] { (void)conv2d(fixture.in("conv2d"), w, {}, 1, "same"); }, "conv2d");
  // The integer overloads are still chosen for 0 and braced lists.
  EXPECT_EQ(conv1d(x, w, {}, 1, 0).sizes().vec(), (std::vector<int64_t>{2, 4, 6}));
  EXPECT_EQ(conv2d(fixture.in("conv2d"), fixture.in("conv2d", 1), {}, {1, 1}, {1, 1}).sizes().vec(),
            (std::vector<int64_t>{2, 4, 8, 6}));
}

// in<0> the input, in<1>/in<2> the weight and bias; outputs: forward, then the gradients of
// sum(forward^2) for input, weight, bias.
void check_module(const std::string& name, nn::Module& m, Tensor& weight, Tensor& bias) {
  {
    NoGradGuard g;
    weight.copy_(fixture.in(name, 1));
    bias.copy_(fixture.in(name, 2));
  }
  fixture.check(
      name,
      [&] {
        m.zero_grad();
        Tensor x = fixture.in(name).clone().requires_grad_(true);
        Tensor y = m.forward(x);
        y.square().sum().backward();
        return Outs{y.detach(), x.grad(), weight.grad(), bias.grad()};
      },
      kLongSum);
}

TEST(TorchConvPad, ModulesEachPaddingMode) {
  for (const std::string mode : {"zeros", "reflect", "replicate", "circular"}) {
    SCOPED_TRACE(mode);
    {
      nn::Conv1d a(3, 4, 3, 1, 2, 1, 1, true, mode);
      check_module("Conv1d_" + mode + "_int", a, a.weight, a.bias);
      nn::Conv1d b(3, 4, 4, 1, "same", 1, 1, true, mode);
      check_module("Conv1d_" + mode + "_same", b, b.weight, b.bias);
      nn::Conv1d c(3, 4, 3, 1, "valid", 1, 1, true, mode);
      check_module("Conv1d_" + mode + "_valid", c, c.weight, c.bias);
      if (mode != "circular") {
        nn::Conv1d d(3, 4, 3, 1, 1, 1, 1, true, mode);
        check_module("Conv1d_" + mode + "_unbatched", d, d.weight, d.bias);
      }
    }
    {
      nn::Conv2d a(2, 3, {2, 3}, 1, {1, 2}, 1, 1, true, mode);
      check_module("Conv2d_" + mode + "_int", a, a.weight, a.bias);
      nn::Conv2d b(2, 3, {4, 3}, 1, "same", {1, 2}, 1, true, mode);
      check_module("Conv2d_" + mode + "_same", b, b.weight, b.bias);
    }
    {
      nn::Conv3d a(2, 3, {2, 3, 3}, 1, {1, 1, 2}, 1, 1, true, mode);
      check_module("Conv3d_" + mode + "_int", a, a.weight, a.bias);
      nn::Conv3d b(2, 3, {2, 2, 3}, 1, "same", 1, 1, true, mode);
      check_module("Conv3d_" + mode + "_same", b, b.weight, b.bias);
    }
  }
}

TEST(TorchConvPad, ModuleReprAndErrors) {
  // As torch 1.13 prints them.
  EXPECT_EQ(nn::Conv2d(2, 3, 4, 1, "same", 2).extra_repr(),
            "2, 3, kernel_size=(4, 4), stride=(1, 1), padding=same, dilation=(2, 2)");
  EXPECT_EQ(nn::Conv1d(1, 1, 3, 2, 1, 1, 1, true, "circular").extra_repr(),
            "1, 1, kernel_size=(3,), stride=(2,), padding=(1,), padding_mode=circular");
  EXPECT_EQ(nn::Conv3d(1, 1, 3, 1, "valid").extra_repr(),
            "1, 1, kernel_size=(3, 3, 3), stride=(1, 1, 1), padding=valid");
  expect_error([&] { (void)nn::Conv2d(2, 3, 3, 2, "same"); },
               "Conv2d: padding='same' is not supported for strided convolutions");
  expect_error([&] { (void)nn::Conv1d(2, 3, 3, 1, "bogus"); },
               "Conv1d: Invalid padding string 'bogus', should be one of {'valid', 'same'}");
  expect_error([&] { (void)nn::Conv3d(2, 3, 3, 1, 0, 1, 1, true, "mirror"); },
               "Conv3d: padding_mode must be one of {'zeros', 'reflect', 'replicate', 'circular'}, but got "
               "padding_mode='mirror'");
  // reflect needs a padding smaller than the input, as torch's F.pad.
  nn::Conv1d r(1, 1, 3, 1, 3, 1, 1, true, "reflect");
  expect_error([&] { (void)r.forward(ones({1, 1, 3})); }, "pad: padding size should be less than");
}

TEST(TorchConvPad, PadCircular) {
  fixture.check("pad_circular", [] {
    Tensor x = fixture.in("pad_circular");
    return Outs{pad(x, {1, 2, 1, 1}, "circular"), pad(x, {5, 0, 0, 4}, "circular"),
                pad(x.select(2, 0), {3, 1}, "circular")};
  });
  fixture.check("pad_circular_grad", [] {
    return grads([](const Outs& a) { return pad(a[0], {1, 2, 3, 0}, "circular"); }, {fixture.in("pad_circular_grad")});
  });
  Tensor x = fixture.in("pad_circular");
  expect_error(
      [&] {
        (void)pad(x, {6, 0, 0, 0}, "circular");
      },
      "pad: Padding value causes wrapping around more than once");
  expect_error([&] { (void)pad(x, {-3, -3, 0, 0}, "circular"); }, "removes more than the");
  expect_error([&] { (void)pad(x, {4, -2, 0, 0}, "circular"); }, "causes wrapping around more than once");
  expect_error([&] { (void)pad(x, {1, 1}, "circular"); }, "needs a 2-D (unbatched) or 3-D input");
  expect_error([&] { (void)pad(x, {1, 1, 1, 1}, "circular", 1.0); }, "doesn't take in value argument");
}

// Negative circular padding crops first, then wraps what is left (torch 2's answer; torch 1.13
// has no negative circular padding to compare with).
TEST(TorchConvPad, NegativeCircularPadding) {
  Tensor x = arange(5, kFloat64).reshape({1, 5});  // [0 1 2 3 4]
  auto row = [](const Tensor& t) { return t.reshape({-1}).to_vector<double>(); };
  EXPECT_EQ(row(pad(x, {-1, 0}, "circular")), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(row(pad(x, {-1, -2}, "circular")), (std::vector<double>{1, 2}));
  EXPECT_EQ(row(pad(x, {2, -1}, "circular")), (std::vector<double>{2, 3, 0, 1, 2, 3}));
  EXPECT_EQ(row(pad(x, {-2, 1}, "circular")), (std::vector<double>{2, 3, 4, 2}));
  EXPECT_EQ(row(pad(x, {-5, 0}, "circular")), (std::vector<double>{}));
  // Gradients go to the entries kept, once per use.
  Tensor w = arange(5, kFloat64).requires_grad_();
  pad(w.reshape({1, 5}), {2, -1}, "circular").sum().backward();
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{1, 1, 2, 2, 0}));
}

}  // namespace
}  // namespace kiln
