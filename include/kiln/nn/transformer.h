// TransformerEncoder, TransformerDecoderLayer, TransformerDecoder and Transformer, with torch's
// parameter names and state_dict keys (layers.0.self_attn.in_proj_weight, ..., norm.weight;
// encoder.*, decoder.* in Transformer). TransformerEncoderLayer is in attention.h.
//
//   auto layer = std::make_shared<nn::TransformerEncoderLayer>(
//       nn::TransformerEncoderLayerOptions{.d_model = 256, .nhead = 4, .batch_first = true});
//   nn::TransformerEncoder encoder(*layer, 6, std::make_shared<nn::LayerNorm>(IntArrayRef(256)));
//
// Note [Transformer layer copies]: torch's TransformerEncoder/Decoder deep-copy the layer they are
// given num_layers times. kiln modules are not copyable, so each copy is built from the layer's
// options() (read back from its members) and then takes its parameter values, requires_grad
// flags, dtype, device and train/eval mode. The given layer itself is not registered, as torch.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "kiln/nn/attention.h"
#include "kiln/nn/container.h"
#include "kiln/tensor_options.h"

namespace kiln::nn {

// torch's constructor arguments, in torch's order (activation: "relu" or "gelu").
// The decoder layer takes the encoder layer's options (torch's two layers share their arguments).
using TransformerDecoderLayerOptions = TransformerEncoderLayerOptions;

// Self-attention on tgt, attention from tgt to memory, then the feed-forward block, each with a
// residual and a LayerNorm (before the block when norm_first, after it otherwise), as torch.
class TransformerDecoderLayer : public Module {
 public:
  explicit TransformerDecoderLayer(const TransformerDecoderLayerOptions& options);
  TransformerDecoderLayer(int64_t d_model, int64_t nhead, int64_t dim_feedforward = 2048, double dropout = 0.1,
                          const std::string& activation = "relu", double layer_norm_eps = 1e-5,
                          bool batch_first = false, bool norm_first = false, bool bias = true)
      : TransformerDecoderLayer(TransformerDecoderLayerOptions{d_model, nhead, dim_feedforward, dropout, activation,
                                                               layer_norm_eps, batch_first, norm_first, bias}) {}
  TransformerDecoderLayerOptions options() const;  // read back from the members (Note [Transformer layer copies])
  // tgt [T, N, E], memory [S, N, E] ([N, T, E], [N, S, E] when batch_first), or unbatched [T, E], [S, E].
  // Masks bool (true = not allowed) or float (added), as MultiheadAttention.
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = {}, const Tensor& memory_mask = {},
                 const Tensor& tgt_key_padding_mask = {}, const Tensor& memory_key_padding_mask = {},
                 bool tgt_is_causal = false, bool memory_is_causal = false);
  Tensor operator()(const Tensor& tgt, const Tensor& memory) { return forward(tgt, memory); }
  std::string activation;
  bool norm_first;
  std::shared_ptr<MultiheadAttention> self_attn, multihead_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2, dropout3;
  std::shared_ptr<LayerNorm> norm1, norm2, norm3;
};

// enable_nested_tensor is accepted and ignored: kiln always computes the dense result (torch's
// nested fast path, taken in eval mode without grad, writes 0 at padded positions instead).
struct TransformerEncoderOptions {
  std::shared_ptr<TransformerEncoderLayer> encoder_layer = nullptr;
  int64_t num_layers = 0;
  std::shared_ptr<LayerNorm> norm = nullptr;
  bool enable_nested_tensor = true;
};

class TransformerEncoder : public Module {
 public:
  explicit TransformerEncoder(const TransformerEncoderOptions& options);
  // num_layers copies of encoder_layer (Note [Transformer layer copies]), then `norm` when given.
  TransformerEncoder(const TransformerEncoderLayer& encoder_layer, int64_t num_layers,
                     std::shared_ptr<LayerNorm> norm = nullptr, bool enable_nested_tensor = true);
  TransformerEncoder(const std::shared_ptr<TransformerEncoderLayer>& encoder_layer, int64_t num_layers,
                     std::shared_ptr<LayerNorm> norm = nullptr, bool enable_nested_tensor = true)
      : TransformerEncoder(
            TransformerEncoderOptions{encoder_layer, num_layers, std::move(norm), enable_nested_tensor}) {}
  Tensor forward(const Tensor& src) override { return forward(src, Tensor()); }
  Tensor forward(const Tensor& src, const Tensor& mask, const Tensor& src_key_padding_mask = {},
                 bool is_causal = false);
  int64_t num_layers;
  bool enable_nested_tensor;
  std::shared_ptr<ModuleList> layers;  // of TransformerEncoderLayer
  std::shared_ptr<LayerNorm> norm;     // null without a final norm
};

