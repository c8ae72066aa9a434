// Embedding and EmbeddingBag: weight ~ N(0, 1) with the padding row zeroed, as torch.
#include "kiln/nn/embedding.h"

#include "kiln/autograd.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/init.h"
#include "kiln/ops/creation.h"
#include "nn/nn_util.h"

namespace kiln::nn {

namespace {

// torch's rule: padding_idx must lie in [-num_embeddings, num_embeddings); negatives count from the end.
std::optional<int64_t> normalize_padding_idx(const char* who, std::optional<int64_t> padding_idx,
                                             int64_t num_embeddings) {
  if (!padding_idx) return std::nullopt;
  int64_t p = *padding_idx;
  KILN_CHECK(p >= -num_embeddings && p < num_embeddings, who, ": padding_idx must be within num_embeddings (",
             num_embeddings, "), got ", p);
  return p < 0 ? p + num_embeddings : p;
}

void zero_padding_row(Tensor& weight, std::optional<int64_t> padding_idx) {
  if (!padding_idx) return;
  NoGradGuard no_grad;
  weight.select(0, *padding_idx).zero_();
}

}  // namespace

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx,
                     std::optional<double> max_norm, double norm_type)
    : Module("Embedding"),
      num_embeddings(num_embeddings),
      embedding_dim(embedding_dim),
      padding_idx(normalize_padding_idx("Embedding", padding_idx, num_embeddings)),
      max_norm(max_norm),
      norm_type(norm_type) {
  KILN_CHECK(num_embeddings >= 0 && embedding_dim >= 0,
             "Embedding: expected non-negative sizes, got num_embeddings=", num_embeddings,
             " embedding_dim=", embedding_dim);
  weight = register_parameter("weight", empty({num_embeddings, embedding_dim}));
  reset_parameters();
}

Embedding::Embedding(const Tensor& weight, bool freeze, std::optional<int64_t> padding_idx,
                     std::optional<double> max_norm, double norm_type)
    : Module("Embedding"),
      num_embeddings(weight.sizes()[0]),
      embedding_dim(weight.sizes()[1]),
      padding_idx(normalize_padding_idx("Embedding::from_pretrained", padding_idx, weight.sizes()[0])),
      max_norm(max_norm),
      norm_type(norm_type) {
  this->weight = register_parameter("weight", weight.detach(), !freeze);
}

std::shared_ptr<Embedding> Embedding::from_pretrained(const Tensor& embeddings, bool freeze,
                                                      std::optional<int64_t> padding_idx,
                                                      std::optional<double> max_norm, double norm_type) {
  KILN_CHECK(embeddings.defined() && embeddings.dim() == 2,
             "Embedding::from_pretrained: embeddings must be a 2-D tensor, got ",
             embeddings.defined() ? std::to_string(embeddings.dim()) + "-D" : std::string("an undefined tensor"));
  KILN_CHECK(embeddings.is_floating_point(), "Embedding::from_pretrained: expected floating embeddings, got dtype ",
             embeddings.dtype());
  return std::shared_ptr<Embedding>(new Embedding(embeddings, freeze, padding_idx, max_norm, norm_type));
}

void Embedding::reset_parameters() {
  init::normal_(weight);
  zero_padding_row(weight, padding_idx);
}

Tensor Embedding::forward(const Tensor& indices) {
  return functional::embedding(indices, weight, padding_idx, max_norm, norm_type);
}

std::string Embedding::extra_repr() const {
  std::string s = std::to_string(num_embeddings) + ", " + std::to_string(embedding_dim);
  if (padding_idx) s += ", padding_idx=" + std::to_string(*padding_idx);
  if (max_norm) s += ", max_norm=" + detail::py_float(*max_norm);
  if (norm_type != 2.0) s += ", norm_type=" + detail::py_float(norm_type);
  return s;
}

EmbeddingBag::EmbeddingBag(int64_t num_embeddings, int64_t embedding_dim, const std::string& mode,
                           bool include_last_offset, std::optional<int64_t> padding_idx)
    : Module("EmbeddingBag"),
      num_embeddings(num_embeddings),
      embedding_dim(embedding_dim),
      mode(mode),
      include_last_offset(include_last_offset),
      padding_idx(normalize_padding_idx("EmbeddingBag", padding_idx, num_embeddings)) {
  KILN_CHECK(num_embeddings >= 0 && embedding_dim >= 0,
             "EmbeddingBag: expected non-negative sizes, got num_embeddings=", num_embeddings,
             " embedding_dim=", embedding_dim);
  KILN_CHECK(mode == "sum" || mode == "mean" || mode == "max",
             "EmbeddingBag: mode must be 'sum', 'mean' or 'max', got '", mode, "'");
  weight = register_parameter("weight", empty({num_embeddings, embedding_dim}));
  reset_parameters();
}

void EmbeddingBag::reset_parameters() {
  init::normal_(weight);
  zero_padding_row(weight, padding_idx);
}

Tensor EmbeddingBag::forward(const Tensor& input, const Tensor& offsets, const Tensor& per_sample_weights) {
  return functional::embedding_bag(input, weight, offsets, mode, per_sample_weights, include_last_offset, padding_idx);
}

std::string EmbeddingBag::extra_repr() const {
  std::string s = std::to_string(num_embeddings) + ", " + std::to_string(embedding_dim) + ", mode='" + mode + "'";
  if (padding_idx) s += ", padding_idx=" + std::to_string(*padding_idx);
  return s;
}

}  // namespace kiln::nn
