// nn layers against hand computations and the functional ops: parameter names and shapes,
// default initialisation, BatchNorm running statistics, Embedding padding, MultiheadAttention
// against a per-head reference, TransformerEncoderLayer, losses, nn::init, and bad input.
#include <gtest/gtest.h>

#include "tests/unit/expect_error.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/nn.h"

using namespace kiln;
namespace F = kiln::nn::functional;

namespace {

using kiln::testing::expect_error;

std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }

// "name[d0, d1]" per entry: names, order and shapes in one comparison.
std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& v) {
  std::vector<std::string> out;
  for (const auto& [n, t] : v) {
    std::string s = n + "[";
    for (int64_t d = 0; d < t.dim(); ++d) s += (d ? ", " : "") + std::to_string(t.sizes()[d]);
    out.push_back(s + "]");
  }
  return out;
}

void expect_close(const Tensor& got, const Tensor& want, double tol = 1e-5) {
  ASSERT_TRUE(got.defined() && want.defined());
  ASSERT_EQ(got.sizes().vec(), want.sizes().vec());
  auto g = vals(got), w = vals(want);
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], w[i], tol * (1 + std::abs(w[i]))) << "element " << i;
}

double max_abs(const Tensor& t) { return t.abs().max().item<double>(); }

// Every value within ±bound, and the largest close to it (a uniform fill, not a narrower one).
void expect_uniform_bound(const Tensor& t, double bound) {
  double m = max_abs(t);
  EXPECT_LE(m, bound * (1 + 1e-6));
  EXPECT_GT(m, 0.9 * bound);
}

// ---------------------------------------------------------------- nn::init

TEST(NnInit, FansAndGains) {
  auto [fi, fo] = nn::init::calculate_fan_in_and_fan_out(empty({3, 4, 5, 6}));
  EXPECT_EQ(fi, 4 * 30);
  EXPECT_EQ(fo, 3 * 30);
  expect_error([] { nn::init::calculate_fan_in_and_fan_out(empty({5})); }, {"fewer than 2 dimensions"});
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("linear"), 1.0);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("conv2d"), 1.0);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("sigmoid"), 1.0);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("tanh"), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("relu"), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("leaky_relu"), std::sqrt(2.0 / (1 + 0.01 * 0.01)));
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("leaky_relu", 0.2), std::sqrt(2.0 / 1.04));
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("selu"), 0.75);
  expect_error([] { nn::init::calculate_gain("swish"); }, {"unsupported nonlinearity 'swish'"});
}

TEST(NnInit, FillsFollowTorchFormulas) {
  manual_seed(11);
  Tensor w = empty({256, 128});   // fan_in 128, fan_out 256
  nn::init::kaiming_uniform_(w);  // a=0, leaky_relu: gain √2, bound √6/√fan_in
  expect_uniform_bound(w, std::sqrt(6.0 / 128));
  nn::init::kaiming_uniform_(w, 0.0, "fan_out", "relu");
  expect_uniform_bound(w, std::sqrt(6.0 / 256));
  nn::init::xavier_uniform_(w, 2.0);
  expect_uniform_bound(w, 2.0 * std::sqrt(6.0 / (128 + 256)));
  nn::init::kaiming_normal_(w, 0.0, "fan_in", "relu");
  EXPECT_NEAR(w.std().item<double>(), std::sqrt(2.0 / 128), 0.03 * std::sqrt(2.0 / 128));
  EXPECT_NEAR(w.mean().item<double>(), 0.0, 0.005);
  nn::init::xavier_normal_(w);
  EXPECT_NEAR(w.std().item<double>(), std::sqrt(2.0 / 384), 0.03 * std::sqrt(2.0 / 384));
  nn::init::normal_(w, 3.0, 0.5);
  EXPECT_NEAR(w.mean().item<double>(), 3.0, 0.01);
  EXPECT_NEAR(w.std().item<double>(), 0.5, 0.015);
  nn::init::uniform_(w, -1.0, 3.0);
  EXPECT_GE(w.min().item<double>(), -1.0);
  EXPECT_LT(w.max().item<double>(), 3.0);
  EXPECT_NEAR(w.mean().item<double>(), 1.0, 0.02);
  nn::init::constant_(w, 0.5);
  EXPECT_EQ(w.min().item<double>(), 0.5);
  nn::init::ones_(w);
  EXPECT_EQ(w.sum().item<double>(), 256.0 * 128);
  nn::init::zeros_(w);
  EXPECT_EQ(max_abs(w), 0.0);
  expect_error([&] { nn::init::kaiming_uniform_(w, 0.0, "fan_avg"); }, {"mode 'fan_avg' not supported"});
  Tensor zero_elems = empty({0, 3});
  nn::init::kaiming_uniform_(zero_elems);  // a no-op, as torch
}

// Truncated normal: all values in [a, b], mean as the closed form μ + σ(φ(α)−φ(β))/(Φ(β)−Φ(α)).
TEST(NnInit, TruncNormalStaysInRange) {
  manual_seed(12);
  auto phi = [](double x) { return std::exp(-x * x / 2) / std::sqrt(2 * M_PI); };
  auto Phi = [](double x) { return 0.5 * (1 + std::erf(x / std::sqrt(2.0))); };
  struct Case {
    double mean, std, a, b;
  };
  for (Case c : {Case{0, 1, -2, 2}, Case{0.5, 2, -0.5, 1}, Case{0, 1, 2, 3}, Case{1, 0.02, -2, 2}}) {
    for (DType dt : {kFloat32, kFloat64}) {
      Tensor t = empty({20000}, dt);
      nn::init::trunc_normal_(t, c.mean, c.std, c.a, c.b);
      EXPECT_GE(t.min().item<double>(), c.a);
      EXPECT_LE(t.max().item<double>(), c.b);
      double al = (c.a - c.mean) / c.std, be = (c.b - c.mean) / c.std;
      double want = c.mean + c.std * (phi(al) - phi(be)) / (Phi(be) - Phi(al));
      EXPECT_NEAR(t.mean().item<double>(), want, 0.02 * c.std + 1e-3) << c.mean << " " << c.std << " " << c.a;
    }
  }
  Tensor t = empty({4});
  expect_error([&] { nn::init::trunc_normal_(t, 0, 1, 1, -1); }, {"a <= b"});
}

TEST(NnInit, DoesNotRecordAutogradAndIsSeeded) {
  Tensor p = empty({4, 3}).requires_grad_();
  nn::init::xavier_uniform_(p);  // in place on a leaf that requires grad: allowed, unrecorded
  EXPECT_TRUE(p.is_leaf());
  EXPECT_EQ(p.grad_fn(), nullptr);
  manual_seed(7);
  nn::Linear a(8, 4);
  nn::Embedding ea(5, 3);
  manual_seed(7);
  nn::Linear b(8, 4);
  nn::Embedding eb(5, 3);
  EXPECT_EQ(vals(a.weight), vals(b.weight));
  EXPECT_EQ(vals(a.bias), vals(b.bias));
  EXPECT_EQ(vals(ea.weight), vals(eb.weight));
  Generator g1(99), g2(99);
  Tensor x = empty({16}), y = empty({16});
  nn::init::uniform_(x, 0, 1, &g1);
  nn::init::uniform_(y, 0, 1, &g2);
  EXPECT_EQ(vals(x), vals(y));
}

// ---------------------------------------------------------------- Linear, Bilinear, Flatten

