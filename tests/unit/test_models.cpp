// The model zoo (models/): parameter counts and state_dict keys against torch_zoo.py and
// torchvision (expected lists written out here from their structure), forward passes against
// naive references, and one SGD training step per model.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/nn.h"
#include "models/dlrm.h"
#include "models/gpt.h"
#include "models/mlp.h"
#include "models/mobilenet_v2.h"
#include "models/resnet.h"
#include "models/zoo.h"

using namespace kiln;

namespace {

// One expected state_dict entry: key, shape, and whether it is a parameter (else a buffer).
struct Entry {
  std::string key;
  std::vector<int64_t> shape;
  bool param = true;
};
using Entries = std::vector<Entry>;

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

int64_t param_numel(const Entries& es) {
  int64_t n = 0;
  for (const Entry& e : es)
    if (e.param) n += numel_of(e.shape);
  return n;
}

// The model's state_dict as (key, shape) in order, compared with the expected list.
void expect_state_dict(const nn::Module& m, const Entries& want) {
  StateDict sd = m.state_dict();
  ASSERT_EQ(sd.size(), want.size());
  size_t i = 0;
  for (const auto& [key, t] : sd) {
    EXPECT_EQ(key, want[i].key) << "entry " << i;
    EXPECT_EQ(t.sizes().vec(), want[i].shape) << key;
    ++i;
  }
}

void add_linear(Entries& es, const std::string& p, int64_t in, int64_t out, bool bias = true) {
  es.push_back({p + ".weight", {out, in}});
  if (bias) es.push_back({p + ".bias", {out}});
}

void add_bn(Entries& es, const std::string& p, int64_t c) {
  es.push_back({p + ".weight", {c}});
  es.push_back({p + ".bias", {c}});
  es.push_back({p + ".running_mean", {c}, false});
  es.push_back({p + ".running_var", {c}, false});
  es.push_back({p + ".num_batches_tracked", {}, false});
}

void add_conv(Entries& es, const std::string& p, int64_t in_per_group, int64_t out, int64_t k) {
  es.push_back({p + ".weight", {out, in_per_group, k, k}});
}

// torchvision.models.resnet18(): conv1/bn1, four stages of two BasicBlocks (the first block of
// stages 2-4 halves the resolution and has downsample = 1×1 conv + BN), fc.
Entries torchvision_resnet18() {
  Entries es;
  add_conv(es, "conv1", 3, 64, 7);
  add_bn(es, "bn1", 64);
  for (int s = 1; s <= 4; ++s) {
    const int64_t planes = 64 << (s - 1);
    for (int b = 0; b < 2; ++b) {
      const int64_t in = (b == 0 && s > 1) ? planes / 2 : planes;
      const std::string p = "layer" + std::to_string(s) + "." + std::to_string(b);
      add_conv(es, p + ".conv1", in, planes, 3);
      add_bn(es, p + ".bn1", planes);
      add_conv(es, p + ".conv2", planes, planes, 3);
      add_bn(es, p + ".bn2", planes);
      if (b == 0 && s > 1) {
        add_conv(es, p + ".downsample.0", in, planes, 1);
        add_bn(es, p + ".downsample.1", planes);
      }
    }
  }
  add_linear(es, "fc", 512, 1000);
  return es;
}

// torchvision.models.mobilenet_v2(): features.0 = Conv2dNormActivation(3, 32, stride 2); then
// InvertedResidual per (t, c, n, s) with `conv` = [expand 1×1 (t ≠ 1)], depthwise 3×3, project 1×1,
// BN; features.18 = Conv2dNormActivation(320, 1280, 1); classifier = [Dropout, Linear].
Entries torchvision_mobilenet_v2() {
  Entries es;
  add_conv(es, "features.0.0", 3, 32, 3);
  add_bn(es, "features.0.1", 32);
  const int64_t setting[7][3] = {{1, 16, 1}, {6, 24, 2}, {6, 32, 3}, {6, 64, 4}, {6, 96, 3}, {6, 160, 3}, {6, 320, 1}};
  int64_t in = 32, idx = 1;
  for (const auto& [t, c, n] : setting)
    for (int64_t i = 0; i < n; ++i, ++idx) {
      const std::string p = "features." + std::to_string(idx) + ".conv.";
      const int64_t hidden = in * t;
      int j = 0;
      if (t != 1) {
        add_conv(es, p + "0.0", in, hidden, 1);
        add_bn(es, p + "0.1", hidden);
        j = 1;
      }
      add_conv(es, p + std::to_string(j) + ".0", 1, hidden, 3);  // depthwise: groups = hidden
      add_bn(es, p + std::to_string(j) + ".1", hidden);
      add_conv(es, p + std::to_string(j + 1), hidden, c, 1);
      add_bn(es, p + std::to_string(j + 2), c);
      in = c;
    }
  add_conv(es, "features.18.0", 320, 1280, 1);
  add_bn(es, "features.18.1", 1280);
  add_linear(es, "classifier.1", 1280, 1000);
  return es;
}

// torch_zoo's GPT: wte, wpe, per block ln1, ln2, qkv, proj, fc, out; ln; head (tied, no bias).
Entries torch_zoo_gpt(const models::GPTConfig& c) {
  const int64_t d = c.n_embd;
  Entries es{{"wte.weight", {c.vocab_size, d}}, {"wpe.weight", {c.block_size, d}}};
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string p = "blocks." + std::to_string(i) + ".";
    es.push_back({p + "ln1.weight", {d}});
    es.push_back({p + "ln1.bias", {d}});
    es.push_back({p + "ln2.weight", {d}});
    es.push_back({p + "ln2.bias", {d}});
    add_linear(es, p + "qkv", d, 3 * d);
    add_linear(es, p + "proj", d, d);
    add_linear(es, p + "fc", d, 4 * d);
    add_linear(es, p + "out", 4 * d, d);
  }
  es.push_back({"ln.weight", {d}});
  es.push_back({"ln.bias", {d}});
  es.push_back({"head.weight", {c.vocab_size, d}, /*param=*/false});  // an alias of wte.weight
  return es;
}

