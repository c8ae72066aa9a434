// The layers added for PyTorch parity (#30): RReLU, Tanhshrink, Softshrink, Hardshrink, Softmin, AlphaDropout,
// FeatureAlphaDropout, Dropout2d, ChannelShuffle, MaxUnpool2d and FractionalMaxPool2d: construction and
// torch's reprs, forward shapes and values, train/eval behaviour, and bad arguments.
#include <gtest/gtest.h>

#include "tests/unit/expect_error.h"

#include <cmath>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/nn.h"

using namespace kiln;
namespace F = kiln::nn::functional;

namespace {

using kiln::testing::expect_error;

using Sizes = std::vector<int64_t>;

std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }
Tensor t64(std::vector<double> v, Sizes s) { return kiln::tensor<double>(std::move(v), s, kFloat64); }

TEST(ParityLayers, Reprs) {
  EXPECT_EQ(nn::RReLU().repr(), "RReLU(lower=0.125, upper=0.3333333333333333)");
  EXPECT_EQ(nn::RReLU(0.1, 0.3, true).repr(), "RReLU(lower=0.1, upper=0.3, inplace=True)");
  EXPECT_EQ(nn::Tanhshrink().repr(), "Tanhshrink()");
  EXPECT_EQ(nn::Softshrink().repr(), "Softshrink(0.5)");
  EXPECT_EQ(nn::Hardshrink(1.0).repr(), "Hardshrink(1.0)");
  EXPECT_EQ(nn::Softmin(1).repr(), "Softmin(dim=1)");
  EXPECT_EQ(nn::AlphaDropout().repr(), "AlphaDropout(p=0.5, inplace=False)");
  EXPECT_EQ(nn::FeatureAlphaDropout(0.2).repr(), "FeatureAlphaDropout(p=0.2, inplace=False)");
  EXPECT_EQ(nn::Dropout2d(0.3, true).repr(), "Dropout2d(p=0.3, inplace=True)");
  EXPECT_EQ(nn::ChannelShuffle(2).repr(), "ChannelShuffle(groups=2)");
  EXPECT_EQ(nn::MaxUnpool2d(2).repr(), "MaxUnpool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))");
  EXPECT_EQ(nn::MaxUnpool2d({3, 2}, 1, {1, 0}).repr(),
            "MaxUnpool2d(kernel_size=(3, 2), stride=(1, 1), padding=(1, 0))");
  EXPECT_EQ(nn::FractionalMaxPool2d(2, std::vector<int64_t>{3, 3}).repr(), "FractionalMaxPool2d()");
}

TEST(ParityLayers, BadArguments) {
  expect_error([] { nn::RReLU(0.5, 0.1); }, {"RReLU", "Lower bound should be less than or equal to the upper bound"});
  expect_error([] { nn::Softshrink(-1); }, {"Softshrink", "lambda must be greater or equal to 0"});
  expect_error([] { nn::AlphaDropout(1.5); }, {"AlphaDropout", "between 0 and 1", "1.5"});
  expect_error([] { nn::FeatureAlphaDropout(-0.1); }, {"FeatureAlphaDropout", "between 0 and 1"});
  expect_error([] { nn::Dropout2d(2); }, {"Dropout2d", "between 0 and 1"});
  expect_error([] { nn::FractionalMaxPool2d(2); }, {"FractionalMaxPool2d requires specifying either"});
  expect_error([] { nn::FractionalMaxPool2d(2, std::vector<int64_t>{3}, std::vector<double>{0.5}); },
               {"only one of output_size and output_ratio"});
  expect_error([] { nn::FractionalMaxPool2d(2, std::nullopt, std::vector<double>{1.5}); },
               {"output_ratio must be between 0 and 1 (got 1.5)"});
  expect_error([] { nn::MaxUnpool2d(std::vector<int64_t>{1, 2, 3}); }, {"MaxUnpool2d", "kernel_size"});
}