TEST(NnLinear, ForwardShapesAndInit) {
  manual_seed(1);
  nn::Linear lin(64, 96);
  EXPECT_EQ(lin.weight.sizes().vec(), (std::vector<int64_t>{96, 64}));
  EXPECT_EQ(lin.bias.sizes().vec(), (std::vector<int64_t>{96}));
  expect_uniform_bound(lin.weight, 1 / 8.0);  // kaiming_uniform(a=√5) = U(±1/√in)
  EXPECT_LE(max_abs(lin.bias), 1 / 8.0);
  EXPECT_GT(max_abs(lin.bias), 0.8 / 8.0);
  // y[n, o] = Σ_i x[n, i] W[o, i] + b[o], by hand in double.
  nn::Linear small(3, 2);
  Tensor x = randn({4, 3});
  auto xv = vals(x), w = vals(small.weight), b = vals(small.bias);
  std::vector<double> want;
  for (int n = 0; n < 4; ++n)
    for (int o = 0; o < 2; ++o) {
      double s = b[o];
      for (int i = 0; i < 3; ++i) s += xv[n * 3 + i] * w[o * 3 + i];
      want.push_back(s);
    }
  expect_close(small.forward(x), tensor<double>(want, {4, 2}));
  // Leading batch dims pass through.
  EXPECT_EQ(small.forward(randn({2, 5, 3})).sizes().vec(), (std::vector<int64_t>{2, 5, 2}));
  nn::Linear nobias(3, 2, false);
  EXPECT_EQ(nobias.named_parameters().size(), 1u);
  EXPECT_FALSE(nobias.bias.defined());
  expect_close(nobias.forward(x), matmul(x, nobias.weight.t()));
  EXPECT_THROW(small.forward(randn({4, 5})), Error);
}

TEST(NnLinear, BilinearMatchesHandComputationAndGradcheck) {
  manual_seed(2);
  nn::Bilinear bl(3, 4, 2);
  EXPECT_EQ(bl.weight.sizes().vec(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_LE(max_abs(bl.weight), 1 / std::sqrt(3.0));
  EXPECT_LE(max_abs(bl.bias), 1 / std::sqrt(3.0));
  nn::Bilinear big(16, 4, 32);
  expect_uniform_bound(big.weight, 0.25);
  Tensor x1 = randn({2, 5, 3}), x2 = randn({2, 5, 4});
  Tensor y = bl(x1, x2);
  ASSERT_EQ(y.sizes().vec(), (std::vector<int64_t>{2, 5, 2}));
  auto a = vals(x1), c = vals(x2), w = vals(bl.weight), b = vals(bl.bias), got = vals(y);
  for (int n = 0; n < 10; ++n)
    for (int o = 0; o < 2; ++o) {
      double s = b[o];
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 4; ++j) s += a[n * 3 + i] * w[(o * 3 + i) * 4 + j] * c[n * 4 + j];
      EXPECT_NEAR(got[n * 2 + o], s, 1e-5);
    }
  expect_error([&] { bl(randn({5, 3}), randn({4, 4})); }, {"bilinear", "same batch dimensions"});
  expect_error([&] { bl(randn({5, 2}), randn({5, 4})); }, {"bilinear", "input1"});
  // Gradients through the layer's weight and both inputs, in float64.
  bl.to(kFloat64);
  Tensor g1 = randn({2, 3}, kFloat64).requires_grad_(), g2 = randn({2, 4}, kFloat64).requires_grad_();
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& in) { return std::vector<Tensor>{F::bilinear(in[0], in[1], in[2], in[3])}; },
      {g1, g2, bl.weight, bl.bias}));
}

TEST(NnLinear, FlattenAndIdentity) {
  Tensor x = randn({2, 3, 4, 5});
  EXPECT_EQ(nn::Flatten().forward(x).sizes().vec(), (std::vector<int64_t>{2, 60}));
  EXPECT_EQ(nn::Flatten(0, 2).forward(x).sizes().vec(), (std::vector<int64_t>{24, 5}));
  EXPECT_EQ(vals(nn::Flatten().forward(x)), vals(x));
  EXPECT_TRUE(nn::Identity().forward(x).is_same(x));
}

// ---------------------------------------------------------------- convolutions

TEST(NnConv, ShapesInitAndForward) {
  manual_seed(3);
  nn::Conv2d c(4, 6, 3, 1, 1, 1, /*groups=*/2);
  EXPECT_EQ(c.weight.sizes().vec(), (std::vector<int64_t>{6, 2, 3, 3}));
  EXPECT_EQ(c.kernel_size, (std::vector<int64_t>{3, 3}));
  EXPECT_LE(max_abs(c.weight), 1 / std::sqrt(18.0) * (1 + 1e-6));  // fan_in = in/groups · k²
  EXPECT_LE(max_abs(c.bias), 1 / std::sqrt(18.0));
  Tensor x = randn({2, 4, 5, 5});
  expect_close(c.forward(x), conv2d(x, c.weight, c.bias, 1, 1, 1, 2));
  // One output element by hand: out[0, 0, 0, 0] with padding 1 sees input rows/cols -1..1 of group 0.
  auto xv = vals(x), wv = vals(c.weight);
  double s = vals(c.bias)[0];
  for (int ci = 0; ci < 2; ++ci)
    for (int kh = 0; kh < 3; ++kh)
      for (int kw = 0; kw < 3; ++kw) {
        int h = kh - 1, w = kw - 1;
        if (h < 0 || w < 0) continue;
        s += xv[(ci * 5 + h) * 5 + w] * wv[(ci * 3 + kh) * 3 + kw];
      }
  EXPECT_NEAR(vals(c.forward(x))[0], s, 1e-5);

  nn::Conv2d big(16, 32, 3);
  expect_uniform_bound(big.weight, 1 / std::sqrt(144.0));
  nn::Conv1d c1(3, 5, 3, 2, 1, 1, 1, false);
  EXPECT_EQ(c1.weight.sizes().vec(), (std::vector<int64_t>{5, 3, 3}));
  EXPECT_EQ(c1.named_parameters().size(), 1u);
  Tensor x1 = randn({2, 3, 7});
  expect_close(c1.forward(x1), conv1d(x1, c1.weight, {}, 2, 1));
  EXPECT_EQ(c1.forward(x1).sizes().vec(), (std::vector<int64_t>{2, 5, 4}));

  // Transposed: weight [in, out/groups, k, k]; fan_in (for the bias bound) is out/groups · k² as torch.
  nn::ConvTranspose2d ct(4, 6, 3, 2, 1, 1, /*groups=*/2);
  EXPECT_EQ(ct.weight.sizes().vec(), (std::vector<int64_t>{4, 3, 3, 3}));
  EXPECT_LE(max_abs(ct.weight), 1 / std::sqrt(27.0) * (1 + 1e-6));
  EXPECT_LE(max_abs(ct.bias), 1 / std::sqrt(27.0));
  nn::ConvTranspose2d ctbig(8, 64, 3);
  expect_uniform_bound(ctbig.bias, 1 / std::sqrt(576.0));
  Tensor xt = randn({1, 4, 3, 3});
  Tensor yt = ct.forward(xt);
  EXPECT_EQ(yt.sizes().vec(), (std::vector<int64_t>{1, 6, 6, 6}));  // (3-1)·2 - 2 + 3 + 1
  expect_close(yt, conv_transpose2d(xt, ct.weight, ct.bias, 2, 1, 1, 2));
  EXPECT_EQ(ct.repr(),
            "ConvTranspose2d(4, 6, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), "
            "output_padding=(1, 1), groups=2)");
}

