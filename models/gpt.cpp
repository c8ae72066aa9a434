#include "models/gpt.h"

#include "kiln/ops/creation.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/pointwise.h"
#include "models/common.h"

namespace kiln::models {

GPTConfig gpt_nano_config() { return {50304, 256, 384, 6, 6}; }
GPTConfig gpt2_config() { return {50304, 1024, 768, 12, 12}; }

GPTBlock::GPTBlock(int64_t n_embd, int64_t n_head) : Module("Block"), n_head(n_head) {
  KILN_CHECK(n_embd > 0 && n_head > 0 && n_embd % n_head == 0, "GPTBlock: n_embd (", n_embd,
             ") must be a positive multiple of n_head (", n_head, ")");
  // Registration order gives torch_zoo's key order (ln1, ln2, qkv, proj, fc, out).
  ln1 = register_module("ln1", std::make_shared<nn::LayerNorm>(n_embd));
  ln2 = register_module("ln2", std::make_shared<nn::LayerNorm>(n_embd));
  qkv = register_module("qkv", std::make_shared<nn::Linear>(n_embd, 3 * n_embd));
  proj = register_module("proj", std::make_shared<nn::Linear>(n_embd, n_embd));
  fc = register_module("fc", std::make_shared<nn::Linear>(n_embd, 4 * n_embd));
  out = register_module("out", std::make_shared<nn::Linear>(4 * n_embd, n_embd));
}

Tensor GPTBlock::forward(const Tensor& x) {
  KILN_CHECK(x.dim() == 3, "GPTBlock: expected x [B, T, C], got ", detail::sizes_str(x));
  const SymInt B = x.size(0), T = x.size(1), C = x.size(2);  // symbolic under dynamic shapes
  std::vector<Tensor> parts = qkv->forward(ln1->forward(x)).split(C, 2);
  for (Tensor& p : parts) p = p.view({B, T, n_head, C / n_head}).transpose(1, 2);  // [B, h, T, C/h]
  Tensor y = scaled_dot_product_attention(parts[0], parts[1], parts[2], {}, 0.0, /*is_causal=*/true);
  Tensor h = x + proj->forward(y.transpose(1, 2).reshape({B, T, C}));
  return h + out->forward(gelu(fc->forward(ln2->forward(h)), "tanh"));
}

GPT::GPT(const GPTConfig& cfg) : Module("GPT"), config(cfg) {
  KILN_CHECK(cfg.vocab_size > 0 && cfg.block_size > 0 && cfg.n_layer >= 0,
             "GPT: vocab_size, block_size must be positive and n_layer non-negative, got vocab_size=", cfg.vocab_size,
             ", block_size=", cfg.block_size, ", n_layer=", cfg.n_layer);
  wte = register_module("wte", std::make_shared<nn::Embedding>(cfg.vocab_size, cfg.n_embd));
  wpe = register_module("wpe", std::make_shared<nn::Embedding>(cfg.block_size, cfg.n_embd));
  blocks = register_module("blocks", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < cfg.n_layer; ++i) blocks->push_back(std::make_shared<GPTBlock>(cfg.n_embd, cfg.n_head));
  ln = register_module("ln", std::make_shared<nn::LayerNorm>(cfg.n_embd));
  // Weight tying (`head.weight = wte.weight` in torch): one tensor under both names, so it gets
  // one gradient (the sum of both uses) and counts once in parameters(). The head is built with one
  // output row and then given wte's weight, so no [vocab, n_embd] init is drawn only to be dropped.
  head = register_module("head", std::make_shared<nn::Linear>(cfg.n_embd, 1, /*bias=*/false));
  head->weight = head->register_parameter("weight", wte->weight);
  head->out_features = cfg.vocab_size;
}

Tensor GPT::forward(const Tensor& idx) {
  KILN_CHECK(idx.dim() == 2 && idx.dtype() == kInt64, "GPT: expected idx [B, T] int64, got ", detail::sizes_str(idx),
             " ", dtype_name(idx.dtype()));
  const SymInt T = idx.size(1);
  KILN_CHECK(T <= config.block_size, "GPT: sequence length ", T, " exceeds block_size ", config.block_size);
  Tensor x = wte->forward(idx) + wpe->forward(arange(T, TensorOptions(kInt64).device(idx.device())));
  for (const auto& b : *blocks) x = b->forward(x);
  return head->forward(ln->forward(x));
}

}  // namespace kiln::models
