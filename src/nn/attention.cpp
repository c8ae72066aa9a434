// MultiheadAttention and TransformerEncoderLayer, with torch's parameter names, registration order
// and default init.
#include "kiln/nn/attention.h"

#include "kiln/nn/functional.h"
#include "kiln/nn/init.h"
#include "kiln/ops/creation.h"
#include "nn/nn_util.h"

namespace kiln::nn {

MultiheadAttention::MultiheadAttention(const MultiheadAttentionOptions& o)
    : Module("MultiheadAttention"),
      embed_dim(o.embed_dim),
      kdim(o.kdim.value_or(o.embed_dim)),
      vdim(o.vdim.value_or(o.embed_dim)),
      num_heads(o.num_heads),
      head_dim(o.num_heads > 0 ? o.embed_dim / o.num_heads : 0),
      dropout(o.dropout),
      batch_first(o.batch_first),
      add_zero_attn(o.add_zero_attn) {
  KILN_CHECK(embed_dim > 0 && num_heads > 0, "MultiheadAttention: embed_dim and num_heads must be greater than 0, got ",
             "embed_dim=", embed_dim, " and num_heads=", num_heads);
  KILN_CHECK(head_dim * num_heads == embed_dim, "MultiheadAttention: embed_dim (", embed_dim,
             ") must be divisible by num_heads (", num_heads, ")");
  KILN_CHECK(this->kdim > 0 && this->vdim > 0, "MultiheadAttention: kdim and vdim must be positive, got ", this->kdim,
             " and ", this->vdim);
  KILN_CHECK(dropout >= 0 && dropout <= 1, "MultiheadAttention: dropout probability has to be between 0 and 1, got ",
             dropout);
  // torch's order: the projection weights (packed or separate, the other form registered absent),
  // in_proj_bias, then out_proj, then bias_k/bias_v (own parameters precede submodules in state_dict).
  if (this->kdim == embed_dim && this->vdim == embed_dim) {
    in_proj_weight = register_parameter("in_proj_weight", empty({3 * embed_dim, embed_dim}));
    register_parameter("q_proj_weight", Tensor());
    register_parameter("k_proj_weight", Tensor());
    register_parameter("v_proj_weight", Tensor());
  } else {
    q_proj_weight = register_parameter("q_proj_weight", empty({embed_dim, embed_dim}));
    k_proj_weight = register_parameter("k_proj_weight", empty({embed_dim, this->kdim}));
    v_proj_weight = register_parameter("v_proj_weight", empty({embed_dim, this->vdim}));
    register_parameter("in_proj_weight", Tensor());
  }
  in_proj_bias = register_parameter("in_proj_bias", o.bias ? empty({3 * embed_dim}) : Tensor());
  out_proj = register_module("out_proj", std::make_shared<Linear>(embed_dim, embed_dim, o.bias));
  bias_k = register_parameter("bias_k", o.add_bias_kv ? empty({1, 1, embed_dim}) : Tensor());
  bias_v = register_parameter("bias_v", o.add_bias_kv ? empty({1, 1, embed_dim}) : Tensor());
  reset_parameters();
}

// torch's _reset_parameters: xavier_uniform on the projections, zero biases, xavier_normal on
// bias_k/bias_v; out_proj.weight keeps Linear's init.
void MultiheadAttention::reset_parameters() {
  if (in_proj_weight.defined()) {
    init::xavier_uniform_(in_proj_weight);
  } else {
    init::xavier_uniform_(q_proj_weight);
    init::xavier_uniform_(k_proj_weight);
    init::xavier_uniform_(v_proj_weight);
  }
  if (in_proj_bias.defined()) {
    init::zeros_(in_proj_bias);
    init::zeros_(out_proj->bias);
  }
  if (bias_k.defined()) init::xavier_normal_(bias_k);
  if (bias_v.defined()) init::xavier_normal_(bias_v);
}

std::tuple<Tensor, Tensor> MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                                       const Tensor& key_padding_mask, bool need_weights,
                                                       const Tensor& attn_mask, bool average_attn_weights,
                                                       bool is_causal) {
  KILN_CHECK(query.defined() && key.defined() && value.defined(),
             "MultiheadAttention: query, key and value must be defined");
  bool to_seq_first = batch_first && query.dim() == 3;
  Tensor q = query, k = key, v = value;
  if (to_seq_first) {
    // Transposed once per distinct tensor, so self-attention keeps one packed projection.
    q = query.transpose(0, 1);
    k = key.is_same(query) ? q : key.transpose(0, 1);
    v = value.is_same(key) ? k : value.is_same(query) ? q : value.transpose(0, 1);
  }
  bool separate = !in_proj_weight.defined();
  auto [out, weights] = functional::multi_head_attention_forward(
      q, k, v, embed_dim, num_heads, in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn, dropout,
      out_proj->weight, out_proj->bias, is_training(), key_padding_mask, need_weights, attn_mask, separate,
      q_proj_weight, k_proj_weight, v_proj_weight, Tensor(), Tensor(), average_attn_weights, is_causal);
  if (to_seq_first) out = out.transpose(0, 1);
  return {out, weights};
}

