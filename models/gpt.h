// The zoo's GPT (torch_zoo.py's GPT): token + position embeddings, pre-norm blocks of causal
// self-attention and a tanh-GELU MLP, a final LayerNorm, and a head tied to the token embedding.
// State_dict keys are torch_zoo's: wte.weight, wpe.weight, blocks.{i}.{ln1,ln2,qkv,proj,fc,out}.*,
// ln.*, head.weight (the same tensor as wte.weight, listed under both names as torch does).
#pragma once
#include <cstdint>
#include <memory>

#include "kiln/nn/container.h"
#include "kiln/nn/embedding.h"
#include "kiln/nn/linear.h"
#include "kiln/nn/norm.h"

namespace kiln::models {

struct GPTConfig {
  int64_t vocab_size = 50304;
  int64_t block_size = 1024;  // the longest sequence (rows of wpe)
  int64_t n_embd = 768;
  int64_t n_head = 12;
  int64_t n_layer = 12;
};

// BENCHMARKS.md's two sizes: 30.06M and 124.48M unique parameters.
GPTConfig gpt_nano_config();
GPTConfig gpt2_config();

class GPTBlock : public nn::Module {
 public:
  GPTBlock(int64_t n_embd, int64_t n_head);
  Tensor forward(const Tensor& x) override;  // [B, T, C] → [B, T, C]
  int64_t n_head;
  std::shared_ptr<nn::LayerNorm> ln1, ln2;
  std::shared_ptr<nn::Linear> qkv, proj, fc, out;
};

class GPT : public nn::Module {
 public:
  explicit GPT(const GPTConfig& config);
  // idx [B, T] int64 token ids, T ≤ block_size → logits [B, T, vocab_size].
  Tensor forward(const Tensor& idx) override;
  GPTConfig config;
  std::shared_ptr<nn::Embedding> wte, wpe;
  std::shared_ptr<nn::ModuleList> blocks;
  std::shared_ptr<nn::LayerNorm> ln;
  std::shared_ptr<nn::Linear> head;  // head->weight is wte->weight
};

}  // namespace kiln::models
