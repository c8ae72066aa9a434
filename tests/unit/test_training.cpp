// End to end: a small MLP trained with autograd and in-place SGD learns a
// separable problem (the loss falls and accuracy rises), as in the demo.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "dispatch/dispatch.h"
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

TEST(Training, BatchNormTwoForwardsThenBackward) {
  // Like a GAN discriminator: two training passes share the running stats before one backward.
  manual_seed(2);
  Tensor rm = zeros({3}), rv = ones({3});
  Tensor w = ones({3}).requires_grad_(), b = zeros({3}).requires_grad_();
  Tensor x1 = randn({8, 3}), x2 = randn({8, 3}) + 1.0;
  Tensor y1 = batch_norm(x1, rm, rv, w, b, /*training=*/true);
  Tensor y2 = batch_norm(x2, rm, rv, w, b, /*training=*/true);
  ((y1 * y1).sum() + (y2 * x2).sum()).backward();
  EXPECT_TRUE(w.grad().defined());
  // Running mean after two updates with momentum 0.1: 0.9 * (0.1 * m1) + 0.1 * m2.
  Tensor m1 = x1.mean({0}), m2 = x2.mean({0});
  auto want = (m1 * 0.09 + m2 * 0.1).to_vector<double>();
  auto got = rm.to_vector<double>();
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(got[i], want[i], 1e-5);
}

// Note [Fused batch_norm backward]: a plain backward runs batch_norm's VJP as one
// _batch_norm_backward; with create_graph the op formula runs, gives the same gradients, and
// can be differentiated again.
TEST(Training, BatchNormBackwardIsOneFusedOpAndDoubleBackwardStillWorks) {
  manual_seed(3);
  const TensorOptions f64(kFloat64);
  Tensor x = (randn({4, 3, 5}, f64) * 2 + 1).requires_grad_(), w = randn({3}, f64).requires_grad_(),
         b = randn({3}, f64).requires_grad_();
  Tensor r = randn({4, 3, 5}, f64);
  for (bool training : {true, false}) {
    Tensor y = batch_norm(x, zeros({3}, f64), ones({3}, f64) * 2, w, b, training);
    std::vector<uint32_t> counts(kNumOps, 0);
    set_op_call_counts(&counts);
    std::vector<Tensor> g = autograd::grad({(y * r).sum()}, {x, w, b});
    set_op_call_counts(nullptr);
    EXPECT_EQ(counts[static_cast<size_t>(OpId::_batch_norm_backward)], 1u);
    Tensor y2 = batch_norm(x, zeros({3}, f64), ones({3}, f64) * 2, w, b, training);
    std::vector<Tensor> g2 = autograd::grad({(y2 * r).sum()}, {x, w, b}, {}, true, /*create_graph=*/true);
    for (size_t i = 0; i < 3; ++i) {
      if (i < 2) {
        EXPECT_TRUE(g2[i].requires_grad());  // the bias's, sum(r), depends on no input
      }
      EXPECT_LE((g2[i].detach() - g[i]).abs().max().item<double>(), 1e-10) << "input " << i;
    }
    std::vector<Tensor> gg = autograd::grad({(g2[0] * g2[0]).sum()}, {w});
    EXPECT_TRUE(gg[0].defined());
  }
}

// Note [Fused norm and activation backward]: a plain backward runs the VJPs of layer_norm,
// softmax, log_softmax and gelu as one fused op each; with create_graph the op formulas run,
// give the same gradients, and can be differentiated again.
TEST(Training, NormAndActivationBackwardAreOneFusedOpAndDoubleBackwardStillWorks) {
  manual_seed(4);
  const TensorOptions f64(kFloat64);
  Tensor x = (randn({4, 6}, f64) * 2 + 1).requires_grad_(), w = randn({6}, f64).requires_grad_(),
         b = randn({6}, f64).requires_grad_();
  Tensor r = randn({4, 6}, f64);
  struct Case {
    const char* name;
    OpId fused;
    std::function<Tensor()> f;
  };
  const std::vector<Case> cases = {
      {"layer_norm", OpId::_layer_norm_backward, [&] { return layer_norm(x, {6}, w, b); }},
      {"softmax", OpId::_softmax_backward_data, [&] { return softmax(x * w, 1); }},
      {"log_softmax", OpId::_softmax_backward_data, [&] { return log_softmax(x * w, 0); }},
      {"gelu", OpId::_gelu_backward, [&] { return gelu(x * w, "none"); }},
      {"gelu tanh", OpId::_gelu_backward, [&] { return gelu(x * w, "tanh"); }},
  };
  for (const Case& c : cases) {
    Tensor y = c.f();
    std::vector<uint32_t> counts(kNumOps, 0);
    set_op_call_counts(&counts);
    std::vector<Tensor> g = autograd::grad({(y * r).sum()}, {x, w});
    set_op_call_counts(nullptr);
    EXPECT_EQ(counts[static_cast<size_t>(c.fused)], 1u) << c.name;
    std::vector<Tensor> g2 = autograd::grad({(c.f() * r).sum()}, {x, w}, {}, true, /*create_graph=*/true);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_TRUE(g2[i].requires_grad()) << c.name << " input " << i;
      EXPECT_LE((g2[i].detach() - g[i]).abs().max().item<double>(), 1e-10) << c.name << " input " << i;
    }
    std::vector<Tensor> gg = autograd::grad({(g2[0] * g2[0]).sum()}, {w});
    EXPECT_TRUE(gg[0].defined()) << c.name;
    EXPECT_GT(gg[0].abs().sum().item<double>(), 0.0) << c.name;
  }
}