bool all_finite(const Tensor& t) { return isfinite(t).all().item<bool>(); }

double max_abs_diff(const Tensor& a, const Tensor& b) {
  return (a.to(kFloat64) - b.to(kFloat64)).abs().max().item<double>();
}

// One SGD step (p -= lr * grad) on `loss_fn`, which is called with the default generators seeded
// alike so dropout draws the same mask twice. Checks that the loss is finite, that every parameter
// gets a finite, non-zero gradient, and that the loss falls. Returns the first loss.
template <class LossFn>
double sgd_step(nn::Module& m, LossFn loss_fn, double lr) {
  manual_seed(77);
  Tensor loss = loss_fn();
  const double before = loss.item<double>();
  EXPECT_TRUE(std::isfinite(before));
  m.zero_grad();
  loss.backward();
  for (auto& [name, p] : m.named_parameters()) {
    const Tensor& g = p.grad();
    EXPECT_TRUE(g.defined()) << name << " got no gradient";
    if (!g.defined()) continue;
    EXPECT_EQ(g.sizes(), p.sizes()) << name;
    const double l1 = g.abs().sum().item<double>();  // inf or nan unless every entry is finite
    EXPECT_TRUE(std::isfinite(l1)) << name;
    EXPECT_GT(l1, 0.0) << name << ": gradient is all zero";
  }
  {
    NoGradGuard no_grad;
    for (Tensor& p : m.parameters())
      if (p.grad().defined()) p.sub_(p.grad(), lr);
  }
  manual_seed(77);
  const double after = Tensor(loss_fn()).item<double>();
  EXPECT_LT(after, before) << "one SGD step with lr " << lr << " did not lower the loss";
  return before;
}

}  // namespace