TEST(ParityLayers, ShrinksAndSoftmin) {
  Tensor x = t64({-2, -0.5, -0.25, 0, 0.25, 0.5, 2}, {7});
  EXPECT_EQ(vals(nn::Softshrink()(x)), (std::vector<double>{-1.5, 0, 0, 0, 0, 0, 1.5}));
  EXPECT_EQ(vals(nn::Hardshrink()(x)), (std::vector<double>{-2, 0, 0, 0, 0, 0, 2}));
  auto ts = vals(nn::Tanhshrink()(x));
  for (size_t i = 0; i < ts.size(); ++i) EXPECT_NEAR(ts[i], vals(x)[i] - std::tanh(vals(x)[i]), 1e-15);
  Tensor m = nn::Softmin(0)(t64({1, 2}, {2}));
  EXPECT_NEAR(vals(m)[0], 1 / (1 + std::exp(-1.0)), 1e-15);
  EXPECT_EQ(F::softmin(x, 0).sizes().vec(), (Sizes{7}));
}

TEST(ParityLayers, RReLUTrainAndEval) {
  nn::RReLU r(0.1, 0.3);
  Tensor x = t64(std::vector<double>(1000, -1.0), {1000});
  r.eval();
  for (double v : vals(r(x))) EXPECT_NEAR(v, -0.2, 1e-15);  // the mean slope
  r.train();
  auto tv = vals(r(x));
  double lo = 0, hi = -1;
  for (double v : tv) lo = std::min(lo, v), hi = std::max(hi, v);
  EXPECT_GE(lo, -0.3 - 1e-6);
  EXPECT_LE(hi, -0.1 + 1e-6);
  EXPECT_GT(hi - lo, 0.15) << "a random slope per element";
  EXPECT_EQ(vals(r(t64({0, 1, 2}, {3}))), (std::vector<double>{0, 1, 2}));
  // inplace writes the caller's tensor
  nn::RReLU ip(0.1, 0.3, true);
  ip.eval();
  Tensor y = t64({-1, 2}, {2});
  Tensor out = ip(y);
  EXPECT_EQ(vals(y), (std::vector<double>{-0.2, 2}));
  EXPECT_EQ(vals(out), vals(y));
  // F.rrelu's training defaults to false, as torch's
  EXPECT_EQ(vals(F::rrelu(t64({-1}, {1}), 0.1, 0.3)), (std::vector<double>{-0.2}));
}

TEST(ParityLayers, DropoutVariantsTrainAndEval) {
  Tensor x = ones({8, 16, 3, 3});
  nn::Dropout2d d2(0.5);
  nn::AlphaDropout ad(0.5);
  nn::FeatureAlphaDropout fd(0.5);
  for (nn::Module* m : std::vector<nn::Module*>{&d2, &ad, &fd}) {
    m->eval();
    EXPECT_TRUE(m->forward(x).is_same(x)) << m->type_name() << " is the identity in eval mode";
    m->train();
    Tensor y = m->forward(x);
    EXPECT_EQ(y.sizes().vec(), x.sizes().vec());
    EXPECT_NE(vals(y), vals(x)) << m->type_name();
  }
  // whole channels: every (n, c) plane constant, 0 or 2
  auto v = vals(d2(x));
  for (size_t pl = 0; pl < v.size() / 9; ++pl)
    for (size_t k = 0; k < 9; ++k) {
      EXPECT_EQ(v[pl * 9 + k], v[pl * 9]);
      EXPECT_TRUE(v[pl * 9] == 0 || v[pl * 9] == 2);
    }
  // 3-D input is (N, C, L), as PyTorch 2.x: one draw per (n, c) row
  auto v3 = vals(d2(ones({8, 16, 5})));
  for (size_t row = 0; row < v3.size() / 5; ++row)
    for (size_t k = 0; k < 5; ++k) EXPECT_EQ(v3[row * 5 + k], v3[row * 5]);
  expect_error([&] { d2(ones({4, 4})); }, {"dropout2d: expected a 3-D (N, C, L) or 4-D (N, C, H, W) input"});
  // alpha dropout keeps mean ~0 and std ~1 of a standard normal input
  Tensor z = randn({200000});
  Tensor a = ad(z);
  EXPECT_NEAR(a.mean().item<double>(), 0, 0.02);
  EXPECT_NEAR(std::sqrt((a * a).mean().item<double>()), 1, 0.03);
  // feature alpha dropout: one value of the affine map per channel
  auto fv = vals(fd(ones({4, 6, 2})));
  for (size_t row = 0; row < fv.size() / 2; ++row) EXPECT_EQ(fv[row * 2], fv[row * 2 + 1]);
  // inplace
  nn::Dropout2d ip(0.5, true);
  Tensor w = ones({2, 8, 2, 2});
  Tensor o = ip(w);
  EXPECT_EQ(vals(o), vals(w));
}

