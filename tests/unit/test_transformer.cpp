// TransformerEncoder, TransformerDecoderLayer, TransformerDecoder and Transformer: PyTorch 1.13's
// outputs and state_dict keys (tests/fixtures/torch_transformer.safetensors, written by
// tests/fixtures/make_torch_transformer_fixture.py), a hand-written fp64 decoder layer, layer
// copies, options structs, gradients (training, gradcheck, compiled against eager), bad input;
// and the containers and small modules of the same change: typed access, ParameterList,
// ParameterDict, Unflatten, Upsample.
#include <gtest/gtest.h>

#include "tests/unit/expect_error.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/nn.h"
#include "tests/unit/torch_fixture.h"

namespace kiln {
namespace {

using kiln::testing::expect_error;
namespace F = nn::functional;

double max_abs_diff(const Tensor& a, const Tensor& b) {
  return (a.to(kFloat64) - b.to(kFloat64)).abs().max().item<double>();
}

void expect_close(const Tensor& got, const Tensor& want, double tol) {
  kiln::testing::expect_close_overall(got, want, "", tol);
}

// ---------------------------------------------------------------- PyTorch fixture

const kiln::testing::TorchCases fixture("torch_transformer.safetensors");

// Loads the case's state_dict strictly (PyTorch's keys in PyTorch's order), runs `forward` in
// eval mode and compares with PyTorch's output; returns that output.
Tensor check(const std::string& name, nn::Module& m, const std::function<Tensor()>& forward) {
  fixture.check_module(
      name, m, [&] { return kiln::testing::Outs{forward()}; }, kiln::testing::close_overall());
  return fixture.out(name);
}

TEST(TorchTransformer, EncoderSequenceFirstAndBatchFirst) {
  nn::TransformerEncoderLayer layer({.d_model = 8, .nhead = 2, .dim_feedforward = 16, .activation = "gelu"});
  nn::TransformerEncoder enc(layer, 2, std::make_shared<nn::LayerNorm>(IntArrayRef(8)));
  Tensor want = check("encoder", enc, [&] {
    return enc.forward(fixture.in("encoder", 0), fixture.in("encoder", 1), fixture.in("encoder", 2));
  });
  {
    NoGradGuard ng;  // the masks reach every layer: without them the answer differs
    EXPECT_GT(max_abs_diff(enc.forward(fixture.in("encoder", 0)), want), 1e-2);
    EXPECT_GT(max_abs_diff(enc.forward(fixture.in("encoder", 0), fixture.in("encoder", 1)), want), 1e-2);
  }

  auto bf_layer = std::make_shared<nn::TransformerEncoderLayer>(nn::TransformerEncoderLayerOptions{
      .d_model = 8, .nhead = 2, .dim_feedforward = 16, .batch_first = true, .norm_first = true});
  nn::TransformerEncoder bf({.encoder_layer = bf_layer,
                             .num_layers = 2,
                             .norm = std::make_shared<nn::LayerNorm>(IntArrayRef(8), 1e-6),
                             .enable_nested_tensor = false});
  // A non-contiguous src (a transposed view) gives the same answer.
  Tensor src = fixture.in("encoder_bf", 0).transpose(0, 1).contiguous().transpose(0, 1);
  ASSERT_FALSE(src.is_contiguous());
  check("encoder_bf", bf, [&] { return bf.forward(src, fixture.in("encoder_bf", 1), fixture.in("encoder_bf", 2)); });
}

TEST(TorchTransformer, DecoderAndDecoderLayer) {
  nn::TransformerDecoder dec(nn::TransformerDecoderLayer(8, 2, 16), 2, std::make_shared<nn::LayerNorm>(IntArrayRef(8)));
  check("decoder", dec, [&] {
    return dec.forward(fixture.in("decoder", 0), fixture.in("decoder", 1), fixture.in("decoder", 2),
                       fixture.in("decoder", 3), fixture.in("decoder", 4), fixture.in("decoder", 5));
  });
  auto layer = std::make_shared<nn::TransformerDecoderLayer>(nn::TransformerDecoderLayerOptions{
      .d_model = 8, .nhead = 2, .dim_feedforward = 16, .activation = "gelu", .batch_first = true, .norm_first = true});
  nn::TransformerDecoder bf(
      {.decoder_layer = layer, .num_layers = 2, .norm = std::make_shared<nn::LayerNorm>(IntArrayRef(8))});
  check("decoder_bf", bf, [&] {
    return bf.forward(fixture.in("decoder_bf", 0), fixture.in("decoder_bf", 1), fixture.in("decoder_bf", 2),
                      fixture.in("decoder_bf", 3));
  });
  nn::TransformerDecoderLayer one(8, 2, 16);
  check("decoder_layer_unbatched", one, [&] {
    return one.forward(fixture.in("decoder_layer_unbatched", 0), fixture.in("decoder_layer_unbatched", 1));
  });
}

TEST(TorchTransformer, Transformer) {
  nn::Transformer xf(
      {.d_model = 8, .nhead = 2, .num_encoder_layers = 2, .num_decoder_layers = 2, .dim_feedforward = 16});
  check("transformer", xf, [&] {
    const std::string c = "transformer";
    return xf.forward(fixture.in(c, 0), fixture.in(c, 1), fixture.in(c, 2), fixture.in(c, 3), fixture.in(c, 4),
                      fixture.in(c, 5), fixture.in(c, 6), fixture.in(c, 7));
  });
  // Positional arguments in torch's order.
  nn::Transformer bf(8, 2, 1, 2, 16, 0.1, "gelu", nullptr, nullptr, 1e-5, /*batch_first=*/true, /*norm_first=*/true);
  check("transformer_bf", bf, [&] {
    return bf.forward(fixture.in("transformer_bf", 0), fixture.in("transformer_bf", 1), fixture.in("transformer_bf", 2),
                      fixture.in("transformer_bf", 3));
  });
}

// ---------------------------------------------------------------- fp64 reference

// Unbatched attention by hand: per head softmax(q kᵀ / √d + mask) v, then out_proj. `mask` is
// additive [L, S] (or undefined).
Tensor attention_ref(const nn::MultiheadAttention& m, const Tensor& x, const Tensor& mem, const Tensor& mask) {
  int64_t E = m.embed_dim, H = m.num_heads, hd = E / H;
  Tensor w = m.in_proj_weight.to(kFloat64), b = m.in_proj_bias.to(kFloat64);
  auto proj = [&](const Tensor& t, int64_t i) { return matmul(t, w.narrow(0, i * E, E).t()) + b.narrow(0, i * E, E); };
  Tensor q = proj(x, 0), k = proj(mem, 1), v = proj(mem, 2);
  std::vector<Tensor> heads;
  for (int64_t h = 0; h < H; ++h) {
    Tensor s = matmul(q.narrow(1, h * hd, hd), k.narrow(1, h * hd, hd).t()) / std::sqrt(static_cast<double>(hd));
    if (mask.defined()) s = s + mask;
    heads.push_back(matmul(softmax(s, -1), v.narrow(1, h * hd, hd)));
  }
  return matmul(cat(heads, 1), m.out_proj->weight.to(kFloat64).t()) + m.out_proj->bias.to(kFloat64);
}

Tensor layer_norm_ref(const nn::LayerNorm& n, const Tensor& x) {
  Tensor mu = x.mean({-1}, true), var = ((x - mu) * (x - mu)).mean({-1}, true);
  return (x - mu) / (var + n.eps).sqrt() * n.weight.to(kFloat64) + n.bias.to(kFloat64);
}

Tensor decoder_layer_ref(const nn::TransformerDecoderLayer& l, const Tensor& tgt, const Tensor& mem,
                         const Tensor& tgt_mask, const Tensor& mem_mask) {
  auto ff = [&](const Tensor& t) {
    Tensor h = matmul(t, l.linear1->weight.to(kFloat64).t()) + l.linear1->bias.to(kFloat64);
    h = l.activation == "gelu" ? h * 0.5 * (1.0 + erf(h / std::sqrt(2.0))) : h.clamp(0.0);
    return matmul(h, l.linear2->weight.to(kFloat64).t()) + l.linear2->bias.to(kFloat64);
  };
  Tensor x = tgt.to(kFloat64), m = mem.to(kFloat64);
  auto sa = [&](const Tensor& t) { return attention_ref(*l.self_attn, t, t, tgt_mask); };
  auto ca = [&](const Tensor& t) { return attention_ref(*l.multihead_attn, t, m, mem_mask); };
  if (l.norm_first) {
    x = x + sa(layer_norm_ref(*l.norm1, x));
    x = x + ca(layer_norm_ref(*l.norm2, x));
    return x + ff(layer_norm_ref(*l.norm3, x));
  }
  x = layer_norm_ref(*l.norm1, x + sa(x));
  x = layer_norm_ref(*l.norm2, x + ca(x));
  return layer_norm_ref(*l.norm3, x + ff(x));
}

TEST(Transformer, DecoderLayerMatchesFp64Reference) {
  manual_seed(31);
  const int64_t T = 4, S = 5;
  Tensor tgt = randn({T, 8}, kFloat64), mem = randn({S, 8}, kFloat64);
  Tensor causal = nn::Transformer::generate_square_subsequent_mask(T, kFloat64);
  Tensor mem_bool = tensor<bool>({false, true,  false, false, false, false, false, true,  false, false,  //
                                  true,  false, false, false, false, false, false, false, false, true},
                                 {T, S});
  Tensor mem_add =
      where(mem_bool, full({T, S}, -std::numeric_limits<double>::infinity(), kFloat64), zeros({T, S}, kFloat64));
  for (bool norm_first : {false, true})
    for (std::string act : {"relu", "gelu"}) {
      SCOPED_TRACE(act + (norm_first ? " norm_first" : ""));
      nn::TransformerDecoderLayer layer(
          {.d_model = 8, .nhead = 2, .dim_feedforward = 12, .activation = act, .norm_first = norm_first});
      layer.to(kFloat64);
      {
        NoGradGuard ng;  // non-trivial norm affines and biases so their placement matters
        for (auto& [n, t] : layer.named_parameters())
          if (t.dim() == 1) t.copy_(randn(t.sizes().vec(), kFloat64) * 0.5 + (n.rfind("norm", 0) == 0 ? 1.0 : 0.0));
      }
      layer.eval();
      Tensor want = decoder_layer_ref(layer, tgt, mem, causal, mem_add);
      expect_close(layer.forward(tgt, mem, causal, mem_bool), want, 1e-10);
      // tgt_is_causal alone is the causal mask; a batched input [T, 1, E] gives the same rows.
      expect_close(layer.forward(tgt, mem, {}, mem_bool, {}, {}, /*tgt_is_causal=*/true), want, 1e-10);
      expect_close(layer.forward(tgt.unsqueeze(1), mem.unsqueeze(1), causal, mem_bool).squeeze(1), want, 1e-10);
      expect_close(layer.forward(tgt, mem), decoder_layer_ref(layer, tgt, mem, {}, {}), 1e-10);
    }
}

// ---------------------------------------------------------------- layer copies, structure

TEST(Transformer, EncoderCopiesTheLayer) {
  manual_seed(32);
  nn::TransformerEncoderLayer layer(8, 2, 16, 0.25, "gelu", 1e-6, /*batch_first=*/true, /*norm_first=*/true, false);
  layer.linear1->weight.requires_grad_(false);
  layer.to(kFloat64);
  layer.eval();
  nn::TransformerEncoder enc(layer, 3);
  ASSERT_EQ(enc.layers->size(), 3u);
  EXPECT_EQ(enc.num_layers, 3);
  EXPECT_FALSE(enc.norm);
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    auto copy = enc.layers->at<nn::TransformerEncoderLayer>(i);
    EXPECT_NE(copy.get(), &layer);
    EXPECT_EQ(copy->activation, "gelu");
    EXPECT_TRUE(copy->norm_first);
    EXPECT_TRUE(copy->self_attn->batch_first);
    EXPECT_EQ(copy->dropout->p, 0.25);
    EXPECT_EQ(copy->norm1->eps, 1e-6);
    EXPECT_FALSE(copy->linear1->bias.defined());
    EXPECT_FALSE(copy->is_training());
    EXPECT_FALSE(copy->linear1->weight.requires_grad());
    EXPECT_TRUE(copy->linear2->weight.requires_grad());
    auto a = copy->named_parameters(), b = layer.named_parameters();
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k) {
      EXPECT_EQ(a[k].first, b[k].first);
      EXPECT_EQ(a[k].second.dtype(), kFloat64) << a[k].first;
      EXPECT_EQ(max_abs_diff(a[k].second, b[k].second), 0.0) << a[k].first;
      EXPECT_NE(a[k].second.data_ptr<double>(), b[k].second.data_ptr<double>()) << "a copy, not a share";
    }
  }
  // The copies are independent of each other and of the original.
  {
    NoGradGuard ng;
    enc.layers->at<nn::TransformerEncoderLayer>(0)->linear2->weight.fill_(3.0);
  }
  EXPECT_NE(enc.layers->at<nn::TransformerEncoderLayer>(1)->linear2->weight.max().item<double>(), 3.0);
  EXPECT_NE(layer.linear2->weight.max().item<double>(), 3.0);
  // Without a final norm there is no norm.* key; the layer given is not itself registered.
  auto keys = enc.state_dict().keys();
  EXPECT_EQ(keys.front(), "layers.0.self_attn.in_proj_weight");
  EXPECT_EQ(keys.back(), "layers.2.norm2.weight");  // bias=false: LayerNorm without bias
  EXPECT_EQ(enc.children().size(), 1u);
}

