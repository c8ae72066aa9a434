// CosineSimilarity and PairwiseDistance: forward(x1, x2) over kiln::cosine_similarity / pairwise_distance.
#pragma once
#include <cstdint>
#include <string>

#include "kiln/nn/module.h"

namespace kiln::nn {

class CosineSimilarity : public Module {
 public:
  explicit CosineSimilarity(int64_t dim = 1, double eps = 1e-8) : Module("CosineSimilarity"), dim(dim), eps(eps) {}
  Tensor forward(const Tensor& x1, const Tensor& x2);
  Tensor operator()(const Tensor& x1, const Tensor& x2) { return forward(x1, x2); }
  int64_t dim;
  double eps;

 protected:
  using Module::forward;
};

class PairwiseDistance : public Module {
 public:
  explicit PairwiseDistance(double p = 2.0, double eps = 1e-6, bool keepdim = false)
      : Module("PairwiseDistance"), norm(p), eps(eps), keepdim(keepdim) {}
  Tensor forward(const Tensor& x1, const Tensor& x2);
  Tensor operator()(const Tensor& x1, const Tensor& x2) { return forward(x1, x2); }
  double norm, eps;  // torch names p `norm`
  bool keepdim;

 protected:
  using Module::forward;
};

}  // namespace kiln::nn
