#include "models/dlrm.h"

#include <vector>

#include "kiln/nn/activation.h"
#include "kiln/nn/embedding.h"
#include "kiln/nn/linear.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/shape.h"
#include "models/common.h"

namespace kiln::models {

namespace {

std::shared_ptr<nn::Sequential> mlp(const std::vector<int64_t>& widths, bool relu_last) {
  auto seq = std::make_shared<nn::Sequential>();
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    seq->push_back(std::make_shared<nn::Linear>(widths[i], widths[i + 1]));
    if (relu_last || i + 2 < widths.size()) seq->push_back(std::make_shared<nn::ReLU>());
  }
  return seq;
}

}  // namespace

DLRM::DLRM(int64_t n_tables, int64_t rows, int64_t d, int64_t dense)
    : Module("DLRM"), n_tables(n_tables), rows(rows), d(d), dense_features(dense) {
  KILN_CHECK(n_tables > 0 && rows > 0 && d > 0 && dense > 0, "DLRM: sizes must be positive, got n_tables=", n_tables,
             ", rows=", rows, ", d=", d, ", dense=", dense);
  emb = register_module("emb", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < n_tables; ++i) emb->push_back(std::make_shared<nn::EmbeddingBag>(rows, d, "sum"));
  bot = register_module("bot", mlp({dense, 512, 256, d}, /*relu_last=*/true));
  const int64_t n = n_tables + 1;
  top = register_module("top", mlp({d + n * (n - 1) / 2, 512, 256, 1}, /*relu_last=*/false));
  std::vector<int64_t> flat;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j) flat.push_back(i * n + j);
  pair_index_ = tensor<int64_t>(flat);
}

Tensor DLRM::forward(const Tensor& dense, const Tensor& sparse) {
  KILN_CHECK(dense.dim() == 2 && dense.size(1) == dense_features, "DLRM: expected dense [B, ", dense_features,
             "], got ", detail::sizes_str(dense));
  KILN_CHECK(
      sparse.dim() == 3 && sparse.size(0) == dense.size(0) && sparse.size(1) == n_tables && sparse.dtype() == kInt64,
      "DLRM: expected sparse [", dense.size(0), ", ", n_tables, ", bag] int64, got ", detail::sizes_str(sparse), " ",
      sparse.dtype());
  const SymInt B = dense.size(0);  // symbolic under dynamic shapes
  const int64_t n = n_tables + 1;
  Tensor x = bot->forward(dense);
  std::vector<Tensor> ys{x};
  for (int64_t i = 0; i < n_tables; ++i) ys.push_back(emb->at<nn::EmbeddingBag>(i)->forward(sparse.select(1, i)));
  Tensor z = stack(ys, 1);                                       // [B, n, d]
  Tensor inter = bmm(z, z.transpose(1, 2)).reshape({B, n * n});  // all pairwise dots
  if (pair_index_.device() != z.device()) pair_index_ = pair_index_.to(z.device());
  return top->forward(cat({x, inter.index_select(1, pair_index_)}, 1));
}

}  // namespace kiln::models
