// The zoo's DLRM (torch_zoo.py's DLRM): a bottom MLP on dense features, one sum-EmbeddingBag per
// sparse feature, the pairwise dot products of those n_tables + 1 vectors (upper triangle, no
// diagonal), and a top MLP to one logit. Keys: emb.{i}.weight, bot.{0,2,4}.*, top.{0,2,4}.*.
#pragma once
#include <cstdint>
#include <memory>

#include "kiln/nn/container.h"

namespace kiln::models {

class DLRM : public nn::Module {
 public:
  explicit DLRM(int64_t n_tables = 8, int64_t rows = 100000, int64_t d = 64, int64_t dense = 13);
  // dense [B, dense] float, sparse [B, n_tables, bag] int64 (bag ids per table) → logits [B, 1].
  Tensor forward(const Tensor& dense, const Tensor& sparse);
  using Module::forward;  // the single-tensor form throws: DLRM takes two inputs
  int64_t n_tables, rows, d, dense_features;
  std::shared_ptr<nn::ModuleList> emb;
  std::shared_ptr<nn::Sequential> bot, top;

 private:
  Tensor pair_index_;  // flat positions i * n + j of the pairs i < j, in torch.triu_indices order
};

}  // namespace kiln::models