TEST(Transformer, TransformerStructureInitAndMask) {
  manual_seed(33);
  nn::Transformer xf({.d_model = 16,
                      .nhead = 4,
                      .num_encoder_layers = 2,
                      .num_decoder_layers = 1,
                      .dim_feedforward = 24,
                      .batch_first = true});
  EXPECT_EQ(xf.d_model, 16);
  EXPECT_EQ(xf.nhead, 4);
  EXPECT_TRUE(xf.batch_first);
  EXPECT_EQ(xf.encoder->layers->size(), 2u);
  EXPECT_EQ(xf.decoder->layers->size(), 1u);
  ASSERT_TRUE(xf.encoder->norm && xf.decoder->norm);  // the final norms, as torch
  auto keys = xf.state_dict().keys();
  for (const char* k :
       {"encoder.layers.1.self_attn.in_proj_weight", "encoder.norm.weight", "encoder.norm.bias",
        "decoder.layers.0.multihead_attn.out_proj.weight", "decoder.layers.0.norm3.bias", "decoder.norm.weight"})
    EXPECT_NE(std::find(keys.begin(), keys.end(), k), keys.end()) << k;
  // _reset_parameters: every matrix xavier_uniform_ (each copy drawn anew), vectors as their layers set them.
  for (auto& [n, p] : xf.named_parameters()) {
    if (p.dim() < 2) continue;
    double bound = std::sqrt(6.0 / static_cast<double>(p.sizes()[0] + p.sizes()[1]));
    EXPECT_LE(p.abs().max().item<double>(), bound) << n;
    EXPECT_GE(p.abs().max().item<double>(), 0.5 * bound) << n;
  }
  EXPECT_GT(max_abs_diff(xf.encoder->layers->at<nn::TransformerEncoderLayer>(0)->linear1->weight,
                         xf.encoder->layers->at<nn::TransformerEncoderLayer>(1)->linear1->weight),
            0.0);
  Tensor y = xf.forward(randn({2, 5, 16}), randn({2, 3, 16}));
  EXPECT_EQ(y.sizes().vec(), (std::vector<int64_t>{2, 3, 16}));

  // torch's defaults.
  nn::TransformerOptions d;
  EXPECT_EQ(d.d_model, 512);
  EXPECT_EQ(d.nhead, 8);
  EXPECT_EQ(d.num_encoder_layers, 6);
  EXPECT_EQ(d.num_decoder_layers, 6);
  EXPECT_EQ(d.dim_feedforward, 2048);
  EXPECT_EQ(d.dropout, 0.1);
  EXPECT_EQ(d.activation, "relu");

  // Custom stacks replace the default ones.
  auto enc = std::make_shared<nn::TransformerEncoder>(nn::TransformerEncoderLayer(8, 2, 8), 1);
  nn::Transformer custom({.d_model = 8, .nhead = 2, .custom_encoder = enc});
  EXPECT_EQ(custom.encoder.get(), enc.get());
  EXPECT_EQ(custom.decoder->layers->size(), 6u);

  Tensor m = nn::Transformer::generate_square_subsequent_mask(3);
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(m.dtype(), kFloat32);
  EXPECT_EQ(m.to_vector<double>(), (std::vector<double>{0, -inf, -inf, 0, 0, -inf, 0, 0, 0}));
  EXPECT_EQ(nn::Transformer::generate_square_subsequent_mask(0).sizes().vec(), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(nn::Transformer::generate_square_subsequent_mask(2, kFloat64).dtype(), kFloat64);
}

// torch's nn.Transformer() with every default; the options structs are aggregates for designated initializers.
static_assert(std::is_default_constructible_v<nn::Transformer>);
static_assert(std::is_aggregate_v<nn::TransformerOptions> && std::is_aggregate_v<nn::TransformerEncoderOptions> &&
              std::is_aggregate_v<nn::TransformerDecoderOptions> &&
              std::is_aggregate_v<nn::TransformerDecoderLayerOptions> &&
              std::is_aggregate_v<nn::TransformerEncoderLayerOptions> &&
              std::is_aggregate_v<nn::MultiheadAttentionOptions> && std::is_aggregate_v<nn::UpsampleOptions>);

TEST(Transformer, OptionsStructsAndPositionalConstructors) {
  nn::TransformerEncoderLayer layer({.d_model = 256, .nhead = 4, .batch_first = true});
  EXPECT_EQ(layer.self_attn->embed_dim, 256);
  EXPECT_EQ(layer.self_attn->num_heads, 4);
  EXPECT_TRUE(layer.self_attn->batch_first);
  EXPECT_EQ(layer.linear1->out_features, 2048);
  EXPECT_EQ(layer.dropout->p, 0.1);
  EXPECT_EQ(layer.activation, "relu");
  EXPECT_EQ(layer.forward(randn({2, 3, 256})).sizes().vec(), (std::vector<int64_t>{2, 3, 256}));
  auto o = layer.options();
  EXPECT_EQ(o.d_model, 256);
  EXPECT_EQ(o.dim_feedforward, 2048);
  EXPECT_TRUE(o.batch_first && o.bias && !o.norm_first);

  nn::MultiheadAttention mha({.embed_dim = 8, .num_heads = 2, .kdim = 5, .vdim = 3, .batch_first = true});
  EXPECT_FALSE(mha.in_proj_weight.defined());
  EXPECT_EQ(mha.k_proj_weight.sizes().vec(), (std::vector<int64_t>{8, 5}));
  EXPECT_EQ(std::get<0>(mha.forward(randn({2, 4, 8}), randn({2, 6, 5}), randn({2, 6, 3}))).sizes().vec(),
            (std::vector<int64_t>{2, 4, 8}));
  nn::MultiheadAttention positional(8, 2, 0.0, false);
  EXPECT_FALSE(positional.in_proj_bias.defined());

  nn::TransformerDecoderLayer dl({.d_model = 8, .nhead = 2, .dim_feedforward = 4, .dropout = 0.0, .bias = false});
  EXPECT_FALSE(dl.linear1->bias.defined());
  EXPECT_FALSE(dl.norm3->bias.defined());
  EXPECT_EQ(dl.dropout3->p, 0.0);
  nn::TransformerDecoderLayer dlp(8, 2, 4, 0.0, "gelu");
  EXPECT_EQ(dlp.activation, "gelu");
  EXPECT_EQ(dlp.state_dict().keys().size(), 4u + 4u + 4u + 6u);  // 2 attentions, 2 linears, 3 norms

  auto dec = nn::TransformerDecoder(
      {.decoder_layer = std::make_shared<nn::TransformerDecoderLayer>(dlp.options()), .num_layers = 2});
  EXPECT_EQ(dec.layers->at<nn::TransformerDecoderLayer>(1)->activation, "gelu");
  Tensor out = dec.forward(randn({3, 2, 8}), randn({4, 2, 8}));
  EXPECT_EQ(out.sizes().vec(), (std::vector<int64_t>{3, 2, 8}));
  // The encoder from a shared_ptr, positional; a 0-layer stack is its norm alone.
  auto el = std::make_shared<nn::TransformerEncoderLayer>(8, 2, 4);
  nn::TransformerEncoder e2(el, 0, std::make_shared<nn::LayerNorm>(IntArrayRef(8)));
  Tensor x = randn({3, 2, 8});
  expect_close(e2.forward(x), F::layer_norm(x, {8}, e2.norm->weight, e2.norm->bias), 1e-6);
}

// ---------------------------------------------------------------- gradients

TEST(Transformer, TrainingStepDecreasesLossAndReachesEveryParameter) {
  manual_seed(34);
  nn::Transformer xf({.d_model = 8,
                      .nhead = 2,
                      .num_encoder_layers = 1,
                      .num_decoder_layers = 1,
                      .dim_feedforward = 16,
                      .dropout = 0.0});
  Tensor src = randn({6, 2, 8}), tgt = randn({4, 2, 8}), target = randn({4, 2, 8});
  Tensor mask = nn::Transformer::generate_square_subsequent_mask(4);
  optim::Adam opt(xf.parameters(), {.lr = 1e-2});
  auto loss_of = [&] { return (xf.forward(src, tgt, {}, mask) - target).pow(2).mean(); };
  Tensor first = loss_of();
  opt.zero_grad();
  first.backward();
  for (auto& [n, p] : xf.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << n;
    EXPECT_GT(p.grad().abs().max().item<double>(), 0.0) << n;
  }
  opt.step();
  for (int i = 0; i < 20; ++i) {
    opt.zero_grad();
    loss_of().backward();
    opt.step();
  }
  EXPECT_LT(loss_of().item<double>(), 0.8 * first.item<double>());
}

TEST(Transformer, DecoderLayerGradcheck) {
  manual_seed(35);
  nn::TransformerDecoderLayer layer(
      {.d_model = 4, .nhead = 2, .dim_feedforward = 6, .dropout = 0.0, .activation = "gelu"});
  layer.to(kFloat64);
  Tensor tgt = randn({3, 1, 4}, kFloat64).requires_grad_(), mem = randn({2, 1, 4}, kFloat64).requires_grad_();
  Tensor tgt_mask = nn::Transformer::generate_square_subsequent_mask(3, kFloat64);
  Tensor kpm = tensor<bool>({false, true}, {1, 2});
  // Parameters enter through the layer's members so that gradcheck can perturb its copies.
  Tensor w_in = layer.multihead_attn->in_proj_weight, w1 = layer.linear1->weight, g3 = layer.norm3->weight;
  auto fn = [&](const std::vector<Tensor>& x) {
    layer.multihead_attn->in_proj_weight = x[2];
    layer.linear1->weight = x[3];
    layer.norm3->weight = x[4];
    Tensor y = layer.forward(x[0], x[1], tgt_mask, {}, {}, kpm);
    return std::vector<Tensor>{y};
  };
  EXPECT_TRUE(gradcheck(fn, {tgt, mem, w_in, w1, g3}));
  layer.multihead_attn->in_proj_weight = w_in;
  layer.linear1->weight = w1;
  layer.norm3->weight = g3;
}

TEST(Transformer, CompiledEncoderForwardBackwardMatchesEager) {
  for (const char* backend : {"eager", "aot_eager"}) {
    SCOPED_TRACE(backend);
    manual_seed(36);
    auto make = [] {
      nn::TransformerEncoderLayer layer({.d_model = 8, .nhead = 2, .dim_feedforward = 16, .dropout = 0.0});
      return std::make_shared<nn::TransformerEncoder>(layer, 2, std::make_shared<nn::LayerNorm>(IntArrayRef(8)));
    };
    auto m = make(), ref = make();
    ref->load_state_dict(m->state_dict());
    Tensor x = randn({5, 3, 8}), mask = nn::Transformer::generate_square_subsequent_mask(5);
    Tensor kpm = tensor<bool>({false, false, false, false, true, false, false, false, true, true,  //
                               false, false, false, false, false},
                              {3, 5});
    auto body = [](nn::TransformerEncoder& e, const Tensor& src, const Tensor& am, const Tensor& pm) {
      return e.forward(src, am, pm).pow(2).sum();
    };
    auto fast = compile([&](const Tensor& src) { return body(*m, src, mask, kpm); }, {.backend = backend});
    Tensor xa = x.clone().requires_grad_(), xb = x.clone().requires_grad_();
    Tensor got = fast(xa), want = body(*ref, xb, mask, kpm);
    EXPECT_LE(max_abs_diff(got, want), 1e-4 * (1 + std::abs(want.item<double>())));
    got.backward();
    want.backward();
    ASSERT_TRUE(xa.grad().defined());
    EXPECT_LE(max_abs_diff(xa.grad(), xb.grad()), 1e-4);
    auto pa = m->named_parameters(), pb = ref->named_parameters();
    ASSERT_EQ(pa.size(), pb.size());
    for (size_t i = 0; i < pa.size(); ++i) {
      ASSERT_TRUE(pa[i].second.grad().defined()) << pa[i].first;
      EXPECT_LE(max_abs_diff(pa[i].second.grad(), pb[i].second.grad()), 1e-4) << pa[i].first;
    }
    EXPECT_GE(fast.stats().graphs_compiled, 1);
    EXPECT_TRUE(fast.stats().breaks.empty()) << fast.stats().str().substr(0, 2000);
  }
}

TEST(Transformer, EmptyBatchAndEmptySequence) {
  manual_seed(37);
  nn::TransformerEncoder enc(nn::TransformerEncoderLayer(8, 2, 16), 2, std::make_shared<nn::LayerNorm>(IntArrayRef(8)));
  nn::TransformerDecoder dec(nn::TransformerDecoderLayer(8, 2, 16), 1);
  enc.eval();
  dec.eval();
  // As torch: an empty batch or an empty target sequence gives an empty output of the same shape.
  EXPECT_EQ(enc.forward(randn({5, 0, 8})).sizes().vec(), (std::vector<int64_t>{5, 0, 8}));
  EXPECT_EQ(enc.forward(randn({0, 2, 8})).sizes().vec(), (std::vector<int64_t>{0, 2, 8}));
  EXPECT_EQ(dec.forward(randn({3, 0, 8}), randn({4, 0, 8})).sizes().vec(), (std::vector<int64_t>{3, 0, 8}));
  EXPECT_EQ(dec.forward(randn({0, 2, 8}), randn({4, 2, 8})).sizes().vec(), (std::vector<int64_t>{0, 2, 8}));
}

// ---------------------------------------------------------------- bad input

TEST(Transformer, BadInputNamesTheModule) {
  expect_error([] { nn::TransformerEncoderLayer(10, 3); },
               {"TransformerEncoderLayer", "d_model (10) must be divisible by nhead (3)"});
  expect_error([] { nn::TransformerDecoderLayer({.d_model = 10, .nhead = 4}); },
               {"TransformerDecoderLayer", "divisible by nhead"});
  expect_error([] { nn::Transformer({.d_model = 10, .nhead = 3}); }, {"Transformer:", "divisible by nhead"});
  expect_error([] { nn::TransformerDecoderLayer(8, 2, 16, 0.1, "tanh"); }, {"TransformerDecoderLayer", "relu/gelu"});
  expect_error([] { nn::TransformerEncoderLayer(8, 2, 16, 1.5); }, {"TransformerEncoderLayer", "dropout"});
  expect_error([] { nn::TransformerEncoder({.num_layers = 2}); },
               {"TransformerEncoder", "encoder_layer must be given"});
  expect_error([] { nn::TransformerDecoder(nn::TransformerDecoderLayer(8, 2), -1); },
               {"TransformerDecoder", "num_layers"});

  nn::TransformerEncoder enc(nn::TransformerEncoderLayer(8, 2, 16), 2);
  expect_error([&] { enc.forward(randn({2, 3, 4, 8})); }, {"TransformerEncoder", "src", "[2, 3, 4, 8]"});
  expect_error([&] { enc.forward(randn({5, 2, 6})); }, {"TransformerEncoder", "[S, N, 8]", "[5, 2, 6]"});
  expect_error([&] { enc.layers->at<nn::TransformerEncoderLayer>(0)->forward(randn({8})); },
               {"TransformerEncoderLayer", "src"});
  nn::TransformerDecoder dec(nn::TransformerDecoderLayer(8, 2, 16, 0.1, "relu", 1e-5, /*batch_first=*/true), 1);
  expect_error([&] { dec.forward(randn({2, 3, 7}), randn({2, 4, 8})); }, {"TransformerDecoder", "tgt", "[N, S, 8]"});
  expect_error([&] { dec.forward(randn({2, 3, 8}), randn({2, 4})); }, {"TransformerDecoder", "memory"});
  expect_error(
      [&] {
        dec.layers->at<nn::TransformerDecoderLayer>(0)->forward(randn({3, 8}), randn({2, 4, 8}));
      },
      {"TransformerDecoderLayer", "batched"});
  nn::Transformer xf(
      {.d_model = 8, .nhead = 2, .num_encoder_layers = 1, .num_decoder_layers = 1, .dim_feedforward = 8});
  expect_error([&] { xf.forward(randn({5, 2, 8}), randn({4, 3, 8})); }, {"Transformer", "batch number"});
  expect_error([&] { xf.forward(randn({5, 2, 8}), randn({4, 2, 6})); }, {"Transformer", "d_model (8)"});
  expect_error([&] { xf.forward(randn({5, 2, 8}), randn({4, 8})); }, {"Transformer", "batched"});
  expect_error([] { nn::Transformer::generate_square_subsequent_mask(-1); }, {"generate_square_subsequent_mask"});
}

// ---------------------------------------------------------------- containers

TEST(Containers, TypedAccessAndInitializerLists) {
  nn::Sequential seq(
      {std::make_shared<nn::Linear>(4, 3), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(3, 2)});
  EXPECT_EQ(seq.at<nn::Linear>(2)->out_features, 2);
  EXPECT_TRUE(seq.at<nn::ReLU>(1));
  expect_error([&] { seq.at<nn::Linear>(1); }, {"Sequential::at", "module 1 is a ReLU"});
  expect_error([&] { seq.at<nn::Linear>(3); }, {"Sequential", "out of range"});

  nn::ModuleList list({std::make_shared<nn::Linear>(2, 2), std::make_shared<nn::LayerNorm>(IntArrayRef(2))});
  EXPECT_EQ(list.size(), 2u);
  EXPECT_EQ(list.at<nn::LayerNorm>(1)->normalized_shape, (std::vector<int64_t>{2}));
  expect_error([&] { list.at<nn::Linear>(1); }, {"ModuleList::at", "LayerNorm"});
  EXPECT_EQ(list.state_dict().keys(), (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias"}));

  nn::ModuleDict dict({{"proj", std::make_shared<nn::Linear>(2, 3)}, {"act", std::make_shared<nn::GELU>()}});
  EXPECT_EQ(dict.at<nn::Linear>("proj")->out_features, 3);
  expect_error([&] { dict.at<nn::Linear>("act"); }, {"ModuleDict::at", "'act'"});
}

TEST(Containers, ParameterListAndDict) {
  nn::ParameterList list({randn({2, 3}), zeros({3})});
  list.push_back(ones({4}));
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list.state_dict().keys(), (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(list.parameters().size(), 3u);
  for (const Tensor& p : list) EXPECT_TRUE(p.requires_grad());
  {
    NoGradGuard ng;  // the handles are the registered tensors
    Tensor p = list[1];
    p.fill_(5.0);
  }
  EXPECT_EQ(list.state_dict().at("1").to_vector<double>(), (std::vector<double>{5, 5, 5}));
  expect_error([&] { (void)list[3]; }, {"ParameterList", "out of range"});
  EXPECT_EQ(list[-1].sizes().vec(), (std::vector<int64_t>{4}));  // from the end, as torch
  expect_error([&] { (void)list[-4]; }, {"ParameterList", "index -4 out of range"});
  // Registered parameters take gradients and optimizer steps.
  optim::SGD opt(list.parameters(), {.lr = 0.5});
  (list[0].sum() + list[2].sum()).backward();
  opt.step();
  EXPECT_EQ(list[2].to_vector<double>(), (std::vector<double>{0.5, 0.5, 0.5, 0.5}));

  nn::ParameterDict dict({{"scale", ones({2})}, {"shift", zeros({2})}});
  EXPECT_EQ(dict.keys(), (std::vector<std::string>{"scale", "shift"}));
  EXPECT_EQ(dict.state_dict().keys(), (std::vector<std::string>{"scale", "shift"}));
  dict.insert("scale", full({3}, 2.0));  // replaces, keeping its place
  EXPECT_EQ(dict.size(), 2u);
  EXPECT_EQ(dict["scale"].sizes().vec(), (std::vector<int64_t>{3}));
  EXPECT_EQ(dict.state_dict().at("scale").to_vector<double>(), (std::vector<double>{2, 2, 2}));
  EXPECT_TRUE(dict.contains("shift"));
  EXPECT_FALSE(dict.contains("bias"));
  expect_error([&] { (void)dict["bias"]; }, {"ParameterDict", "'bias'"});
  // Nested in a module: dotted keys, as torch.
  struct Net : nn::Module {
    std::shared_ptr<nn::ParameterList> ws;
    Net() : Module("Net") {
      ws = register_module("ws", std::make_shared<nn::ParameterList>(std::vector<Tensor>{ones({1})}));
    }
  } net;
  EXPECT_EQ(net.state_dict().keys(), (std::vector<std::string>{"ws.0"}));
  StateDict sd;
  sd.insert("ws.0", full({1}, 7.0));
  net.load_state_dict(sd);
  EXPECT_EQ((*net.ws)[0].item<double>(), 7.0);
}

// ---------------------------------------------------------------- Unflatten, Upsample

TEST(SmallModules, Unflatten) {
  nn::Unflatten u(1, {3, -1});
  Tensor x = arange(24).reshape({2, 12});
  Tensor y = u.forward(x);
  EXPECT_EQ(y.sizes().vec(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(y.to_vector<double>(), x.to_vector<double>());
  EXPECT_EQ(nn::Unflatten(-1, {2, 6}).forward(x).sizes().vec(), (std::vector<int64_t>{2, 2, 6}));
  EXPECT_EQ(u.repr(), "Unflatten(dim=1, unflattened_size=(3, -1))");
  expect_error([&] { nn::Unflatten(1, {5, 5}).forward(x); }, {"unflatten"});
}

TEST(SmallModules, Upsample) {
  // Nearest ×2 by hand: out[i, j] = in[i / 2, j / 2].
  Tensor x = randn({1, 2, 3, 4});
  nn::Upsample up({.scale_factor = std::vector<double>{2}});
  Tensor y = up.forward(x);
  ASSERT_EQ(y.sizes().vec(), (std::vector<int64_t>{1, 2, 6, 8}));
  auto xv = x.to_vector<double>(), yv = y.to_vector<double>();
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t j = 0; j < 8; ++j) EXPECT_EQ(yv[(c * 6 + i) * 8 + j], xv[(c * 3 + i / 2) * 4 + j / 2]);
  EXPECT_EQ(up.repr(), "Upsample(scale_factor=2.0, mode='nearest')");

  nn::Upsample bil(std::vector<int64_t>{5, 7}, std::nullopt, "bilinear", true);
  expect_close(bil.forward(x), interpolate(x, std::vector<int64_t>{5, 7}, std::nullopt, "bilinear", true), 0);
  EXPECT_EQ(bil.repr(), "Upsample(size=(5, 7), mode='bilinear')");
  // Corners are kept with align_corners=true.
  EXPECT_EQ(bil.forward(x).to_vector<double>()[0], xv[0]);
  Tensor xg = x.to(kFloat64).requires_grad_();
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& v) { return std::vector<Tensor>{bil.forward(v[0])}; }, {xg}));

  expect_error([] { nn::Upsample(nn::UpsampleOptions{}); }, {"Upsample", "either size or scale_factor"});
  expect_error([] { nn::Upsample({.size = std::vector<int64_t>{2}, .scale_factor = std::vector<double>{2}}); },
               {"Upsample", "only one of them"});
  expect_error([] { nn::Upsample({.scale_factor = std::vector<double>{2}, .mode = "bicubic"}); }, {"Upsample", "mode"});
  expect_error([] { nn::Upsample({.scale_factor = std::vector<double>{2}, .align_corners = true}); },
               {"Upsample", "align_corners"});
}

}  // namespace
}  // namespace kiln