// ---------------------------------------------------------------- factory and workloads

TEST(Models, NamesAndUnknown) {
  EXPECT_EQ(models::names(), (std::vector<std::string>{"mlp", "gpt_nano", "gpt2", "resnet18", "mobilenet_v2", "dlrm"}));
  try {
    models::create("resnet50");
    FAIL() << "an unknown name must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mobilenet_v2"), std::string::npos) << e.what();  // lists the names
  }
  EXPECT_THROW(models::make_workload("vgg16", kCPU, true), Error);
}

// ---------------------------------------------------------------- mlp

TEST(Models, MlpKeysCountAndStep) {
  // 784·1024 + 1024 + 3·(1024·1024 + 1024) + 1024·10 + 10 = 803,840 + 3,148,800 + 10,250.
  const int64_t want = 3962890;
  models::Workload w = models::make_workload("mlp", kCPU, /*cpu_sizes=*/true);
  Entries es;
  add_linear(es, "net.0", 784, 1024);
  add_linear(es, "net.2", 1024, 1024);
  add_linear(es, "net.4", 1024, 1024);
  add_linear(es, "net.6", 1024, 1024);
  add_linear(es, "net.8", 1024, 10);
  expect_state_dict(*w.module, es);
  EXPECT_EQ(param_numel(es), want);
  EXPECT_EQ(models::num_parameters(*w.module), want);  // torch_zoo: 3.96M
  EXPECT_EQ(w.module->state_dict().keys().front(), "net.0.weight");
  EXPECT_EQ(w.module->state_dict().keys().back(), "net.8.bias");

  ASSERT_EQ(w.inputs.size(), 1u);
  EXPECT_EQ(w.inputs[0].sizes().vec(), (std::vector<int64_t>{64, 784}));
  EXPECT_EQ(w.batch_size, 64);
  // Ten random classes: the initial loss is near ln 10.
  double loss0 = sgd_step(
      *w.module, [&] { return w.step_loss(); }, 0.05);
  EXPECT_NEAR(loss0, std::log(10.0), 0.3);
}

// ---------------------------------------------------------------- gpt

// Unique parameters of torch_zoo's GPT: V·d + ctx·d + L·(12d² + 13d) + 2d (per block: two
// LayerNorms 4d, qkv 3d² + 3d, proj d² + d, fc 4d² + 4d, out 4d² + d); the tied head adds nothing.
int64_t gpt_param_count(const models::GPTConfig& c) {
  const int64_t d = c.n_embd;
  return c.vocab_size * d + c.block_size * d + c.n_layer * (12 * d * d + 13 * d) + 2 * d;
}

TEST(Models, GptCountAndKeys) {
  for (models::GPTConfig c :
       {models::GPTConfig{64, 16, 32, 4, 2}, models::GPTConfig{7, 3, 6, 3, 0}, models::GPTConfig{100, 32, 48, 2, 3}}) {
    models::GPT gpt(c);
    EXPECT_EQ(models::num_parameters(gpt), gpt_param_count(c));
    expect_state_dict(gpt, torch_zoo_gpt(c));
  }
  // BENCHMARKS.md's gpt2: 38,633,472 + 786,432 + 12·7,087,872 + 1,536 = 124,475,904 (124.48M). Built
  // in full by DISABLED_Gpt2FullSize only: drawing its 124M initial values takes seconds.
  const models::GPTConfig g2 = models::gpt2_config();
  EXPECT_EQ(std::vector<int64_t>({g2.vocab_size, g2.block_size, g2.n_embd, g2.n_head, g2.n_layer}),
            std::vector<int64_t>({50304, 1024, 768, 12, 12}));
  EXPECT_EQ(gpt_param_count(g2), 124475904);
}

