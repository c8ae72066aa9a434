// End to end: a small MLP trained with autograd and in-place SGD learns a
// separable problem (the loss falls and accuracy rises), as in the demo.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "dispatch/dispatch.h"
#include "kiln/kiln.h"
#include "tests/unit/expect_error.h"

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

// Note [Split's derivative]: the gradient of split, chunk and unbind is one cat (stack) of the
// pieces' gradients, not one zero-padded gradient per piece summed by the engine.
TEST(Training, SplitBackwardIsOneCatWithoutPads) {
  manual_seed(5);
  const TensorOptions f64(kFloat64);
  Tensor x = randn({4, 9}, f64).requires_grad_();
  Tensor r = randn({4, 3}, f64);
  struct Case {
    const char* name;
    OpId joined;
    std::function<std::vector<Tensor>()> pieces;
  };
  const std::vector<Case> cases = {
      {"split", OpId::cat, [&] { return (x * 2).split(3, 1); }},
      {"chunk", OpId::cat, [&] { return (x * 2).chunk(3, -1); }},
      {"unbind", OpId::stack,
       [&] {
         return (x * 2).view({4, 3, 3}).unbind(2);
       }},
  };
  for (const Case& c : cases) {
    std::vector<Tensor> p = c.pieces();
    ASSERT_EQ(p.size(), 3u) << c.name;
    Tensor loss = (p[0] * p[1] * r + p[2]).sum();
    std::vector<uint32_t> counts(kNumOps, 0);
    set_op_call_counts(&counts);
    std::vector<Tensor> g = autograd::grad({loss}, {x});
    set_op_call_counts(nullptr);
    EXPECT_EQ(counts[static_cast<size_t>(c.joined)], 1u) << c.name;
    EXPECT_EQ(counts[static_cast<size_t>(OpId::pad)], 0u) << c.name;
    EXPECT_EQ(counts[static_cast<size_t>(OpId::slice)] + counts[static_cast<size_t>(OpId::select)], 0u) << c.name;
  }
}

// Split's gradients against the same pieces taken by narrow / select one at a time (whose VJPs
// zero-pad): several dims, uneven and empty pieces, unused pieces, a piece written in place, and
// double backward.
TEST(Training, SplitChunkUnbindGradientsMatchTheirSlices) {
  manual_seed(6);
  const TensorOptions f64(kFloat64);
  struct Case {
    const char* name;
    Shape shape;
    std::function<std::vector<Tensor>(const Tensor&)> pieces;  // by the op under test
    std::function<std::vector<Tensor>(const Tensor&)> slices;  // the same pieces one by one
  };
  auto narrows = [](int64_t d, std::vector<int64_t> sizes) {
    return [d, sizes](const Tensor& y) {
      std::vector<Tensor> out;
      int64_t start = 0;
      for (int64_t s : sizes) {
        out.push_back(y.narrow(d, start, s));
        start += s;
      }
      return out;
    };
  };
  auto selects = [](int64_t d, int64_t n) {
    return [d, n](const Tensor& y) {
      std::vector<Tensor> out;
      for (int64_t i = 0; i < n; ++i) out.push_back(y.select(d, i));
      return out;
    };
  };
  const std::vector<Case> cases = {
      {"split 2 of 5, dim 0", {5, 3}, [](const Tensor& y) { return y.split(2, 0); }, narrows(0, {2, 2, 1})},
      {"split {1,0,3} dim -1",
       {2, 4},
       [](const Tensor& y) {
         return y.split(std::vector<int64_t>{1, 0, 3}, -1);
       },
       narrows(1, {1, 0, 3})},
      {"chunk 3 of 7, dim 1", {2, 7, 2}, [](const Tensor& y) { return y.chunk(3, 1); }, narrows(1, {3, 3, 1})},
      {"chunk 4 of 0", {3, 0}, [](const Tensor& y) { return y.chunk(4, 1); }, narrows(1, {0, 0, 0, 0})},
      {"unbind dim 1", {2, 3, 2}, [](const Tensor& y) { return y.unbind(1); }, selects(1, 3)},
      {"unbind dim -1", {3, 2}, [](const Tensor& y) { return y.unbind(-1); }, selects(1, 2)},
  };
  auto max_diff = [](const Tensor& a, const Tensor& b) {
    return a.numel() == 0 ? 0.0 : (a - b).abs().max().item<double>();
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Tensor x = randn(c.shape, f64).requires_grad_();
    const size_t n = c.slices(x.detach()).size();
    std::vector<Tensor> weights;
    for (const Tensor& p : c.slices(x.detach())) weights.push_back(randn(p.sizes().vec(), f64));
    // which: pieces used (bit k); write: a piece multiplied in place first (-1: none).
    auto loss = [&](const auto& take, uint32_t which, int write) {
      Tensor y = x.sin();  // not a leaf: its pieces may be written
      std::vector<Tensor> p = take(y);
      EXPECT_EQ(p.size(), n);
      if (write >= 0) p[static_cast<size_t>(write)].mul_(3.0);
      Tensor l = (y * 0).sum();  // keeps y's pieces' writes in the graph through y
      for (size_t k = 0; k < p.size(); ++k)
        if ((which >> k) & 1u) l = l + (p[k] * p[k] * weights[k]).sum();
      if (write >= 0) l = l + (y * y).sum();
      return l;
    };
    for (uint32_t which : {0xffu, 1u, 2u, 5u}) {
      for (int write : {-1, 0, static_cast<int>(n) - 1}) {
        if (n == 0 && write >= 0) continue;
        SCOPED_TRACE(::testing::Message() << "pieces " << which << ", write " << write);
        Tensor got = autograd::grad({loss(c.pieces, which, write)}, {x}, {}, std::nullopt, true)[0];
        Tensor want = autograd::grad({loss(c.slices, which, write)}, {x}, {}, std::nullopt, true)[0];
        ASSERT_TRUE(got.defined() && want.defined());
        EXPECT_LE(max_diff(got, want), 1e-12);
        // Double backward through the cat.
        Tensor gg = autograd::grad({(got * got).sum()}, {x}, {}, false, false, /*allow_unused=*/true)[0];
        Tensor gw = autograd::grad({(want * want).sum()}, {x}, {}, false, false, true)[0];
        ASSERT_EQ(gg.defined(), gw.defined());
        if (gg.defined()) {
          EXPECT_LE(max_diff(gg, gw), 1e-10);
        }
      }
    }
  }
}

// The pieces stay views: a write through one shows in the input, and a piece saved by a later op
// and overwritten through another piece is still the error eager autograd gives.
TEST(Training, SplitPiecesStayViewsOfTheirInput) {
  manual_seed(7);
  Tensor x = randn({4, 6}, kFloat64).requires_grad_();
  Tensor y = x * 1;
  std::vector<Tensor> p = y.split(2, 1);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_TRUE(p[1].is_view());
  p[1].fill_(5.0);
  EXPECT_EQ(y.select(1, 2).sum().item<double>(), 20.0);
  EXPECT_EQ(y.select(1, 0).sum().item<double>(), x.select(1, 0).sum().item<double>());
  // y's history now goes through the write: x's gradient is zero where p[1] was overwritten.
  Tensor g = autograd::grad({y.sum()}, {x})[0];
  EXPECT_EQ(g.sum().item<double>(), 16.0);
  std::vector<Tensor> u = (x * 1).chunk(2, 0);
  Tensor s = u[0].sin();  // saves u[0]
  u[1].add_(1.0);         // same storage: u[0]'s version moves too
  kiln::testing::expect_error([&] { (void)autograd::grad({s.sum()}, {x}); }, "modified by an in-place operation");
}
