// The 1-D/3-D convolutions and pools, adaptive max pooling, LP pooling, F.unfold/F.fold and the
// integer conv2d / avg_pool2d against PyTorch 1.13. The fixture (tests/fixtures/torch_convnd.safetensors)
// was written by tests/fixtures/make_torch_convnd_fixture.py: each case holds its inputs
// ("<case>.in<i>") and PyTorch's outputs ("<case>.out", "<case>.out1", ...): the op's outputs,
// then the gradients of sum(out^2) with respect to each float input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/nn/functional.h"
#include "tests/unit/torch_fixture.h"

namespace kiln {
namespace {

namespace F = nn::functional;
using kiln::testing::expect_same_as_torch;
using kiln::testing::Outs;
using Shape = std::vector<int64_t>;

const kiln::testing::TorchCases fixture("torch_convnd.safetensors");
// The fp32 convolutions sum C_in x kernel products per output, in another order than torch.
constexpr double kLongSum = kiln::testing::kTorchLongSumTol;

// f's outputs on the case's inputs (within tol), then the gradients of sum(out[0]^2) (as the
// fixture's with_grads), which sum thousands of products: within kLongSum.
void check(const std::string& name, const std::function<Outs(const Outs&)>& f, double tol = kiln::testing::kTorchTol) {
  Outs xs = fixture.inputs(name);
  ASSERT_FALSE(xs.empty()) << name << ": no such case";
  size_t n_out = 0;
  fixture.check(
      name,
      [&] {
        bool any = false;
        for (auto& x : xs)
          if (is_floating_point(x.dtype())) x = x.detach().clone().requires_grad_(true), any = true;
        Outs got = f(xs);
        n_out = got.size();
        if (any) {
          got[0].square().sum().backward();
          for (auto& x : xs)
            if (x.requires_grad()) got.push_back(x.grad());
        }
        return got;
      },
      [&](const Outs& got, size_t k, const Tensor& want) {
        if (k < n_out) return expect_same_as_torch(got[k].detach(), want, kiln::testing::output_name(k), tol);
        expect_same_as_torch(got[k], want, "gradient " + std::to_string(k), kLongSum);
      });
}
Outs pair(std::tuple<Tensor, Tensor> t) { return {std::get<0>(t), std::get<1>(t)}; }

TEST(TorchConvNd, Conv3d) {
  check(
      "conv3d_pad1_bias", [](const Outs& x) { return Outs{conv3d(x[0], x[1], x[2], 1, 1)}; }, kLongSum);
  check(
      "conv3d_groups_stride_dil",
      [](const Outs& x) {
        return Outs{conv3d(x[0], x[1], x[2], Shape{2, 1, 2}, Shape{1, 0, 1}, Shape{1, 2, 1}, 2)};
      },
      kLongSum);
  check(
      "conv3d_unbatched", [](const Outs& x) { return Outs{conv3d(x[0], x[1])}; }, kLongSum);
  check(
      "conv3d_noncontig_depthwise",
      [](const Outs& x) {
        return Outs{conv3d(transpose(x[0], -1, -2), x[1], {}, 1, Shape{0, 1, 1}, 1, 2)};
      },
      kLongSum);
  check(
      "conv3d_empty_batch", [](const Outs& x) { return Outs{conv3d(x[0], x[1], x[2])}; }, kLongSum);
}

TEST(TorchConvNd, ConvTranspose1d3d) {
  check(
      "conv_transpose1d_stride_outpad", [](const Outs& x) { return Outs{conv_transpose1d(x[0], x[1], x[2], 2, 1, 1)}; },
      kLongSum);
  check(
      "conv_transpose1d_groups_dil",
      [](const Outs& x) { return Outs{conv_transpose1d(x[0], x[1], {}, 3, 0, 2, 2, 2)}; }, kLongSum);
  check(
      "conv_transpose1d_unbatched", [](const Outs& x) { return Outs{conv_transpose1d(x[0], x[1], x[2])}; }, kLongSum);
  check(
      "conv_transpose3d_stride_outpad",
      [](const Outs& x) {
        return Outs{conv_transpose3d(x[0], x[1], x[2], 2, 1, Shape{1, 0, 1})};
      },
      kLongSum);
  check(
      "conv_transpose3d_groups_dil",
      [](const Outs& x) {
        return Outs{conv_transpose3d(x[0], x[1], {}, Shape{1, 2, 1}, 0, 0, 4, 2)};
      },
      kLongSum);
  check(
      "conv_transpose3d_unbatched",
      [](const Outs& x) {
        return Outs{conv_transpose3d(x[0], x[1], {}, 1, Shape{1, 0, 0})};
      },
      kLongSum);
}

TEST(TorchConvNd, IntegerConvAndAvgPool) {
  check("conv2d_int64", [](const Outs& x) { return Outs{conv2d(x[0], x[1], x[2], 2, 1, 1, 2)}; });
  check("conv1d_int64", [](const Outs& x) { return Outs{conv1d(x[0], x[1], {}, 1, 0, 2)}; });
  check("conv3d_int64", [](const Outs& x) { return Outs{conv3d(x[0], x[1], {}, 1, 1)}; });
  check("conv_transpose2d_int64", [](const Outs& x) { return Outs{conv_transpose2d(x[0], x[1], {}, 2)}; });
  check("avg_pool2d_int64", [](const Outs& x) {
    return Outs{avg_pool2d(x[0], 3, 2, 1), avg_pool2d(x[0], 3, 2, 1, true, false),
                avg_pool2d(x[0], 2, {}, 0, false, true, 3)};
  });
  check("avg_pool3d_int64", [](const Outs& x) {
    return Outs{avg_pool3d(x[0], 3, 2, 1), avg_pool3d(x[0], 2, {}, 0, true, false)};
  });
}

TEST(TorchConvNd, MaxAvgPool1d3d) {
  check("max_pool1d", [](const Outs& x) { return pair(max_pool1d_with_indices(x[0], 3, 2, 1, 2, true)); });
  check("max_pool1d_unbatched", [](const Outs& x) { return Outs{max_pool1d(x[0], 2)}; });
  check("max_pool3d", [](const Outs& x) {
    return pair(max_pool3d_with_indices(x[0], Shape{3, 2, 2}, Shape{2, 1, 2}, Shape{1, 1, 0}, 1, true));
  });
  check("max_pool3d_dilation_unbatched", [](const Outs& x) { return pair(max_pool3d_with_indices(x[0], 2, 1, 0, 2)); });
  check("max_pool3d_noncontig", [](const Outs& x) { return Outs{max_pool3d(transpose(x[0], -1, -3), 2)}; });
  check("avg_pool1d", [](const Outs& x) { return Outs{avg_pool1d(x[0], 3, 2, 1, true, false)}; });
  check("avg_pool1d_unbatched", [](const Outs& x) { return Outs{avg_pool1d(x[0], 4, 1, 2)}; });
  check("avg_pool3d", [](const Outs& x) { return Outs{avg_pool3d(x[0], 3, 2, 1, true)}; });
  check("avg_pool3d_exclude_pad", [](const Outs& x) {
    return Outs{avg_pool3d(x[0], Shape{3, 2, 3}, Shape{2, 1, 2}, 1, false, false)};
  });
  check("avg_pool3d_divisor_unbatched", [](const Outs& x) { return Outs{avg_pool3d(x[0], 2, {}, 0, false, true, 7)}; });
}

TEST(TorchConvNd, AdaptivePools) {
  check("adaptive_avg_pool1d", [](const Outs& x) { return Outs{adaptive_avg_pool1d(x[0], 3)}; });
  check("adaptive_avg_pool3d", [](const Outs& x) { return Outs{adaptive_avg_pool3d(x[0], Shape{3, 4, 2})}; });
  check("adaptive_avg_pool3d_unbatched", [](const Outs& x) { return Outs{adaptive_avg_pool3d(x[0], 2)}; });
  check("adaptive_max_pool1d", [](const Outs& x) { return pair(adaptive_max_pool1d_with_indices(x[0], 4)); });
  check("adaptive_max_pool2d", [](const Outs& x) { return pair(adaptive_max_pool2d_with_indices(x[0], Shape{3, 2})); });
  check("adaptive_max_pool2d_unbatched", [](const Outs& x) { return pair(adaptive_max_pool2d_with_indices(x[0], 4)); });
  check("adaptive_max_pool3d", [](const Outs& x) {
    return pair(adaptive_max_pool3d_with_indices(x[0], Shape{2, 3, 2}));
  });
  check("adaptive_max_pool3d_unbatched", [](const Outs& x) { return pair(adaptive_max_pool3d_with_indices(x[0], 3)); });
}

TEST(TorchConvNd, LpPool) {
  check("lp_pool1d", [](const Outs& x) { return Outs{F::lp_pool1d(x[0], 2, 3, 2)}; });
  check("lp_pool1d_ceil", [](const Outs& x) { return Outs{F::lp_pool1d(x[0], 1.5, 2, {}, true)}; });
  check("lp_pool2d", [](const Outs& x) { return Outs{F::lp_pool2d(x[0], 2, Shape{2, 3}, Shape{1, 2})}; });
  // Negative window sums of x^3 keep their sign and give NaN under ^(1/3), x^1.5 of a negative is NaN, as torch.
  SCOPED_TRACE("signed");
  Outs x = fixture.inputs("lp_pool2d_signed");
  expect_same_as_torch(F::lp_pool2d(x[0], 3, 2), fixture.out("lp_pool2d_signed", 0), "p=3");
  expect_same_as_torch(F::lp_pool2d(x[0], 1.5, 2), fixture.out("lp_pool2d_signed", 1), "p=1.5");
  expect_same_as_torch(F::lp_pool2d(x[0], 1, 2), fixture.out("lp_pool2d_signed", 2), "p=1");
}

TEST(TorchConvNd, UnfoldFold) {
  check("unfold", [](const Outs& x) { return Outs{F::unfold(x[0], Shape{2, 3}, Shape{1, 2}, 1, Shape{2, 1})}; });
  check("unfold_unbatched", [](const Outs& x) { return Outs{F::unfold(x[0], 2, 1, 0, 2)}; });
  check("fold", [](const Outs& x) {
    return Outs{F::fold(x[0], Shape{5, 6}, Shape{2, 3}, Shape{1, 2}, 1, Shape{2, 1})};
  });
  check("fold_unbatched", [](const Outs& x) { return Outs{F::fold(x[0], Shape{4, 5}, 2)}; });
}

// The modules: torch's reprs and parameter shapes (printed by torch 1.13), forward = the function.
TEST(TorchConvNd, Modules) {
  nn::Conv3d c3(4, 6, 3, Shape{1, 2, 1}, 1, 1, 2, false);
  EXPECT_EQ(c3.repr(),
            "Conv3d(4, 6, kernel_size=(3, 3, 3), stride=(1, 2, 1), padding=(1, 1, 1), groups=2, bias=False)");
  EXPECT_EQ(c3.weight.sizes().vec(), (Shape{6, 2, 3, 3, 3}));
  nn::ConvTranspose1d t1(4, 2, 3, 2, 0, 1);
  EXPECT_EQ(t1.repr(), "ConvTranspose1d(4, 2, kernel_size=(3,), stride=(2,), output_padding=(1,))");
  EXPECT_EQ(t1.weight.sizes().vec(), (Shape{4, 2, 3}));
  nn::ConvTranspose3d t3(2, 4, Shape{1, 2, 3}, 1, 0, 0, 1, true, 2);
  EXPECT_EQ(t3.repr(), "ConvTranspose3d(2, 4, kernel_size=(1, 2, 3), stride=(1, 1, 1), dilation=(2, 2, 2))");
  EXPECT_EQ(t3.weight.sizes().vec(), (Shape{2, 4, 1, 2, 3}));
  EXPECT_EQ(t3.bias.sizes().vec(), (Shape{4}));
  EXPECT_EQ(nn::MaxPool1d(3, 2, 1).repr(),
            "MaxPool1d(kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=False)");
  EXPECT_EQ(nn::MaxPool3d(Shape{2, 2, 3}).repr(),
            "MaxPool3d(kernel_size=(2, 2, 3), stride=(2, 2, 3), padding=0, dilation=1, ceil_mode=False)");
  EXPECT_EQ(nn::AvgPool1d(3, 2, 1).repr(), "AvgPool1d(kernel_size=(3,), stride=(2,), padding=(1,))");
  EXPECT_EQ(nn::AvgPool3d(2, {}, 0, false, true, 3).repr(), "AvgPool3d(kernel_size=2, stride=2, padding=0)");
  EXPECT_EQ(nn::AdaptiveAvgPool1d(3).repr(), "AdaptiveAvgPool1d(output_size=3)");
  EXPECT_EQ(nn::AdaptiveAvgPool3d(Shape{2, 3, 4}).repr(), "AdaptiveAvgPool3d(output_size=(2, 3, 4))");
  EXPECT_EQ(nn::AdaptiveMaxPool1d(4).repr(), "AdaptiveMaxPool1d(output_size=4)");
  EXPECT_EQ(nn::AdaptiveMaxPool2d(Shape{2, 3}, true).repr(), "AdaptiveMaxPool2d(output_size=(2, 3))");
  EXPECT_EQ(nn::AdaptiveMaxPool3d(2).repr(), "AdaptiveMaxPool3d(output_size=2)");
  EXPECT_EQ(nn::LPPool1d(2, 3).repr(), "LPPool1d(norm_type=2, kernel_size=3, stride=None, ceil_mode=False)");
  EXPECT_EQ(nn::LPPool2d(1.5, Shape{2, 3}, 1).repr(),
            "LPPool2d(norm_type=1.5, kernel_size=(2, 3), stride=1, ceil_mode=False)");
  EXPECT_EQ(nn::Unfold(Shape{2, 3}, 1, 1).repr(), "Unfold(kernel_size=(2, 3), dilation=1, padding=1, stride=1)");
  EXPECT_EQ(nn::Fold(Shape{4, 5}, 2).repr(),
            "Fold(output_size=(4, 5), kernel_size=2, dilation=1, padding=0, stride=1)");

  Outs x = fixture.inputs("max_pool3d");
  nn::MaxPool3d mp(Shape{3, 2, 2}, Shape{2, 1, 2}, Shape{1, 1, 0}, 1, true);
  expect_same_as_torch(mp.forward(x[0]), fixture.out("max_pool3d", 0), "MaxPool3d");
  expect_same_as_torch(std::get<1>(mp.forward_with_indices(x[0])), fixture.out("max_pool3d", 1), "indices");
  x = fixture.inputs("adaptive_max_pool2d");
  expect_same_as_torch(nn::AdaptiveMaxPool2d(Shape{3, 2}).forward(x[0]), fixture.out("adaptive_max_pool2d", 0),
                       "AdaptiveMaxPool2d");
  x = fixture.inputs("avg_pool3d");
  expect_same_as_torch(nn::AvgPool3d(3, 2, 1, true).forward(x[0]), fixture.out("avg_pool3d", 0), "AvgPool3d");
  x = fixture.inputs("lp_pool1d");
  expect_same_as_torch(nn::LPPool1d(2, 3, 2).forward(x[0]), fixture.out("lp_pool1d", 0), "LPPool1d");
  x = fixture.inputs("unfold");
  Tensor u = nn::Unfold(Shape{2, 3}, Shape{1, 2}, 1, Shape{2, 1}).forward(x[0]);
  expect_same_as_torch(u, fixture.out("unfold", 0), "Unfold");
  x = fixture.inputs("fold");
  expect_same_as_torch(nn::Fold(Shape{5, 6}, Shape{2, 3}, Shape{1, 2}, 1, Shape{2, 1}).forward(x[0]),
                       fixture.out("fold", 0), "Fold");
  x = fixture.inputs("conv3d_pad1_bias");
  nn::Conv3d m(4, 6, 3, 1, 1);
  {
    NoGradGuard g;
    m.weight.copy_(x[1]);
    m.bias.copy_(x[2]);
  }
  expect_same_as_torch(m.forward(x[0]), fixture.out("conv3d_pad1_bias", 0), "Conv3d", kLongSum);
}

}  // namespace
}  // namespace kiln