TEST(Models, GptNanoWorkload) {
  // 19,316,736 + 98,304 + 6·1,774,464 + 768 = 30,062,592 (torch_zoo: 30.06M).
  models::Workload w = models::make_workload("gpt_nano", kCPU, /*cpu_sizes=*/true);
  EXPECT_EQ(models::num_parameters(*w.module), 30062592);
  expect_state_dict(*w.module, torch_zoo_gpt(models::gpt_nano_config()));
  StateDict sd = w.module->state_dict();
  // 2 embeddings + 6 blocks × 12 + final LayerNorm 2 + head = 77 entries (76 parameters).
  EXPECT_EQ(sd.size(), 77u);
  EXPECT_EQ(w.module->named_parameters().size(), 76u);
  EXPECT_EQ(sd.keys().front(), "wte.weight");
  EXPECT_EQ(sd.keys()[2], "blocks.0.ln1.weight");
  EXPECT_EQ(sd.keys()[sd.size() - 4], "blocks.5.out.bias");
  EXPECT_EQ(sd.keys().back(), "head.weight");
  ASSERT_EQ(w.inputs.size(), 1u);
  EXPECT_EQ(w.inputs[0].sizes().vec(), (std::vector<int64_t>{4, 128}));
  EXPECT_EQ(w.inputs[0].dtype(), kInt64);
  EXPECT_LT(w.inputs[0].max().item<int64_t>(), 50304);
}

// Run with --gtest_also_run_disabled_tests (about 5 s on 2 cores, 0.5 GB).
TEST(Models, DISABLED_Gpt2FullSize) {
  models::Workload w = models::make_workload("gpt2", kCPU, /*cpu_sizes=*/true);
  EXPECT_EQ(models::num_parameters(*w.module), 124475904);
  expect_state_dict(*w.module, torch_zoo_gpt(models::gpt2_config()));
  EXPECT_EQ(w.module->state_dict().size(), 149u);
  EXPECT_EQ(w.inputs[0].sizes().vec(), (std::vector<int64_t>{1, 128}));
  Tensor loss = w.step_loss();
  EXPECT_TRUE(std::isfinite(loss.item<double>()));
}

TEST(Models, GptHeadIsTiedToWte) {
  models::GPT gpt({64, 16, 32, 4, 2});
  EXPECT_TRUE(gpt.head->weight.is_same(gpt.wte->weight));
  StateDict sd = gpt.state_dict();
  EXPECT_TRUE(sd.at("head.weight").is_alias_of(sd.at("wte.weight")));
  for (auto& [name, p] : gpt.named_parameters()) EXPECT_NE(name, "head.weight");
  // Loading a state_dict writes both names into the one tensor.
  NoGradGuard no_grad;
  gpt.wte->weight.fill_(0.5);
  EXPECT_EQ(gpt.head->weight.sum().item<double>(), 0.5 * 64 * 32);
}

