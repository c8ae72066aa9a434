// MultiheadAttention and TransformerEncoderLayer, with torch's parameter names
// (in_proj_weight, in_proj_bias, out_proj.*; self_attn, linear1, linear2, norm1, norm2).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

#include "kiln/nn/activation.h"
#include "kiln/nn/linear.h"
#include "kiln/nn/norm.h"

namespace kiln::nn {

// torch's constructor arguments, in torch's order, for designated initializers:
//   nn::MultiheadAttention({.embed_dim = 64, .num_heads = 4, .batch_first = true})
struct MultiheadAttentionOptions {
  int64_t embed_dim = 0;
  int64_t num_heads = 0;
  double dropout = 0.0;
  bool bias = true;
  bool add_bias_kv = false;
  bool add_zero_attn = false;
  std::optional<int64_t> kdim = std::nullopt;
  std::optional<int64_t> vdim = std::nullopt;
  bool batch_first = false;
};

// Arguments in torch's order. kdim/vdim other than embed_dim give separate q/k/v projection
// weights (q_proj_weight, k_proj_weight, v_proj_weight; in_proj_weight absent), as torch.
class MultiheadAttention : public Module {
 public:
  explicit MultiheadAttention(const MultiheadAttentionOptions& options);
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0.0, bool bias = true,
                     bool add_bias_kv = false, bool add_zero_attn = false, std::optional<int64_t> kdim = std::nullopt,
                     std::optional<int64_t> vdim = std::nullopt, bool batch_first = false)
      : MultiheadAttention(MultiheadAttentionOptions{embed_dim, num_heads, dropout, bias, add_bias_kv, add_zero_attn,
                                                     kdim, vdim, batch_first}) {}
  // Inputs [L, N, E] ([N, L, E] when batch_first) or unbatched [L, E]. Returns (output, weights);
  // weights [N, L, S] (averaged over heads) or [N, H, L, S], undefined unless need_weights.
  // Masks: bool (true = not allowed) or float (added), as torch. is_causal without attn_mask
  // builds the causal mask (torch requires the mask as well).
  std::tuple<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const Tensor& key_padding_mask = {}, bool need_weights = true,
                                     const Tensor& attn_mask = {}, bool average_attn_weights = true,
                                     bool is_causal = false);
  void reset_parameters();
  int64_t embed_dim, kdim, vdim, num_heads, head_dim;
  double dropout;
  bool batch_first, add_zero_attn;
  Tensor in_proj_weight;                               // [3E, E], or undefined with separate weights
  Tensor q_proj_weight, k_proj_weight, v_proj_weight;  // [E, E], [E, kdim], [E, vdim], or undefined
  Tensor in_proj_bias;                                 // [3E], undefined without bias
  Tensor bias_k, bias_v;                               // [1, 1, E] with add_bias_kv
  std::shared_ptr<Linear> out_proj;
};

// torch's constructor arguments, in torch's order (activation: "relu" or "gelu"):
//   nn::TransformerEncoderLayer({.d_model = 256, .nhead = 4, .batch_first = true})
struct TransformerEncoderLayerOptions {
  int64_t d_model = 0;
  int64_t nhead = 0;
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  std::string activation = "relu";
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  bool norm_first = false;
  bool bias = true;
};

class TransformerEncoderLayer : public Module {
 public:
  explicit TransformerEncoderLayer(const TransformerEncoderLayerOptions& options);
  TransformerEncoderLayer(int64_t d_model, int64_t nhead, int64_t dim_feedforward = 2048, double dropout = 0.1,
                          const std::string& activation = "relu", double layer_norm_eps = 1e-5,
                          bool batch_first = false, bool norm_first = false, bool bias = true)
      : TransformerEncoderLayer(TransformerEncoderLayerOptions{d_model, nhead, dim_feedforward, dropout, activation,
                                                               layer_norm_eps, batch_first, norm_first, bias}) {}
  // The configuration read back from the layer's members (what TransformerEncoder copies).
  TransformerEncoderLayerOptions options() const;
  Tensor forward(const Tensor& src) override { return forward(src, Tensor()); }
  // src [S, N, E] ([N, S, E] when batch_first) or unbatched [S, E].
  Tensor forward(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask = {},
                 bool is_causal = false);
  std::string activation;
  bool norm_first;
  std::shared_ptr<MultiheadAttention> self_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2;
  std::shared_ptr<LayerNorm> norm1, norm2;
};

}  // namespace kiln::nn