struct TransformerDecoderOptions {
  std::shared_ptr<TransformerDecoderLayer> decoder_layer = nullptr;
  int64_t num_layers = 0;
  std::shared_ptr<LayerNorm> norm = nullptr;
};

class TransformerDecoder : public Module {
 public:
  explicit TransformerDecoder(const TransformerDecoderOptions& options);
  // num_layers copies of decoder_layer (Note [Transformer layer copies]), then `norm` when given.
  TransformerDecoder(const TransformerDecoderLayer& decoder_layer, int64_t num_layers,
                     std::shared_ptr<LayerNorm> norm = nullptr);
  TransformerDecoder(const std::shared_ptr<TransformerDecoderLayer>& decoder_layer, int64_t num_layers,
                     std::shared_ptr<LayerNorm> norm = nullptr)
      : TransformerDecoder(TransformerDecoderOptions{decoder_layer, num_layers, std::move(norm)}) {}
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = {}, const Tensor& memory_mask = {},
                 const Tensor& tgt_key_padding_mask = {}, const Tensor& memory_key_padding_mask = {},
                 bool tgt_is_causal = false, bool memory_is_causal = false);
  Tensor operator()(const Tensor& tgt, const Tensor& memory) { return forward(tgt, memory); }
  int64_t num_layers;
  std::shared_ptr<ModuleList> layers;  // of TransformerDecoderLayer
  std::shared_ptr<LayerNorm> norm;     // null without a final norm
};

// torch's constructor arguments, in torch's order. custom_encoder/custom_decoder replace the
// default stacks (whose final norms are LayerNorm(d_model, layer_norm_eps)).
struct TransformerOptions {
  int64_t d_model = 512;
  int64_t nhead = 8;
  int64_t num_encoder_layers = 6;
  int64_t num_decoder_layers = 6;
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  std::string activation = "relu";
  std::shared_ptr<TransformerEncoder> custom_encoder = nullptr;
  std::shared_ptr<TransformerDecoder> custom_decoder = nullptr;
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  bool norm_first = false;
  bool bias = true;
};

class Transformer : public Module {
 public:
  explicit Transformer(const TransformerOptions& options);
  explicit Transformer(int64_t d_model = 512, int64_t nhead = 8, int64_t num_encoder_layers = 6,
                       int64_t num_decoder_layers = 6, int64_t dim_feedforward = 2048, double dropout = 0.1,
                       const std::string& activation = "relu",
                       std::shared_ptr<TransformerEncoder> custom_encoder = nullptr,
                       std::shared_ptr<TransformerDecoder> custom_decoder = nullptr, double layer_norm_eps = 1e-5,
                       bool batch_first = false, bool norm_first = false, bool bias = true)
      : Transformer(TransformerOptions{d_model, nhead, num_encoder_layers, num_decoder_layers, dim_feedforward, dropout,
                                       activation, std::move(custom_encoder), std::move(custom_decoder), layer_norm_eps,
                                       batch_first, norm_first, bias}) {}
  // src [S, N, E], tgt [T, N, E] ([N, S, E], [N, T, E] when batch_first) or unbatched; returns [T, N, E].
  Tensor forward(const Tensor& src, const Tensor& tgt, const Tensor& src_mask = {}, const Tensor& tgt_mask = {},
                 const Tensor& memory_mask = {}, const Tensor& src_key_padding_mask = {},
                 const Tensor& tgt_key_padding_mask = {}, const Tensor& memory_key_padding_mask = {},
                 bool src_is_causal = false, bool tgt_is_causal = false, bool memory_is_causal = false);
  Tensor operator()(const Tensor& src, const Tensor& tgt) { return forward(src, tgt); }
  // [sz, sz] float: -inf above the diagonal, 0 elsewhere (torch.triu(full(-inf), diagonal=1)).
  static Tensor generate_square_subsequent_mask(int64_t sz, const TensorOptions& options = {});
  int64_t d_model, nhead;
  bool batch_first;
  std::shared_ptr<TransformerEncoder> encoder;
  std::shared_ptr<TransformerDecoder> decoder;
};

}  // namespace kiln::nn
