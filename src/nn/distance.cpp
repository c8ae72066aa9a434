// CosineSimilarity and PairwiseDistance over the distance functions (src/ops/distance_compose.cpp).
#include "kiln/nn/distance.h"

#include "kiln/ops/nn.h"

namespace kiln::nn {

Tensor CosineSimilarity::forward(const Tensor& x1, const Tensor& x2) { return cosine_similarity(x1, x2, dim, eps); }

Tensor PairwiseDistance::forward(const Tensor& x1, const Tensor& x2) {
  return pairwise_distance(x1, x2, norm, eps, keepdim);
}

}  // namespace kiln::nn