TEST(NnConv, BadArguments) {
  expect_error([] { nn::Conv2d(3, 6, 3, 1, 0, 1, 2); }, {"Conv2d", "in_channels (3) must be divisible by groups (2)"});
  expect_error([] { nn::Conv2d(4, 6, {3, 3, 3}); }, {"Conv2d", "kernel_size"});
  expect_error([] { nn::Conv1d(4, 6, 0); }, {"Conv1d", "kernel_size must be positive"});
  expect_error([] { nn::ConvTranspose2d(4, 6, 3, 1, 0, 1); }, {"output padding must be smaller"});
  nn::Conv2d c(3, 4, 3);
  expect_error([&] { c.forward(randn({1, 2, 5, 5})); }, {"expected input[1, 2, 5, 5] to have 3 channels"});
}

// ---------------------------------------------------------------- normalisation

// Per-channel statistics of x [N, C, L] in double: mean, biased and unbiased variance.
struct ChannelStats {
  std::vector<double> mean, var, uvar;
};
ChannelStats channel_stats(const Tensor& x) {
  int64_t N = x.sizes()[0], C = x.sizes()[1], L = x.dim() == 3 ? x.sizes()[2] : 1;
  auto v = vals(x);
  ChannelStats s{std::vector<double>(C), std::vector<double>(C), std::vector<double>(C)};
  double n = static_cast<double>(N * L);
  for (int64_t c = 0; c < C; ++c) {
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < N; ++i)
      for (int64_t l = 0; l < L; ++l) sum += v[(i * C + c) * L + l];
    s.mean[c] = sum / n;
    for (int64_t i = 0; i < N; ++i)
      for (int64_t l = 0; l < L; ++l) sq += std::pow(v[(i * C + c) * L + l] - s.mean[c], 2);
    s.var[c] = sq / n;
    s.uvar[c] = sq / (n - 1);
  }
  return s;
}

Tensor normalize_by_hand(const Tensor& x, const std::vector<double>& mean, const std::vector<double>& var,
                         const std::vector<double>& w, const std::vector<double>& b, double eps) {
  int64_t N = x.sizes()[0], C = x.sizes()[1], L = x.dim() == 3 ? x.sizes()[2] : 1;
  auto v = vals(x);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t l = 0; l < L; ++l) {
        double& e = v[(i * C + c) * L + l];
        e = (e - mean[c]) / std::sqrt(var[c] + eps) * w[c] + b[c];
      }
  return tensor<double>(v, x.sizes().vec());
}