// The forward pass against the same math written with plain ops in float64: explicit LayerNorm,
// per-head attention with a -inf mask above the diagonal, tanh-GELU written out, head = wteᵀ.
TEST(Models, GptForwardMatchesNaiveReference) {
  manual_seed(3);
  const models::GPTConfig c{13, 8, 8, 2, 2};
  models::GPT gpt(c);
  const int64_t B = 2, T = 5, d = c.n_embd, hd = d / c.n_head;
  Tensor idx = randint(0, c.vocab_size, {B, T});
  Tensor got = gpt.forward(idx);
  ASSERT_EQ(got.sizes().vec(), (std::vector<int64_t>{B, T, c.vocab_size}));

  NoGradGuard no_grad;
  auto P = [&](const std::string& k) { return gpt.state_dict().at(k).to(kFloat64); };
  auto ln = [&](const Tensor& x, const std::string& p) {
    Tensor mu = x.mean({-1}, true), var = ((x - mu) * (x - mu)).mean({-1}, true);
    return (x - mu) / (var + 1e-5).sqrt() * P(p + ".weight") + P(p + ".bias");
  };
  auto lin = [&](const Tensor& x, const std::string& p) { return x.matmul(P(p + ".weight").t()) + P(p + ".bias"); };
  Tensor future = arange(T).unsqueeze(0) > arange(T).unsqueeze(1);  // [i, j]: j > i
  Tensor x = P("wte.weight").index_select(0, idx.flatten()).view({B, T, d}) + P("wpe.weight").narrow(0, 0, T);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "blocks." + std::to_string(l) + ".";
    Tensor qkv = lin(ln(x, p + "ln1"), p + "qkv");
    std::vector<Tensor> heads;
    for (int64_t h = 0; h < c.n_head; ++h) {
      Tensor q = qkv.narrow(2, h * hd, hd), k = qkv.narrow(2, d + h * hd, hd), v = qkv.narrow(2, 2 * d + h * hd, hd);
      Tensor att = q.matmul(k.transpose(1, 2)) / std::sqrt(static_cast<double>(hd));
      heads.push_back(att.masked_fill(future, -INFINITY).softmax(-1).matmul(v));
    }
    x = x + lin(cat(heads, 2), p + "proj");
    Tensor f = lin(ln(x, p + "ln2"), p + "fc");
    Tensor g = 0.5 * f * (1.0 + (std::sqrt(2.0 / std::numbers::pi) * (f + 0.044715 * f * f * f)).tanh());
    x = x + lin(g, p + "out");
  }
  Tensor want = ln(x, "ln").matmul(P("wte.weight").t());
  EXPECT_LT(max_abs_diff(got, want), 1e-4);

  // Causal: changing the last token leaves the logits of the earlier positions unchanged.
  Tensor idx2 = idx.clone();
  idx2.select(1, T - 1).copy_(remainder(idx.select(1, T - 1) + 1, c.vocab_size));
  Tensor got2 = gpt.forward(idx2);
  EXPECT_EQ(max_abs_diff(got.narrow(1, 0, T - 1), got2.narrow(1, 0, T - 1)), 0.0);
  EXPECT_GT(max_abs_diff(got.narrow(1, T - 1, 1), got2.narrow(1, T - 1, 1)), 1e-6);
}

TEST(Models, GptTrainingStep) {
  manual_seed(4);
  models::GPT gpt({64, 16, 32, 4, 2});
  Tensor idx = randint(0, 32, {2, 8}), tgt = randint(0, 32, {2, 8});
  auto loss_fn = [&] { return cross_entropy(gpt.forward(idx).view({-1, 64}), tgt.view({-1})); };
  sgd_step(gpt, loss_fn, 0.05);
  // Token 50 never appears in the input: its wte row learns only through the tied head.
  gpt.zero_grad();
  loss_fn().backward();
  EXPECT_GT(gpt.wte->weight.grad().select(0, 50).abs().max().item<double>(), 0.0);
  EXPECT_THROW(gpt.forward(randint(0, 64, {1, 17})), Error);  // longer than block_size
  EXPECT_THROW(gpt.forward(randn({1, 4})), Error);            // ids must be int64
}

// ---------------------------------------------------------------- resnet18

