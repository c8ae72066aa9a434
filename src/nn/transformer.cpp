// TransformerEncoder, TransformerDecoderLayer, TransformerDecoder and Transformer, with torch's
// parameter names, registration order and default init.
#include "kiln/nn/transformer.h"

#include <limits>

#include "kiln/nn/functional.h"
#include "kiln/nn/init.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/shape.h"
#include "nn/nn_util.h"

namespace kiln::nn {
namespace {

// Note [Transformer layer copies]: a layer built from the original's options that then takes its
// values, requires_grad flags, dtype, device and mode — what torch's copy.deepcopy gives.
template <class Layer>
std::shared_ptr<Layer> copy_layer(const Layer& layer) {
  auto copy = std::make_shared<Layer>(layer.options());
  auto src = layer.named_parameters(), dst = copy->named_parameters();
  KILN_CHECK(src.size() == dst.size(), layer.type_name(),
             ": cannot copy a layer whose parameters were replaced after construction");
  if (!src.empty()) copy->to(src[0].second.device(), src[0].second.dtype());
  copy->load_state_dict(layer.state_dict(), /*strict=*/true);
  for (size_t i = 0; i < src.size(); ++i) dst[i].second.requires_grad_(src[i].second.requires_grad());
  copy->train(layer.is_training());
  return copy;
}

void check_num_layers(const char* who, int64_t num_layers) {
  KILN_CHECK(num_layers >= 0, who, ": num_layers must be non-negative, got ", num_layers);
}

template <class Layer>
const Layer& given(const std::shared_ptr<Layer>& layer, const char* who, const char* name) {
  KILN_CHECK(layer, who, ": ", name, " must be given");
  return *layer;
}

Tensor activate(const std::string& activation, const Tensor& x) {
  return activation == "gelu" ? functional::gelu(x) : functional::relu(x);
}

}  // namespace

// ---- TransformerDecoderLayer ----

TransformerDecoderLayer::TransformerDecoderLayer(const TransformerDecoderLayerOptions& o)
    : Module("TransformerDecoderLayer"), activation(o.activation), norm_first(o.norm_first) {
  detail::check_transformer_dims("TransformerDecoderLayer", o.d_model, o.nhead, o.dim_feedforward, o.dropout);
  KILN_CHECK(activation == "relu" || activation == "gelu",
             "TransformerDecoderLayer: activation should be relu/gelu, not ", activation);
  MultiheadAttentionOptions attn{
      .embed_dim = o.d_model, .num_heads = o.nhead, .dropout = o.dropout, .bias = o.bias, .batch_first = o.batch_first};
  // torch's registration order: self_attn, multihead_attn, linear1, dropout, linear2, norm1..3, dropout1..3.
  self_attn = register_module("self_attn", std::make_shared<MultiheadAttention>(attn));
  multihead_attn = register_module("multihead_attn", std::make_shared<MultiheadAttention>(attn));
  linear1 = register_module("linear1", std::make_shared<Linear>(o.d_model, o.dim_feedforward, o.bias));
  dropout = register_module("dropout", std::make_shared<Dropout>(o.dropout));
  linear2 = register_module("linear2", std::make_shared<Linear>(o.dim_feedforward, o.d_model, o.bias));
  auto norm = [&] { return std::make_shared<LayerNorm>(IntArrayRef(o.d_model), o.layer_norm_eps, true, o.bias); };
  norm1 = register_module("norm1", norm());
  norm2 = register_module("norm2", norm());
  norm3 = register_module("norm3", norm());
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(o.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(o.dropout));
  dropout3 = register_module("dropout3", std::make_shared<Dropout>(o.dropout));
}

TransformerDecoderLayerOptions TransformerDecoderLayer::options() const {
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

Tensor TransformerDecoderLayer::forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask,
                                        const Tensor& memory_mask, const Tensor& tgt_key_padding_mask,
                                        const Tensor& memory_key_padding_mask, bool tgt_is_causal,
                                        bool memory_is_causal) {
  const char* who = "TransformerDecoderLayer";
  int64_t d_model = self_attn->embed_dim;
  detail::check_sequence(who, "tgt", tgt, d_model, self_attn->batch_first);
  detail::check_sequence(who, "memory", memory, d_model, self_attn->batch_first);
  KILN_CHECK(tgt.dim() == memory.dim(), who, ": tgt and memory must both be batched (3-D) or unbatched (2-D), got ",
             shape_str(tgt.sizes()), " and ", shape_str(memory.sizes()));
  auto sa_block = [&](const Tensor& x) {
    auto [y, w] =
        self_attn->forward(x, x, x, tgt_key_padding_mask, /*need_weights=*/false, tgt_mask, true, tgt_is_causal);
    return dropout1->forward(y);
  };
  auto mha_block = [&](const Tensor& x) {
    auto [y, w] = multihead_attn->forward(x, memory, memory, memory_key_padding_mask, /*need_weights=*/false,
                                          memory_mask, true, memory_is_causal);
    return dropout2->forward(y);
  };
  auto ff_block = [&](const Tensor& x) {
    Tensor h = activate(activation, linear1->forward(x));
    return dropout3->forward(linear2->forward(dropout->forward(h)));
  };
  Tensor x = tgt;
  if (norm_first) {
    x = x + sa_block(norm1->forward(x));
    x = x + mha_block(norm2->forward(x));
    x = x + ff_block(norm3->forward(x));
  } else {
    x = norm1->forward(x + sa_block(x));
    x = norm2->forward(x + mha_block(x));
    x = norm3->forward(x + ff_block(x));
  }
  return x;
}

// ---- TransformerEncoder ----

TransformerEncoder::TransformerEncoder(const TransformerEncoderOptions& o)
    : TransformerEncoder(given(o.encoder_layer, "TransformerEncoder", "encoder_layer"), o.num_layers, o.norm,
                         o.enable_nested_tensor) {}

TransformerEncoder::TransformerEncoder(const TransformerEncoderLayer& encoder_layer, int64_t num_layers,
                                       std::shared_ptr<LayerNorm> norm, bool enable_nested_tensor)
    : Module("TransformerEncoder"), num_layers(num_layers), enable_nested_tensor(enable_nested_tensor) {
  check_num_layers("TransformerEncoder", num_layers);
  // torch's order: layers, then norm (registered only when given).
  layers = register_module("layers", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < num_layers; ++i) layers->push_back(copy_layer(encoder_layer));
  this->norm = std::move(norm);
  if (this->norm) register_module("norm", this->norm);
}

Tensor TransformerEncoder::forward(const Tensor& src, const Tensor& mask, const Tensor& src_key_padding_mask,
                                   bool is_causal) {
  if (layers->size() > 0) {
    auto first = layers->at<TransformerEncoderLayer>(0);
    detail::check_sequence("TransformerEncoder", "src", src, first->self_attn->embed_dim,
                           first->self_attn->batch_first);
  }
  Tensor x = src;
  for (size_t i = 0; i < layers->size(); ++i)
    x = layers->at<TransformerEncoderLayer>(i)->forward(x, mask, src_key_padding_mask, is_causal);
  return norm ? norm->forward(x) : x;
}

// ---- TransformerDecoder ----

TransformerDecoder::TransformerDecoder(const TransformerDecoderOptions& o)
    : TransformerDecoder(given(o.decoder_layer, "TransformerDecoder", "decoder_layer"), o.num_layers, o.norm) {}

TransformerDecoder::TransformerDecoder(const TransformerDecoderLayer& decoder_layer, int64_t num_layers,
                                       std::shared_ptr<LayerNorm> norm)
    : Module("TransformerDecoder"), num_layers(num_layers) {
  check_num_layers("TransformerDecoder", num_layers);
  layers = register_module("layers", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < num_layers; ++i) layers->push_back(copy_layer(decoder_layer));
  this->norm = std::move(norm);
  if (this->norm) register_module("norm", this->norm);
}

Tensor TransformerDecoder::forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask,
                                   const Tensor& memory_mask, const Tensor& tgt_key_padding_mask,
                                   const Tensor& memory_key_padding_mask, bool tgt_is_causal, bool memory_is_causal) {
  if (layers->size() > 0) {
    auto first = layers->at<TransformerDecoderLayer>(0);
    int64_t d_model = first->self_attn->embed_dim;
    detail::check_sequence("TransformerDecoder", "tgt", tgt, d_model, first->self_attn->batch_first);
    detail::check_sequence("TransformerDecoder", "memory", memory, d_model, first->self_attn->batch_first);
  }
  Tensor x = tgt;
  for (size_t i = 0; i < layers->size(); ++i)
    x = layers->at<TransformerDecoderLayer>(i)->forward(x, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
                                                        memory_key_padding_mask, tgt_is_causal, memory_is_causal);
  return norm ? norm->forward(x) : x;
}

