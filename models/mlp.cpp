#include "models/mlp.h"

#include "kiln/nn/activation.h"
#include "kiln/nn/linear.h"

namespace kiln::models {

MLP::MLP(int64_t d_in, int64_t d, int64_t n, int64_t d_out) : Module("MLP") {
  KILN_CHECK(d_in > 0 && d > 0 && n >= 0 && d_out > 0, "MLP: sizes must be positive, got d_in=", d_in, ", d=", d,
             ", n=", n, ", d_out=", d_out);
  net = register_module("net", std::make_shared<nn::Sequential>());
  int64_t width = d_in;
  for (int64_t i = 0; i < n; ++i) {
    net->push_back(std::make_shared<nn::Linear>(width, d));
    net->push_back(std::make_shared<nn::ReLU>());
    width = d;
  }
  net->push_back(std::make_shared<nn::Linear>(width, d_out));
}

Tensor MLP::forward(const Tensor& x) { return net->forward(x); }

}  // namespace kiln::models