TEST(Models, Resnet18KeysCountAndStep) {
  models::Workload w = models::make_workload("resnet18", kCPU, /*cpu_sizes=*/true);
  Entries es = torchvision_resnet18();
  // conv1 9,408 + bn1 128 + layer1 147,968 + layer2 525,568 + layer3 2,099,712 + layer4 8,393,728
  // + fc 513,000 (torchvision: 11.69M; 62 parameters and 60 buffers).
  EXPECT_EQ(param_numel(es), 11689512);
  EXPECT_EQ(es.size(), 122u);
  expect_state_dict(*w.module, es);
  EXPECT_EQ(models::num_parameters(*w.module), 11689512);
  EXPECT_EQ(w.inputs[0].sizes().vec(), (std::vector<int64_t>{8, 3, 64, 64}));

  // torchvision's init: conv weights N(0, 2 / fan_out), BN weight 1 and bias 0, fc U(±1/√512).
  auto& m = *std::static_pointer_cast<models::ResNet>(w.module);
  Tensor cw = m.layer4->named_parameters()[0].second;  // layer4.0.conv1.weight [512, 256, 3, 3]
  EXPECT_NEAR(cw.std().item<double>(), std::sqrt(2.0 / (512 * 9)), 0.01 * std::sqrt(2.0 / (512 * 9)));
  EXPECT_EQ(m.bn1->weight.min().item<double>(), 1.0);
  EXPECT_EQ(m.bn1->bias.abs().max().item<double>(), 0.0);
  EXPECT_LE(m.fc->weight.abs().max().item<double>(), 1.0 / std::sqrt(512.0));

  // One step on 4×3×32×32: layer4 sees 1×1, so batch norm has 4 values per channel (with 2 the
  // normalised values would be ±1 whatever the input, and the layers before get no gradient).
  Tensor x = randn({4, 3, 32, 32}), y = tensor<int64_t>({3, 999, 0, 500});
  sgd_step(
      m, [&] { return cross_entropy(m.forward(x), y); }, 0.01);
  EXPECT_EQ(m.bn1->num_batches_tracked.item<int64_t>(), 2);  // two training forwards
  EXPECT_THROW(m.forward(randn({1, 1, 32, 32})), Error);
}

// ---------------------------------------------------------------- mobilenet_v2

TEST(Models, MobilenetV2KeysCountAndStep) {
  models::Workload w = models::make_workload("mobilenet_v2", kCPU, /*cpu_sizes=*/true);
  Entries es = torchvision_mobilenet_v2();
  // torchvision: 3,504,872 parameters (3.50M) in 158 tensors; 52 BatchNorms add 156 buffers.
  EXPECT_EQ(param_numel(es), 3504872);
  EXPECT_EQ(es.size(), 314u);
  expect_state_dict(*w.module, es);
  EXPECT_EQ(models::num_parameters(*w.module), 3504872);
  EXPECT_EQ(w.inputs[0].sizes().vec(), (std::vector<int64_t>{8, 3, 64, 64}));

  auto& m = *std::static_pointer_cast<models::MobileNetV2>(w.module);
  // torchvision's init: features.18.0 (1×1, 1280 out) N(0, 2 / 1280), classifier N(0, 0.01) with zero bias.
  StateDict sd = m.state_dict();
  EXPECT_NEAR(sd.at("features.18.0.weight").std().item<double>(), std::sqrt(2.0 / 1280), 0.01 * std::sqrt(2.0 / 1280));
  EXPECT_NEAR(sd.at("classifier.1.weight").std().item<double>(), 0.01, 1e-4);
  EXPECT_EQ(sd.at("classifier.1.bias").abs().max().item<double>(), 0.0);

  // One step on 4×3×32×32 (the last stages see 1×1: 4 values per channel for batch norm); dropout
  // draws the same mask both times.
  Tensor x = randn({4, 3, 32, 32}), y = tensor<int64_t>({7, 100, 999, 0});
  sgd_step(
      m, [&] { return cross_entropy(m.forward(x), y); }, 0.01);
}

// ---------------------------------------------------------------- dlrm

