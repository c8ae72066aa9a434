// Embedding and EmbeddingBag; weight ~ N(0, 1), the padding_idx row zeroed.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "kiln/nn/module.h"

namespace kiln::nn {

class Embedding : public Module {
 public:
  // max_norm: the rows looked up are renormalised in place to at most max_norm (norm_type-norm), as torch.
  Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx = std::nullopt,
            std::optional<double> max_norm = std::nullopt, double norm_type = 2.0);
  // torch's Embedding.from_pretrained: the weight shares `embeddings`' data (no init drawn);
  // freeze=true leaves it without requires_grad.
  static std::shared_ptr<Embedding> from_pretrained(const Tensor& embeddings, bool freeze = true,
                                                    std::optional<int64_t> padding_idx = std::nullopt,
                                                    std::optional<double> max_norm = std::nullopt,
                                                    double norm_type = 2.0);
  Tensor forward(const Tensor& indices) override;
  std::string extra_repr() const override;
  void reset_parameters();
  int64_t num_embeddings, embedding_dim;
  std::optional<int64_t> padding_idx;  // given negative, counts from the end; stored normalised, as torch
  std::optional<double> max_norm;
  double norm_type;
  Tensor weight;  // [num_embeddings, embedding_dim]

 private:
  Embedding(const Tensor& weight, bool freeze, std::optional<int64_t> padding_idx, std::optional<double> max_norm,
            double norm_type);
};

// mode "sum", "mean" or "max". forward(input [B, bag]) or forward(input [N], offsets [B]).
class EmbeddingBag : public Module {
 public:
  EmbeddingBag(int64_t num_embeddings, int64_t embedding_dim, const std::string& mode = "mean",
               bool include_last_offset = false, std::optional<int64_t> padding_idx = std::nullopt);
  Tensor forward(const Tensor& input) override { return forward(input, Tensor()); }
  Tensor forward(const Tensor& input, const Tensor& offsets, const Tensor& per_sample_weights = {});
  std::string extra_repr() const override;
  void reset_parameters();
  int64_t num_embeddings, embedding_dim;
  std::string mode;
  bool include_last_offset;
  std::optional<int64_t> padding_idx;
  Tensor weight;
};

}  // namespace kiln::nn