TEST(ParityLayers, ChannelShuffle) {
  Tensor x = arange(6, TensorOptions(kFloat64)).reshape({1, 6, 1});
  EXPECT_EQ(vals(nn::ChannelShuffle(2)(x)), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(vals(nn::ChannelShuffle(3)(x)), (std::vector<double>{0, 2, 4, 1, 3, 5}));
}

TEST(ParityLayers, MaxUnpool2dInvertsMaxPool2d) {
  Tensor x = t64({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 16, 15}, {1, 1, 4, 4});
  auto [p, idx] = F::max_pool2d_with_indices(x, 2);
  nn::MaxUnpool2d up(2);
  Tensor u = up.forward(p, idx);
  EXPECT_EQ(vals(u), (std::vector<double>{0, 0, 0, 0, 0, 6, 0, 8, 0, 0, 0, 0, 0, 14, 16, 0}));
  // output_size recovers an odd size the pool rounded down
  Tensor x5 = ones({1, 1, 5, 5});
  auto [p5, i5] = F::max_pool2d_with_indices(x5, 2);
  EXPECT_EQ(up.forward(p5, i5, std::vector<int64_t>{5, 5}).sizes().vec(), (Sizes{1, 1, 5, 5}));
  // gradient: each input's gradient is the output gradient at its index
  Tensor pg = p.detach().requires_grad_();
  (up.forward(pg, idx) * arange(16, TensorOptions(kFloat64)).reshape({1, 1, 4, 4})).sum().backward();
  EXPECT_EQ(vals(pg.grad()), (std::vector<double>{5, 7, 13, 14}));
}

TEST(ParityLayers, FractionalMaxPool2d) {
  Tensor x = arange(64, TensorOptions(kFloat32)).reshape({1, 1, 8, 8});
  Tensor rs = kiln::tensor<float>({0.25f, 0.75f}, {1, 1, 2});
  nn::FractionalMaxPool2d m(2, std::vector<int64_t>{4, 4}, std::nullopt, true, rs);
  auto [o, i] = m.forward_with_indices(x);
  EXPECT_EQ(o.sizes().vec(), (Sizes{1, 1, 4, 4}));
  // x increases along rows and columns: each window's max is its bottom-right element
  auto ov = vals(o);
  auto iv = i.to_vector<int64_t>();
  for (size_t k = 0; k < ov.size(); ++k) EXPECT_EQ(ov[k], static_cast<double>(iv[k]));
  EXPECT_EQ(iv.back(), 63);
  EXPECT_EQ(vals(m(x)), ov) << "fixed samples: the same windows every call";
  nn::FractionalMaxPool2d r(3, std::nullopt, std::vector<double>{0.5, 0.5});
  EXPECT_EQ(r(ones({2, 3, 10, 12})).sizes().vec(), (Sizes{2, 3, 5, 6}));
  EXPECT_EQ(r(ones({3, 10, 12})).sizes().vec(), (Sizes{3, 5, 6}));
}

}  // namespace