// Interaction = the dot products of (bottom output, bag sums) over pairs i < j in row-major order,
// written with scalar loops over the weights.
TEST(Models, DlrmForwardMatchesNaiveReference) {
  manual_seed(5);
  models::DLRM m(2, 10, 4, 3);
  const int64_t B = 3, bag = 2, n = 3, d = 4;
  Tensor dense = randn({B, 3}), sparse = randint(0, 10, {B, 2, bag});
  Tensor got = m.forward(dense, sparse);
  ASSERT_EQ(got.sizes().vec(), (std::vector<int64_t>{B, 1}));

  NoGradGuard no_grad;
  Tensor x = m.bot->forward(dense);
  std::vector<double> feats;
  auto xv = x.to_vector<double>();
  auto ids = sparse.to_vector<int64_t>();
  std::vector<std::vector<double>> tables;
  for (int64_t t = 0; t < 2; ++t) tables.push_back(m.emb->at<nn::EmbeddingBag>(t)->weight.to_vector<double>());
  for (int64_t b = 0; b < B; ++b) {
    std::vector<std::vector<double>> z(n, std::vector<double>(d, 0.0));
    for (int64_t k = 0; k < d; ++k) z[0][k] = xv[b * d + k];
    for (int64_t t = 0; t < 2; ++t)
      for (int64_t j = 0; j < bag; ++j)
        for (int64_t k = 0; k < d; ++k) z[t + 1][k] += tables[t][ids[(b * 2 + t) * bag + j] * d + k];
    for (int64_t k = 0; k < d; ++k) feats.push_back(z[0][k]);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i + 1; j < n; ++j) {
        double dot = 0;
        for (int64_t k = 0; k < d; ++k) dot += z[i][k] * z[j][k];
        feats.push_back(dot);
      }
  }
  Tensor want = m.top->forward(tensor<double>(feats, {B, d + 3}).to(kFloat32));
  EXPECT_LT(max_abs_diff(got, want), 1e-4);
  EXPECT_THROW(m.forward(dense, sparse.to(kFloat32)), Error);
  EXPECT_THROW(m.forward(dense), Error);  // two inputs needed
}

TEST(Models, DlrmKeysCountAndForward) {
  // The full-size model, built once: 8 tables 100,000 × 64 = 51,200,000; bot 13→512→256→64 =
  // 7,168 + 131,328 + 16,448; top (64 + 36)→512→256→1 = 51,712 + 131,328 + 257 → 51,538,241 (51.54M).
  models::Workload w = models::make_workload("dlrm", kCPU, /*cpu_sizes=*/true);
  Entries es;
  for (int i = 0; i < 8; ++i) es.push_back({"emb." + std::to_string(i) + ".weight", {100000, 64}});
  add_linear(es, "bot.0", 13, 512);
  add_linear(es, "bot.2", 512, 256);
  add_linear(es, "bot.4", 256, 64);
  add_linear(es, "top.0", 100, 512);
  add_linear(es, "top.2", 512, 256);
  add_linear(es, "top.4", 256, 1);
  EXPECT_EQ(param_numel(es), 51538241);
  expect_state_dict(*w.module, es);
  EXPECT_EQ(models::num_parameters(*w.module), 51538241);
  ASSERT_EQ(w.inputs.size(), 2u);
  EXPECT_EQ(w.inputs[0].sizes().vec(), (std::vector<int64_t>{256, 13}));
  EXPECT_EQ(w.inputs[1].sizes().vec(), (std::vector<int64_t>{256, 8, 4}));
  EXPECT_EQ(w.inputs[1].dtype(), kInt64);
  EXPECT_GE(w.inputs[1].min().item<int64_t>(), 0);
  EXPECT_LT(w.inputs[1].max().item<int64_t>(), 100000);
  // The workload's forward on its first 8 rows (the full batch's dense embedding gradients would
  // cost 205 MB; the training step below uses smaller tables).
  NoGradGuard no_grad;
  Tensor out = w.forward({w.inputs[0].narrow(0, 0, 8), w.inputs[1].narrow(0, 0, 8)});
  EXPECT_EQ(out.sizes().vec(), (std::vector<int64_t>{8, 1}));
  EXPECT_TRUE(all_finite(out));
}

TEST(Models, DlrmTrainingStep) {
  manual_seed(6);
  models::DLRM m(8, 1000, 64, 13);
  Tensor dense = randn({8, 13}), sparse = randint(0, 1000, {8, 8, 4}), y = rand({8, 1});
  sgd_step(
      m, [&] { return binary_cross_entropy_with_logits(m.forward(dense, sparse), y); }, 1e-4);
}