TEST(NnNorm, BatchNormRunningStatsOverTwoStepsAndEval) {
  manual_seed(4);
  nn::BatchNorm1d bn(3);
  EXPECT_EQ(bn.state_dict().keys(),
            (std::vector<std::string>{"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}));
  EXPECT_EQ(vals(bn.weight), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(vals(bn.bias), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(bn.num_batches_tracked.dim(), 0);
  EXPECT_EQ(bn.num_batches_tracked.dtype(), kInt64);
  {
    NoGradGuard ng;
    bn.weight.copy_(tensor<double>({1.5, -0.5, 2.0}));
    bn.bias.copy_(tensor<double>({0.1, 0.2, 0.3}));
  }
  std::vector<double> w{1.5, -0.5, 2.0}, b{0.1, 0.2, 0.3};
  Tensor x1 = randn({4, 3, 5}), x2 = randn({4, 3, 5}) * 2.0 + 1.0;
  std::vector<double> rm(3, 0.0), rv(3, 1.0);
  for (const Tensor& x : {x1, x2}) {
    ChannelStats s = channel_stats(x);
    expect_close(bn.forward(x), normalize_by_hand(x, s.mean, s.var, w, b, 1e-5), 1e-4);
    for (int c = 0; c < 3; ++c) {
      rm[c] = 0.9 * rm[c] + 0.1 * s.mean[c];
      rv[c] = 0.9 * rv[c] + 0.1 * s.uvar[c];
    }
    expect_close(bn.running_mean, tensor<double>(rm), 1e-5);
    expect_close(bn.running_var, tensor<double>(rv), 1e-5);
  }
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 2);
  bn.eval();
  Tensor x3 = randn({2, 3, 5});
  expect_close(bn.forward(x3), normalize_by_hand(x3, rm, rv, w, b, 1e-5), 1e-4);
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 2);  // eval leaves the buffers alone
  expect_close(bn.running_mean, tensor<double>(rm), 1e-5);
  // Gradients reach weight and bias in training mode.
  bn.train();
  (bn.forward(x1) * x1).sum().backward();
  EXPECT_TRUE(bn.weight.grad().defined() && bn.bias.grad().defined());
  // reset_running_stats restores the initial buffers.
  bn.reset_running_stats();
  EXPECT_EQ(vals(bn.running_var), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 0);
}

TEST(NnNorm, BatchNormCumulativeAverageWithoutMomentum) {
  manual_seed(5);
  nn::BatchNorm1d bn(2, 1e-5, std::nullopt);
  Tensor x1 = randn({6, 2}), x2 = randn({6, 2}) + 3.0, x3 = randn({6, 2}) - 1.0;
  std::vector<ChannelStats> s{channel_stats(x1), channel_stats(x2), channel_stats(x3)};
  bn.forward(x1);
  bn.forward(x2);
  bn.forward(x3);
  // factor 1/k at step k: the plain average of the batch statistics.
  for (int c = 0; c < 2; ++c) {
    EXPECT_NEAR(vals(bn.running_mean)[c], (s[0].mean[c] + s[1].mean[c] + s[2].mean[c]) / 3, 1e-5);
    EXPECT_NEAR(vals(bn.running_var)[c], (s[0].uvar[c] + s[1].uvar[c] + s[2].uvar[c]) / 3, 1e-5);
  }
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 3);
}

TEST(NnNorm, BatchNormWithoutRunningStatsOrAffine) {
  manual_seed(6);
  nn::BatchNorm2d bn(3, 1e-5, 0.1, /*affine=*/false, /*track_running_stats=*/false);
  EXPECT_TRUE(bn.state_dict().empty());
  EXPECT_TRUE(bn.named_buffers().empty());
  EXPECT_FALSE(bn.running_mean.defined());
  Tensor x = randn({2, 3, 4, 4});
  Tensor want = F::batch_norm(x, {}, {}, {}, {}, /*training=*/true);
  expect_close(bn.forward(x), want);
  bn.eval();  // still batch statistics: there are none to use instead
  expect_close(bn.forward(x), want);
  // The batch statistics, by hand: each channel has mean 0 and variance 1 afterwards.
  Tensor y = bn.forward(x).transpose(0, 1).reshape({3, -1});
  for (double m : vals(y.mean({1}))) EXPECT_NEAR(m, 0.0, 1e-5);
  for (double v : vals(y.var({1}, 0))) EXPECT_NEAR(v, 1.0, 1e-3);
}

TEST(NnNorm, BatchNormChecksInputRank) {
  nn::BatchNorm2d bn2(3);
  expect_error([&] { bn2.forward(randn({2, 3, 4})); }, {"BatchNorm2d", "expected 4D input (got 3D input"});
  nn::BatchNorm1d bn1(3);
  expect_error([&] { bn1.forward(randn({2, 3, 4, 4})); }, {"BatchNorm1d", "expected 2D or 3D input (got 4D input"});
  expect_error([&] { bn1.forward(randn({2, 5})); }, {"BatchNorm1d", "expected input with 3 channels"});
  expect_error([&] { bn1.forward(randn({1, 3})); }, {"more than 1 value per channel"});
}

TEST(NnNorm, LayerGroupAndRmsNorm) {
  manual_seed(7);
  nn::LayerNorm ln({4}, 1e-5);
  {
    NoGradGuard ng;
    ln.weight.copy_(tensor<double>({1, 2, 3, 4}));
    ln.bias.copy_(tensor<double>({0, 1, 0, -1}));
  }
  Tensor x = randn({3, 4});
  auto xv = vals(x);
  std::vector<double> want;
  for (int r = 0; r < 3; ++r) {
    double m = 0, v = 0;
    for (int i = 0; i < 4; ++i) m += xv[r * 4 + i] / 4;
    for (int i = 0; i < 4; ++i) v += std::pow(xv[r * 4 + i] - m, 2) / 4;
    for (int i = 0; i < 4; ++i)
      want.push_back((xv[r * 4 + i] - m) / std::sqrt(v + 1e-5) * (i + 1) + (i == 1) - (i == 3));
  }
  expect_close(ln.forward(x), tensor<double>(want, {3, 4}), 1e-4);
  EXPECT_EQ(names_of(nn::LayerNorm({2, 3}).named_parameters()),
            (std::vector<std::string>{"weight[2, 3]", "bias[2, 3]"}));
  EXPECT_EQ(nn::LayerNorm({4}, 1e-5, true, /*bias=*/false).named_parameters().size(), 1u);
  EXPECT_TRUE(nn::LayerNorm({4}, 1e-5, false).named_parameters().empty());
  expect_error([&] { ln.forward(randn({3, 5})); }, {"layer_norm", "normalized_shape"});

  nn::GroupNorm gn(2, 4);
  EXPECT_EQ(names_of(gn.named_parameters()), (std::vector<std::string>{"weight[4]", "bias[4]"}));
  Tensor xg = randn({2, 4, 3});
  expect_close(gn.forward(xg), F::group_norm(xg, 2, gn.weight, gn.bias));
  // Group statistics by hand: group 0 of sample 0 is channels 0-1 (6 values).
  auto gv = vals(xg), gy = vals(gn.forward(xg));
  double m = 0, v = 0;
  for (int i = 0; i < 6; ++i) m += gv[i] / 6;
  for (int i = 0; i < 6; ++i) v += std::pow(gv[i] - m, 2) / 6;
  EXPECT_NEAR(gy[0], (gv[0] - m) / std::sqrt(v + 1e-5), 1e-4);
  expect_error([] { nn::GroupNorm(3, 4); }, {"GroupNorm", "divisible by num_groups"});
  expect_error([&] { gn.forward(randn({2, 6, 3})); }, {"GroupNorm", "[N, 4, *]"});

  nn::RMSNorm rn({4}, 1e-6);
  EXPECT_EQ(names_of(rn.named_parameters()), (std::vector<std::string>{"weight[4]"}));
  Tensor yr = rn.forward(x);
  for (int r = 0; r < 3; ++r) {
    double ms = 0;
    for (int i = 0; i < 4; ++i) ms += xv[r * 4 + i] * xv[r * 4 + i] / 4;
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(vals(yr)[r * 4 + i], xv[r * 4 + i] / std::sqrt(ms + 1e-6), 1e-5);
  }
  expect_close(nn::RMSNorm({4}).forward(x), F::rms_norm(x, {4}));
}

// ---------------------------------------------------------------- embeddings

TEST(NnEmbedding, LookupInitAndPaddingGradient) {
  manual_seed(8);
  nn::Embedding big(512, 64);
  EXPECT_NEAR(big.weight.mean().item<double>(), 0.0, 0.02);  // N(0, 1)
  EXPECT_NEAR(big.weight.std().item<double>(), 1.0, 0.02);

  nn::Embedding emb(6, 3, /*padding_idx=*/-2);
  EXPECT_EQ(emb.padding_idx, 4);  // normalised as torch
  EXPECT_EQ(vals(emb.weight.select(0, 4)), (std::vector<double>{0, 0, 0}));
  EXPECT_GT(max_abs(emb.weight.select(0, 3)), 0.0);
  Tensor idx = tensor<int64_t>({0, 4, 2, 4, 5, 0}, {2, 3});
  Tensor y = emb.forward(idx);
  ASSERT_EQ(y.sizes().vec(), (std::vector<int64_t>{2, 3, 3}));
  auto w = vals(emb.weight), yv = vals(y), iv = vals(idx);
  for (int i = 0; i < 6; ++i)
    for (int d = 0; d < 3; ++d) EXPECT_EQ(yv[i * 3 + d], w[static_cast<int>(iv[i]) * 3 + d]);
  (y * y + y).sum().backward();
  auto g = vals(emb.weight.grad());
  for (int d = 0; d < 3; ++d) {
    EXPECT_EQ(g[4 * 3 + d], 0.0);                           // padding row: no gradient
    EXPECT_NEAR(g[0 * 3 + d], 2 * (2 * w[d] + 1), 1e-5);    // row 0 used twice
    EXPECT_NEAR(g[2 * 3 + d], 2 * w[2 * 3 + d] + 1, 1e-5);  // row 2 once
    EXPECT_EQ(g[1 * 3 + d], 0.0);                           // row 1 unused
  }
  expect_error([] { nn::Embedding(5, 2, 5); }, {"Embedding", "padding_idx must be within num_embeddings (5)"});
  expect_error([] { nn::Embedding(5, 2, -6); }, {"padding_idx"});
  // F.embedding: input first, padding only masks the gradient (the forward reads the row as is).
  Tensor table = randn({4, 2}).requires_grad_();
  Tensor fy = F::embedding(tensor<int64_t>({3, 1}), table, -1);
  EXPECT_EQ(vals(fy), (std::vector<double>{vals(table)[6], vals(table)[7], vals(table)[2], vals(table)[3]}));
  fy.sum().backward();
  EXPECT_EQ(vals(table.grad()), (std::vector<double>{0, 0, 1, 1, 0, 0, 0, 0}));

  Tensor pre = randn({3, 2});
  auto frozen = nn::Embedding::from_pretrained(pre);
  EXPECT_FALSE(frozen->weight.requires_grad());
  EXPECT_EQ(vals(frozen->forward(tensor<int64_t>({2}))), (std::vector<double>{vals(pre)[4], vals(pre)[5]}));
  EXPECT_TRUE(nn::Embedding::from_pretrained(pre, /*freeze=*/false)->weight.requires_grad());
}

TEST(NnEmbedding, EmbeddingBagModes) {
  manual_seed(9);
  Tensor input = tensor<int64_t>({1, 2, 4, 5, 4, 3, 2, 0});
  Tensor offsets = tensor<int64_t>({0, 3, 3, 5});  // bags {1,2,4}, {}, {5,4}, {3,2,0}
  std::vector<std::vector<int>> bags{{1, 2, 4}, {}, {5, 4}, {3, 2, 0}};
  for (std::string mode : {"sum", "mean", "max"}) {
    nn::EmbeddingBag eb(6, 3, mode);
    auto w = vals(eb.weight);
    Tensor y = eb.forward(input, offsets);
    ASSERT_EQ(y.sizes().vec(), (std::vector<int64_t>{4, 3}));
    auto yv = vals(y);
    for (size_t bi = 0; bi < bags.size(); ++bi)
      for (int d = 0; d < 3; ++d) {
        double acc = mode == "max" ? -1e300 : 0.0;
        for (int r : bags[bi]) acc = mode == "max" ? std::max(acc, w[r * 3 + d]) : acc + w[r * 3 + d];
        if (bags[bi].empty()) acc = 0;
        if (mode == "mean" && !bags[bi].empty()) acc /= static_cast<double>(bags[bi].size());
        EXPECT_NEAR(yv[bi * 3 + d], acc, 1e-5) << mode << " bag " << bi;
      }
  }
  // 2-D input: fixed-size bags; per_sample_weights scale rows (sum mode); padding entries drop out.
  nn::EmbeddingBag eb(6, 2, "sum", false, /*padding_idx=*/0);
  EXPECT_EQ(vals(eb.weight.select(0, 0)), (std::vector<double>{0, 0}));
  Tensor in2 = tensor<int64_t>({1, 0, 3, 2, 2, 5}, {2, 3});
  Tensor psw = tensor<float>({1, 10, 2, 0.5, 1, -1}, {2, 3});
  auto w = vals(eb.weight);
  Tensor y = eb.forward(in2, {}, psw);
  std::vector<double> want{w[2] + 2 * w[6], w[3] + 2 * w[7], 0.5 * w[4] + w[4] - w[10], 0.5 * w[5] + w[5] - w[11]};
  expect_close(y, tensor<double>(want, {2, 2}));
  y.sum().backward();
  EXPECT_EQ(vals(eb.weight.grad().select(0, 0)), (std::vector<double>{0, 0}));
  // include_last_offset: the final offset closes the last bag.
  nn::EmbeddingBag last(6, 2, "sum", /*include_last_offset=*/true);
  Tensor yl = last.forward(tensor<int64_t>({1, 2, 3}), tensor<int64_t>({0, 2, 3}));
  expect_close(yl, F::embedding_bag(tensor<int64_t>({1, 2, 3}), last.weight, tensor<int64_t>({0, 2}), "sum"));
  expect_error([] { nn::EmbeddingBag(4, 2, "median"); }, {"EmbeddingBag", "mode"});
  expect_error([&] { eb.forward(tensor<int64_t>({1, 2})); }, {"offsets"});
}

// ---------------------------------------------------------------- pooling, activations, dropout

TEST(NnPooling, MatchOpsAndHandValues) {
  Tensor x = arange(0, 32, 1, kFloat32).reshape({1, 2, 4, 4});
  nn::MaxPool2d mp(2);
  EXPECT_EQ(mp.stride, (std::vector<int64_t>{2}));
  EXPECT_EQ(vals(mp.forward(x)), (std::vector<double>{5, 7, 13, 15, 21, 23, 29, 31}));
  nn::MaxPool2d mp3({3, 3}, {2, 2}, 1, 1, /*ceil_mode=*/true);
  expect_close(mp3.forward(x), max_pool2d(x, {3, 3}, {2, 2}, 1, 1, true));
  nn::AvgPool2d ap(2);
  EXPECT_EQ(vals(ap.forward(x)), (std::vector<double>{2.5, 4.5, 10.5, 12.5, 18.5, 20.5, 26.5, 28.5}));
  nn::AvgPool2d ap3(3, 1, 1, false, /*count_include_pad=*/false);
  expect_close(ap3.forward(x), avg_pool2d(x, 3, 1, 1, false, false));
  EXPECT_NEAR(vals(ap3.forward(x))[0], (0 + 1 + 4 + 5) / 4.0, 1e-6);
  nn::AdaptiveAvgPool2d aap(1);
  EXPECT_EQ(vals(aap.forward(x)), (std::vector<double>{7.5, 23.5}));
  EXPECT_EQ(nn::AdaptiveAvgPool2d({2, 1}).forward(x).sizes().vec(), (std::vector<int64_t>{1, 2, 2, 1}));
  expect_error([] { nn::MaxPool2d({2, 2, 2}); }, {"MaxPool2d", "kernel_size"});
  expect_error([] { nn::AvgPool2d(0); }, {"AvgPool2d", "kernel_size must be >= 1"});
}

TEST(NnActivation, MatchFunctionalOps) {
  Tensor x = randn({3, 5});
  expect_close(nn::ReLU().forward(x), relu(x));
  expect_close(nn::GELU().forward(x), gelu(x));
  Tensor big = x * 5.0;
  auto bv = vals(big), r6 = vals(nn::ReLU6().forward(big));
  for (size_t i = 0; i < bv.size(); ++i) EXPECT_NEAR(r6[i], std::min(std::max(bv[i], 0.0), 6.0), 1e-6);
  EXPECT_EQ(nn::ReLU6(true).repr(), "ReLU6(inplace=True)");
  expect_close(nn::GELU("tanh").forward(x), gelu(x, "tanh"));
  expect_close(nn::SiLU().forward(x), x * sigmoid(x));
  expect_close(nn::Tanh().forward(x), tanh(x));
  expect_close(nn::Sigmoid().forward(x), sigmoid(x));
  expect_close(nn::Softmax(0).forward(x), softmax(x, 0));
  Tensor s = nn::Softmax(-1).forward(x).sum({1});
  for (double v : vals(s)) EXPECT_NEAR(v, 1.0, 1e-6);
  // inplace=True writes into the input.
  Tensor y = x.clone();
  Tensor r = nn::ReLU(true).forward(y);
  EXPECT_TRUE(r.is_same(y));
  EXPECT_GE(y.min().item<double>(), 0.0);
  expect_error([] { nn::GELU("fast"); }, {"GELU", "approximate"});
}

TEST(NnActivation, DropoutOnlyInTraining) {
  manual_seed(10);
  nn::Dropout d(0.25);
  Tensor x = ones({100, 100});
  Tensor y = d.forward(x);
  auto v = vals(y);
  int64_t zeros = 0;
  for (double e : v) {
    if (e == 0)
      ++zeros;
    else
      EXPECT_NEAR(e, 1 / 0.75, 1e-6);
  }
  EXPECT_NEAR(zeros / 10000.0, 0.25, 0.02);
  d.eval();
  EXPECT_TRUE(d.forward(x).is_same(x));
  expect_error([] { nn::Dropout(1.5); }, {"Dropout", "between 0 and 1"});
  nn::Dropout inplace(0.5, true);
  Tensor z = ones({64});
  Tensor out = inplace.forward(z);
  EXPECT_TRUE(out.is_same(z));
  EXPECT_EQ(vals(z), vals(out));
  EXPECT_LT(z.sum().item<double>(), 64.0 * 2 - 1);  // some were dropped...
  EXPECT_GT(max_abs(z), 1.5);                       // ...and the rest scaled by 2
  // In place on a non-leaf: the gradient is the mask scaled by 1/(1-p).
  Tensor a = randn({32}).requires_grad_();
  Tensor h = a * 1.0;
  Tensor hd = inplace.forward(h);
  hd.sum().backward();
  auto hv = vals(hd), av = vals(a), ag = vals(a.grad());
  for (size_t i = 0; i < hv.size(); ++i) EXPECT_NEAR(ag[i], hv[i] == 0 ? 0.0 : 2.0, 1e-6) << av[i];
}

// ---------------------------------------------------------------- attention

// A per-(batch, head) reference for multi-head attention in float64, written with explicit
// matmul/softmax; masks: bool (true = masked) or float (added); extra key/value rows appended
// after projection (bias_k/bias_v) and optional zero rows per head (add_zero_attn).
struct MhaParams {
  Tensor wq, wk, wv, bq, bk, bv, wo, bo, bias_k, bias_v;
  bool zero_attn = false;
};

MhaParams params_of(const nn::MultiheadAttention& m) {
  MhaParams p;
  int64_t E = m.embed_dim;
  if (m.in_proj_weight.defined()) {
    p.wq = m.in_proj_weight.narrow(0, 0, E), p.wk = m.in_proj_weight.narrow(0, E, E);
    p.wv = m.in_proj_weight.narrow(0, 2 * E, E);
  } else {
    p.wq = m.q_proj_weight, p.wk = m.k_proj_weight, p.wv = m.v_proj_weight;
  }
  if (m.in_proj_bias.defined())
    p.bq = m.in_proj_bias.narrow(0, 0, E), p.bk = m.in_proj_bias.narrow(0, E, E),
    p.bv = m.in_proj_bias.narrow(0, 2 * E, E);
  p.wo = m.out_proj->weight, p.bo = m.out_proj->bias;
  p.bias_k = m.bias_k, p.bias_v = m.bias_v;
  p.zero_attn = m.add_zero_attn;
  return p;
}

Tensor masked_scores(Tensor scores, const Tensor& mask) {
  if (!mask.defined()) return scores;
  if (mask.dtype() == kBool) return where(mask, Scalar(-std::numeric_limits<double>::infinity()), scores);
  return scores + mask.to(kFloat64);
}

// q [L, N, E], k [S, N, kdim], v [S, N, vdim] (sequence first); attn_mask [L, S] or [N*H, L, S];
// kpm [N, S]. Returns (output [L, N, E], weights [N, H, L, S']).
std::pair<Tensor, Tensor> mha_reference(const MhaParams& p, int64_t H, const Tensor& q, const Tensor& k,
                                        const Tensor& v, const Tensor& attn_mask = {}, const Tensor& kpm = {}) {
  int64_t N = q.sizes()[1], E = p.wq.sizes()[0], hd = E / H;
  auto proj = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    Tensor y = matmul(x.to(kFloat64), w.to(kFloat64).t());
    return b.defined() ? y + b.to(kFloat64) : y;
  };
  std::vector<Tensor> outs, weights;
  for (int64_t n = 0; n < N; ++n) {
    Tensor Q = proj(q.select(1, n), p.wq, p.bq), K = proj(k.select(1, n), p.wk, p.bk),
           V = proj(v.select(1, n), p.wv, p.bv);
    if (p.bias_k.defined()) {
      K = cat({K, p.bias_k.reshape({1, E}).to(kFloat64)}, 0);
      V = cat({V, p.bias_v.reshape({1, E}).to(kFloat64)}, 0);
    }
    std::vector<Tensor> heads, hw;
    for (int64_t h = 0; h < H; ++h) {
      Tensor Qh = Q.narrow(1, h * hd, hd), Kh = K.narrow(1, h * hd, hd), Vh = V.narrow(1, h * hd, hd);
      if (p.zero_attn) {
        Kh = cat({Kh, zeros({1, hd}, kFloat64)}, 0);
        Vh = cat({Vh, zeros({1, hd}, kFloat64)}, 0);
      }
      int64_t S = Kh.sizes()[0];
      Tensor scores = matmul(Qh, Kh.t()) / std::sqrt(static_cast<double>(hd));
      // Masks cover the original keys; appended keys stay visible (torch pads with 0).
      auto widen = [&](Tensor m) {
        if (!m.defined() || m.sizes().back() == S) return m;
        return pad(m.dtype() == kBool ? m.to(kFloat64) : m, {0, S - m.sizes().back()}).to(m.dtype());
      };
      if (attn_mask.defined())
        scores = masked_scores(scores, widen(attn_mask.dim() == 3 ? attn_mask.select(0, n * H + h) : attn_mask));
      if (kpm.defined()) scores = masked_scores(scores, widen(kpm.select(0, n)).unsqueeze(0));
      Tensor P = softmax(scores, -1);
      heads.push_back(matmul(P, Vh));
      hw.push_back(P);
    }
    Tensor o = matmul(cat(heads, 1), p.wo.to(kFloat64).t());
    if (p.bo.defined()) o = o + p.bo.to(kFloat64);
    outs.push_back(o);
    weights.push_back(stack(hw, 0));
  }
  return {stack(outs, 1), stack(weights, 0)};
}

TEST(NnAttention, MultiheadAttentionParametersAndInit) {
  manual_seed(20);
  nn::MultiheadAttention mha(16, 4);
  EXPECT_EQ(names_of(mha.named_parameters()),
            (std::vector<std::string>{"in_proj_weight[48, 16]", "in_proj_bias[48]", "out_proj.weight[16, 16]",
                                      "out_proj.bias[16]"}));
  EXPECT_EQ(mha.state_dict().keys(),
            (std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"}));
  expect_uniform_bound(mha.in_proj_weight, std::sqrt(6.0 / (16 + 48)));  // xavier_uniform
  EXPECT_EQ(max_abs(mha.in_proj_bias), 0.0);
  EXPECT_EQ(max_abs(mha.out_proj->bias), 0.0);
  EXPECT_LE(max_abs(mha.out_proj->weight), 0.25);  // Linear's own init
  EXPECT_EQ(mha.head_dim, 4);

  nn::MultiheadAttention kv(8, 2, 0.0, /*bias=*/true, /*add_bias_kv=*/true, false, /*kdim=*/5, /*vdim=*/3);
  EXPECT_EQ(
      names_of(kv.named_parameters()),
      (std::vector<std::string>{"q_proj_weight[8, 8]", "k_proj_weight[8, 5]", "v_proj_weight[8, 3]", "in_proj_bias[24]",
                                "bias_k[1, 1, 8]", "bias_v[1, 1, 8]", "out_proj.weight[8, 8]", "out_proj.bias[8]"}));
  EXPECT_FALSE(kv.in_proj_weight.defined());
  nn::MultiheadAttention nobias(8, 2, 0.0, false);
  EXPECT_EQ(names_of(nobias.named_parameters()),
            (std::vector<std::string>{"in_proj_weight[24, 8]", "out_proj.weight[8, 8]"}));
  expect_error([] { nn::MultiheadAttention(10, 3); }, {"MultiheadAttention", "divisible by num_heads"});
}

TEST(NnAttention, MultiheadAttentionMatchesReference) {
  manual_seed(21);
  nn::MultiheadAttention mha(8, 2);
  mha.to(kFloat64);
  {
    NoGradGuard ng;  // non-zero biases so that their placement is checked too
    mha.in_proj_bias.copy_(randn({24}, kFloat64) * 0.5);
    mha.out_proj->bias.copy_(randn({8}, kFloat64) * 0.5);
  }
  MhaParams p = params_of(mha);
  int64_t L = 3, S = 4, N = 2;
  Tensor x = randn({L, N, 8}, kFloat64), mem = randn({S, N, 8}, kFloat64), val = randn({S, N, 8}, kFloat64);

  // Self-attention, no masks: weights averaged over heads, and the SDPA path without weights.
  auto [ref_self, ref_self_w] = mha_reference(p, 2, x, x, x);
  auto [out, w] = mha.forward(x, x, x);
  expect_close(out, ref_self, 1e-9);
  expect_close(w, ref_self_w.mean({1}), 1e-9);
  auto [out_nw, w_nw] = mha.forward(x, x, x, {}, /*need_weights=*/false);
  expect_close(out_nw, ref_self, 1e-9);
  EXPECT_FALSE(w_nw.defined());
  auto [out_h, w_h] = mha.forward(x, x, x, {}, true, {}, /*average_attn_weights=*/false);
  expect_close(w_h, ref_self_w, 1e-9);

  // Cross-attention with a bool attn_mask and a bool key_padding_mask, on both paths.
  Tensor am = tensor<bool>({false, true, false, false, false, false, true, true, true, false, false, true}, {L, S});
  Tensor kpm = tensor<bool>({false, false, false, false, false, true, false, false}, {N, S});
  auto [ref_m, ref_mw] = mha_reference(p, 2, x, mem, val, am, kpm);
  for (bool need : {true, false}) {
    auto [o, ww] = mha.forward(x, mem, val, kpm, need, am);
    expect_close(o, ref_m, 1e-9);
    if (need) expect_close(ww, ref_mw.mean({1}), 1e-9);
  }
  // Float masks are added; a 3-D mask gives each (batch, head) its own.
  Tensor fm = randn({L, S}, kFloat64), fkpm = randn({N, S}, kFloat64);
  auto [ref_f, ref_fw] = mha_reference(p, 2, x, mem, val, fm, fkpm);
  for (bool need : {true, false}) expect_close(std::get<0>(mha.forward(x, mem, val, fkpm, need, fm)), ref_f, 1e-9);
  Tensor m3 = randn({N * 2, L, S}, kFloat64);
  auto [ref_3, ref_3w] = mha_reference(p, 2, x, mem, val, m3);
  for (bool need : {true, false}) expect_close(std::get<0>(mha.forward(x, mem, val, {}, need, m3)), ref_3, 1e-9);

  // is_causal alone equals the explicit upper-triangular bool mask.
  Tensor causal = triu(ones({L, L}, kBool), 1);
  auto [ref_c, ref_cw] = mha_reference(p, 2, x, x, x, causal);
  for (bool need : {true, false}) {
    auto [o, ww] = mha.forward(x, x, x, {}, need, {}, true, /*is_causal=*/true);
    expect_close(o, ref_c, 1e-9);
    if (need) expect_close(ww, ref_cw.mean({1}), 1e-9);
  }
  EXPECT_EQ(vals(std::get<1>(mha.forward(x, x, x, {}, true, {}, true, true)))[1], 0.0);  // w[0, 0, 1] is masked

  // Unbatched [L, E] input: the N = 1 case without the batch dim.
  Tensor x0 = x.select(1, 0);
  auto [ref_u, ref_uw] = mha_reference(p, 2, x0.unsqueeze(1), x0.unsqueeze(1), x0.unsqueeze(1));
  auto [ou, wu] = mha.forward(x0, x0, x0);
  expect_close(ou, ref_u.squeeze(1), 1e-9);
  expect_close(wu, ref_uw.mean({1}).squeeze(0), 1e-9);
}

TEST(NnAttention, MultiheadAttentionBatchFirstAndVariants) {
  manual_seed(22);
  nn::MultiheadAttention seq(8, 2), bf(8, 2, 0.0, true, false, false, std::nullopt, std::nullopt, /*batch_first=*/true);
  bf.load_state_dict(seq.state_dict());
  Tensor x = randn({2, 3, 8});  // [N, L, E]
  Tensor kpm = tensor<bool>({false, false, true, false, false, false}, {2, 3});
  for (bool need : {true, false}) {
    auto [ob, wb] = bf.forward(x, x, x, kpm, need);
    auto [os, ws] = seq.forward(x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1), kpm, need);
    ASSERT_EQ(ob.sizes().vec(), (std::vector<int64_t>{2, 3, 8}));
    expect_close(ob, os.transpose(0, 1));
    if (need) expect_close(wb, ws);
  }

  // kdim/vdim (separate projections), bias_k/bias_v and zero attention against the reference.
  nn::MultiheadAttention kv(8, 2, 0.0, true, /*add_bias_kv=*/true, /*add_zero_attn=*/true, 5, 3);
  kv.to(kFloat64);
  MhaParams p = params_of(kv);
  Tensor q = randn({3, 2, 8}, kFloat64), k = randn({4, 2, 5}, kFloat64), v = randn({4, 2, 3}, kFloat64);
  Tensor am = tensor<bool>({false, true, false, false, true, false, false, false, false, false, true, false}, {3, 4});
  auto [ref, ref_w] = mha_reference(p, 2, q, k, v, am);
  for (bool need : {true, false}) {
    auto [o, w] = kv.forward(q, k, v, {}, need, am);
    expect_close(o, ref, 1e-9);
    if (need) expect_close(w, ref_w.mean({1}), 1e-9);  // S + 2 columns: bias_k and the zero key
  }
}

TEST(NnAttention, MultiheadAttentionDropoutAndErrors) {
  manual_seed(23);
  nn::MultiheadAttention mha(8, 2, /*dropout=*/0.5);
  Tensor x = randn({4, 2, 8});
  mha.eval();
  auto [e1, ew1] = mha.forward(x, x, x);
  auto [e2, ew2] = mha.forward(x, x, x, {}, false);
  expect_close(e1, std::get<0>(mha_reference(params_of(mha), 2, x, x, x)).to(kFloat32), 1e-5);
  expect_close(e1, e2, 1e-5);
  mha.train();
  auto [t1, tw1] = mha.forward(x, x, x);
  EXPECT_GT(max_abs(t1 - e1), 1e-3);  // dropout active in training
  // Some attention weights are dropped (zero) and the kept ones scaled by 2.
  auto [t2, tw2] = mha.forward(x, x, x, {}, true, {}, false);
  auto twv = vals(tw2);
  EXPECT_GT(std::count(twv.begin(), twv.end(), 0.0), 0);

  expect_error(
      [&] {
        mha.forward(randn({2, 2, 2, 8}), randn({2, 2, 2, 8}), randn({2, 2, 2, 8}));
      },
      {"query should be unbatched 2-D or batched 3-D"});
  expect_error([&] { mha.forward(x, x, x, {}, true, ones({3, 4}, kBool)); }, {"2-D attn_mask", "[4, 4]"});
  expect_error([&] { mha.forward(x, x, x, ones({2, 5}, kBool)); }, {"key_padding_mask shape of [2, 4]"});
  expect_error([&] { mha.forward(x, x, x, {}, true, ones({4, 4}, kInt64)); }, {"only bool and floating types"});
  expect_error(
      [&] {
        mha.forward(randn({4, 2, 6}), randn({4, 2, 6}), randn({4, 2, 6}));
      },
      {"embedding dimension of 8"});
}

TEST(NnAttention, MultiheadAttentionGradcheck) {
  manual_seed(24);
  nn::MultiheadAttention mha(4, 2);
  mha.to(kFloat64);
  Tensor q = randn({2, 1, 4}, kFloat64).requires_grad_(), kv = randn({3, 1, 4}, kFloat64).requires_grad_();
  Tensor kpm = tensor<bool>({false, false, true}, {1, 3});
  auto fn = [&](const std::vector<Tensor>& in) {
    auto [o1, w1] = F::multi_head_attention_forward(in[0], in[1], in[1], 4, 2, in[2], in[3], {}, {}, false, 0.0, in[4],
                                                    in[5], false, kpm, true);
    auto [o2, w2] = F::multi_head_attention_forward(in[0], in[1], in[1], 4, 2, in[2], in[3], {}, {}, false, 0.0, in[4],
                                                    in[5], false, kpm, false);
    return std::vector<Tensor>{o1, w1, o2};
  };
  EXPECT_TRUE(gradcheck(fn, {q, kv, mha.in_proj_weight, mha.in_proj_bias, mha.out_proj->weight, mha.out_proj->bias}));
}

// The layer composed by hand from the reference attention and the functional ops.
Tensor encoder_reference(nn::TransformerEncoderLayer& layer, const Tensor& x, const Tensor& mask, const Tensor& kpm) {
  auto ln = [](const nn::LayerNorm& n, const Tensor& t) {
    return F::layer_norm(t, n.normalized_shape, n.weight.to(kFloat64), n.bias.to(kFloat64), n.eps);
  };
  auto sa = [&](const Tensor& t) { return mha_reference(params_of(*layer.self_attn), 2, t, t, t, mask, kpm).first; };
  auto ff = [&](const Tensor& t) {
    Tensor h = F::linear(t, layer.linear1->weight.to(kFloat64), layer.linear1->bias.to(kFloat64));
    h = layer.activation == "gelu" ? F::gelu(h) : F::relu(h);
    return F::linear(h, layer.linear2->weight.to(kFloat64), layer.linear2->bias.to(kFloat64));
  };
  Tensor y = x.to(kFloat64);
  if (layer.norm_first) {
    y = y + sa(ln(*layer.norm1, y));
    return y + ff(ln(*layer.norm2, y));
  }
  y = ln(*layer.norm1, y + sa(y));
  return ln(*layer.norm2, y + ff(y));
}

TEST(NnAttention, TransformerEncoderLayerBothNormOrders) {
  manual_seed(25);
  nn::TransformerEncoderLayer probe(8, 2, 16);
  EXPECT_EQ(probe.state_dict().keys(),
            (std::vector<std::string>{"self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
                                      "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight",
                                      "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"}));
  Tensor x = randn({5, 2, 8});
  Tensor mask = triu(ones({5, 5}, kBool), 1);
  Tensor kpm = tensor<bool>({false, false, false, false, true, false, false, false, false, false}, {2, 5});
  for (bool norm_first : {false, true})
    for (std::string act : {"relu", "gelu"}) {
      nn::TransformerEncoderLayer layer(8, 2, 16, 0.1, act, 1e-5, false, norm_first);
      {
        NoGradGuard ng;  // non-trivial norm affine so norm1/norm2 placement matters
        for (auto& [n, t] : layer.named_parameters())
          if (n.rfind("norm", 0) == 0)
            t.copy_(randn(t.sizes().vec()) * 0.5 + (n.find("weight") != std::string::npos ? 1.0 : 0.0));
      }
      layer.eval();  // dropout off
      expect_close(layer.forward(x), encoder_reference(layer, x, {}, {}), 1e-4);
      expect_close(layer.forward(x, mask, kpm), encoder_reference(layer, x, mask, kpm), 1e-4);
      expect_close(layer.forward(x, {}, {}, /*is_causal=*/true), encoder_reference(layer, x, mask, {}), 1e-4);
    }
  // batch_first input [N, L, E].
  nn::TransformerEncoderLayer bf(8, 2, 16, 0.0, "relu", 1e-5, /*batch_first=*/true);
  nn::TransformerEncoderLayer sf(8, 2, 16, 0.0);
  sf.load_state_dict(bf.state_dict());
  expect_close(bf.forward(x.transpose(0, 1)), sf.forward(x).transpose(0, 1), 1e-5);
  // Training mode applies dropout; gradients reach every parameter.
  nn::TransformerEncoderLayer tr(8, 2, 16, 0.5);
  tr.forward(x).sum().backward();
  for (auto& [n, t] : tr.named_parameters()) EXPECT_TRUE(t.grad().defined()) << n;
  expect_error([] { nn::TransformerEncoderLayer(8, 2, 16, 0.1, "tanh"); }, {"activation should be relu/gelu"});
}

// ---------------------------------------------------------------- losses

TEST(NnLoss, ModulesMatchFunctionalOps) {
  manual_seed(30);
  Tensor logits = randn({6, 4}), cls = tensor<int64_t>({0, 3, 1, -100, 2, 3});
  Tensor cw = tensor<float>({1.0, 2.0, 0.5, 1.5});
  for (std::string red : {"mean", "sum", "none"}) {
    expect_close(nn::CrossEntropyLoss({}, -100, red)(logits, cls), cross_entropy(logits, cls, {}, -100, red));
    expect_close(nn::CrossEntropyLoss(cw, -100, red, 0.1)(logits, cls), cross_entropy(logits, cls, cw, -100, red, 0.1));
    Tensor lp = log_softmax(logits, 1);
    expect_close(nn::NLLLoss(cw, -100, red)(lp, cls), nll_loss(lp, cls, cw, -100, red));
    Tensor a = randn({3, 5}), b = randn({3, 5});
    expect_close(nn::MSELoss(red)(a, b), mse_loss(a, b, red));
    expect_close(nn::L1Loss(red)(a, b), l1_loss(a, b, red));
    expect_close(nn::SmoothL1Loss(red, 0.5)(a, b), smooth_l1_loss(a, b, red, 0.5));
    Tensor prob = sigmoid(a), tgt = rand({3, 5}), bw = rand({5}), pw = rand({5}) + 0.5;
    expect_close(nn::BCELoss(bw, red)(prob, tgt), binary_cross_entropy(prob, tgt, bw, red));
    expect_close(nn::BCEWithLogitsLoss(bw, red, pw)(a, tgt), binary_cross_entropy_with_logits(a, tgt, bw, red, pw));
  }
  // Mean cross entropy by hand: −log softmax at the target, averaged over the non-ignored rows.
  auto lv = vals(logits), cv = vals(cls);
  double total = 0;
  int count = 0;
  for (int r = 0; r < 6; ++r) {
    if (cv[r] == -100) continue;
    double mx = -1e300, se = 0;
    for (int c = 0; c < 4; ++c) mx = std::max(mx, lv[r * 4 + c]);
    for (int c = 0; c < 4; ++c) se += std::exp(lv[r * 4 + c] - mx);
    total += -(lv[r * 4 + static_cast<int>(cv[r])] - mx - std::log(se));
    ++count;
  }
  EXPECT_NEAR(nn::CrossEntropyLoss()(logits, cls).item<double>(), total / count, 1e-5);
  // Class weights are buffers ("weight", then "pos_weight"), absent when not given.
  EXPECT_EQ(nn::CrossEntropyLoss(cw).state_dict().keys(), (std::vector<std::string>{"weight"}));
  EXPECT_TRUE(nn::CrossEntropyLoss().state_dict().empty());
  EXPECT_EQ(nn::BCEWithLogitsLoss(cw, "mean", cw).state_dict().keys(),
            (std::vector<std::string>{"weight", "pos_weight"}));
  nn::CrossEntropyLoss weighted(cw);
  weighted.to(kFloat64);
  EXPECT_EQ(weighted.weight.dtype(), kFloat64);
  EXPECT_EQ(cw.dtype(), kFloat32);  // the caller's tensor is not converted
  expect_error([] { nn::MSELoss("avg"); }, {"MSELoss", "'avg' is not a valid value for reduction"});
  expect_error([] { nn::CrossEntropyLoss({}, -100, "mean", 1.5); }, {"label_smoothing"});
  expect_error([&] { nn::MSELoss()(randn({3}), randn({4})); }, {"mse_loss"});
}

}  // namespace