// ---- Transformer ----

Transformer::Transformer(const TransformerOptions& o)
    : Module("Transformer"), d_model(o.d_model), nhead(o.nhead), batch_first(o.batch_first) {
  detail::check_transformer_dims("Transformer", o.d_model, o.nhead, o.dim_feedforward, o.dropout);
  auto final_norm = [&] { return std::make_shared<LayerNorm>(IntArrayRef(o.d_model), o.layer_norm_eps, true, o.bias); };
  const TransformerEncoderLayerOptions layer_options{.d_model = o.d_model,
                                                     .nhead = o.nhead,
                                                     .dim_feedforward = o.dim_feedforward,
                                                     .dropout = o.dropout,
                                                     .activation = o.activation,
                                                     .layer_norm_eps = o.layer_norm_eps,
                                                     .batch_first = o.batch_first,
                                                     .norm_first = o.norm_first,
                                                     .bias = o.bias};
  if (o.custom_encoder) {
    encoder = o.custom_encoder;
  } else {
    TransformerEncoderLayer layer(layer_options);
    encoder = std::make_shared<TransformerEncoder>(layer, o.num_encoder_layers, final_norm());
  }
  if (o.custom_decoder) {
    decoder = o.custom_decoder;
  } else {
    TransformerDecoderLayer layer(layer_options);
    decoder = std::make_shared<TransformerDecoder>(layer, o.num_decoder_layers, final_norm());
  }
  register_module("encoder", encoder);
  register_module("decoder", decoder);
  // torch's _reset_parameters: xavier_uniform_ on every parameter of more than one dimension
  // (custom stacks included).
  for (Tensor& p : parameters())
    if (p.dim() > 1) init::xavier_uniform_(p);
}

