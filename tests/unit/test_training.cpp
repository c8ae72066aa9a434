// End to end: a small MLP trained with autograd and in-place SGD learns a
// separable problem (the loss falls and accuracy rises), as in the demo.
#include <gtest/gtest.h>

#include "kiln/kiln.h"

using namespace kiln;

TEST(Training, MlpLossFalls) {
  manual_seed(1);
  Tensor x = randn({128, 4});
  Tensor y = (x.select(1, 0) + x.select(1, 1) * 0.5 > 0).to(kInt64);  // a linear rule
  Tensor w1 = (randn({16, 4}) * 0.5).requires_grad_(), b1 = zeros({16}).requires_grad_();
  Tensor w2 = (randn({2, 16}) * 0.5).requires_grad_(), b2 = zeros({2}).requires_grad_();
  std::vector<Tensor> params = {w1, b1, w2, b2};
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    Tensor loss = cross_entropy(linear(relu(linear(x, w1, b1)), w2, b2), y);
    loss.backward();
    NoGradGuard no_grad;
    for (Tensor& p : params) {
      p.sub_(p.grad(), 0.5);
      p.mutable_grad().zero_();
    }
    (step == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, 0.5 * first);
  Tensor pred = argmax(linear(relu(linear(x, w1, b1)), w2, b2), 1);
  EXPECT_GT((pred == y).to(kFloat32).mean().item<double>(), 0.9);
}