TransformerEncoderLayer::TransformerEncoderLayer(const TransformerEncoderLayerOptions& o)
    : Module("TransformerEncoderLayer"), activation(o.activation), norm_first(o.norm_first) {
  detail::check_transformer_dims("TransformerEncoderLayer", o.d_model, o.nhead, o.dim_feedforward, o.dropout);
  KILN_CHECK(activation == "relu" || activation == "gelu",
             "TransformerEncoderLayer: activation should be relu/gelu, not ", activation);
  // torch's registration order: self_attn, linear1, dropout, linear2, norm1, norm2, dropout1, dropout2.
  self_attn = register_module("self_attn", std::make_shared<MultiheadAttention>(MultiheadAttentionOptions{
                                               .embed_dim = o.d_model,
                                               .num_heads = o.nhead,
                                               .dropout = o.dropout,
                                               .bias = o.bias,
                                               .batch_first = o.batch_first,
                                           }));
  linear1 = register_module("linear1", std::make_shared<Linear>(o.d_model, o.dim_feedforward, o.bias));
  dropout = register_module("dropout", std::make_shared<Dropout>(o.dropout));
  linear2 = register_module("linear2", std::make_shared<Linear>(o.dim_feedforward, o.d_model, o.bias));
  auto norm = [&] { return std::make_shared<LayerNorm>(IntArrayRef(o.d_model), o.layer_norm_eps, true, o.bias); };
  norm1 = register_module("norm1", norm());
  norm2 = register_module("norm2", norm());
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(o.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(o.dropout));
}

TransformerEncoderLayerOptions TransformerEncoderLayer::options() const {
  return {.d_model = self_attn->embed_dim,
          .nhead = self_attn->num_heads,
          .dim_feedforward = linear1->out_features,
          .dropout = dropout->p,
          .activation = activation,
          .layer_norm_eps = norm1->eps,
          .batch_first = self_attn->batch_first,
          .norm_first = norm_first,
          .bias = linear1->bias.defined()};
}

Tensor TransformerEncoderLayer::forward(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask,
                                        bool is_causal) {
  detail::check_sequence("TransformerEncoderLayer", "src", src, self_attn->embed_dim, self_attn->batch_first);
  auto sa_block = [&](const Tensor& x) {
    auto [y, w] = self_attn->forward(x, x, x, src_key_padding_mask, /*need_weights=*/false, src_mask, true, is_causal);
    return dropout1->forward(y);
  };
  auto ff_block = [&](const Tensor& x) {
    Tensor h = linear1->forward(x);
    h = activation == "gelu" ? functional::gelu(h) : functional::relu(h);
    return dropout2->forward(linear2->forward(dropout->forward(h)));
  };
  Tensor x = src;
  if (norm_first) {
    x = x + sa_block(norm1->forward(x));
    x = x + ff_block(norm2->forward(x));
  } else {
    x = norm1->forward(x + sa_block(x));
    x = norm2->forward(x + ff_block(x));
  }
  return x;
}

}  // namespace kiln::nn