Tensor Transformer::forward(const Tensor& src, const Tensor& tgt, const Tensor& src_mask, const Tensor& tgt_mask,
                            const Tensor& memory_mask, const Tensor& src_key_padding_mask,
                            const Tensor& tgt_key_padding_mask, const Tensor& memory_key_padding_mask,
                            bool src_is_causal, bool tgt_is_causal, bool memory_is_causal) {
  KILN_CHECK(src.defined() && tgt.defined(), "Transformer: src and tgt must be defined");
  KILN_CHECK(src.dim() == tgt.dim(), "Transformer: src and tgt must both be batched (3-D) or unbatched (2-D), got ",
             shape_str(src.sizes()), " and ", shape_str(tgt.sizes()));
  int64_t batch_dim = batch_first ? 0 : 1;
  KILN_CHECK(src.dim() != 3 || src.sizes()[batch_dim] == tgt.sizes()[batch_dim],
             "Transformer: the batch number of src and tgt must be equal, got src ", shape_str(src.sizes()),
             " and tgt ", shape_str(tgt.sizes()), " (batch_first=", detail::py_bool(batch_first), ")");
  KILN_CHECK(src.dim() > 0 && src.sizes().back() == d_model && tgt.sizes().back() == d_model,
             "Transformer: the feature number of src and tgt must be equal to d_model (", d_model, "), got src ",
             shape_str(src.sizes()), " and tgt ", shape_str(tgt.sizes()));
  Tensor memory = encoder->forward(src, src_mask, src_key_padding_mask, src_is_causal);
  return decoder->forward(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
                          tgt_is_causal, memory_is_causal);
}

Tensor Transformer::generate_square_subsequent_mask(int64_t sz, const TensorOptions& options) {
  KILN_CHECK(sz >= 0, "Transformer.generate_square_subsequent_mask: sz must be non-negative, got ", sz);
  return triu(full({sz, sz}, -std::numeric_limits<double>::infinity(), options), 1);
}

}  // namespace kiln::nn
