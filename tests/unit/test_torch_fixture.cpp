// PyTorch state_dicts load into kiln modules of the same architecture and give PyTorch's outputs.
// The fixture (tests/fixtures/torch_layers.safetensors) was written by PyTorch 1.13 with
// tests/fixtures/make_torch_fixture.py: each case holds a module's state_dict, its inputs and its
// eval-mode output.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "kiln/kiln.h"
#include "models/gpt.h"
#include "models/mlp.h"
#include "tests/unit/torch_fixture.h"

namespace kiln {
namespace {

const kiln::testing::TorchCases fixture("torch_layers.safetensors");

// Loads the case's state_dict strictly (every key and shape as PyTorch's), runs `forward` and
// compares with PyTorch's output.
void check(const std::string& name, nn::Module& m, const std::function<Tensor()>& forward) {
  fixture.check_module(
      name, m, [&] { return kiln::testing::Outs{forward()}; }, kiln::testing::close_overall());
}

template <class M>
void check1(const std::string& name, M& m) {
  check(name, m, [&] { return m.forward(fixture.in(name, 0)); });
}

TEST(TorchFixture, Layers) {
  nn::Linear linear(5, 3);
  check1("linear", linear);
  nn::Bilinear bilinear(3, 4, 2);
  check("bilinear", bilinear, [&] { return bilinear.forward(fixture.in("bilinear", 0), fixture.in("bilinear", 1)); });
  nn::Conv1d conv1d(3, 4, 3, 2, 1);
  check1("conv1d", conv1d);
  nn::Conv2d conv2d(3, 6, 3, 1, 1, 1, 3);
  check1("conv2d", conv2d);
  nn::ConvTranspose2d convt(4, 2, 3, 2, 1, 1);
  check1("conv_transpose2d", convt);
  nn::BatchNorm2d bn2(3);
  check1("batch_norm2d", bn2);
  nn::BatchNorm1d bn1(5, 1e-5, std::nullopt);
  check1("batch_norm1d", bn1);
  nn::LayerNorm ln({4, 3});
  check1("layer_norm", ln);
  nn::GroupNorm gn(2, 4);
  check1("group_norm", gn);
  nn::Embedding emb(10, 3, 1);
  check1("embedding", emb);
  nn::EmbeddingBag bag(10, 3, "sum");
  check1("embedding_bag", bag);
}

TEST(TorchFixture, Attention) {
  nn::MultiheadAttention mha(8, 2, 0.0, true, false, false, std::nullopt, std::nullopt, /*batch_first=*/true);
  check("mha", mha,
        [&] { return std::get<0>(mha.forward(fixture.in("mha", 0), fixture.in("mha", 1), fixture.in("mha", 2))); });
  nn::TransformerEncoderLayer enc(8, 2, 16, 0.1, "gelu", 1e-5, false, /*norm_first=*/true);
  check1("encoder_layer", enc);
}

TEST(TorchFixture, ZooModels) {
  models::GPT gpt(models::GPTConfig{.vocab_size = 50, .block_size = 16, .n_embd = 32, .n_head = 4, .n_layer = 2});
  check1("gpt", gpt);
  models::MLP mlp(12, 16, 2, 3);
  check1("mlp", mlp);
}

}  // namespace
}  // namespace kiln
