// kiln::autocast and kiln::GradScaler against torch.autocast's op lists and torch.amp.GradScaler's
// rules (Note [Autocast]).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "dispatch/dispatch.h"
#include "kiln/kiln.h"
#include "tests/unit/expect_error.h"

using namespace kiln;
using kiln::testing::expect_error;

namespace {

double max_diff(const Tensor& a, const Tensor& b) {
  return (a.to(kFloat64) - b.to(kFloat64)).abs().max().item<double>();
}

TEST(Autocast, CpuOpListsAndDtypes) {
  manual_seed(0);
  Tensor x = randn({4, 8}), w = randn({3, 8}), b = randn({3});
  Tensor y = tensor<int64_t>({0, 2, 1, 0}, kInt64);
  EXPECT_FALSE(is_autocast_enabled(DeviceType::CPU));
  {
    autocast ac(kCPU);
    EXPECT_TRUE(is_autocast_enabled(DeviceType::CPU));
    EXPECT_EQ(get_autocast_dtype(DeviceType::CPU), kBFloat16);
    Tensor out = linear(x, w, b);  // lower-precision list
    EXPECT_EQ(out.dtype(), kBFloat16);
    EXPECT_EQ(mm(x, w.t()).dtype(), kBFloat16);
    EXPECT_EQ(matmul(x, w.t()).dtype(), kBFloat16);
    EXPECT_LT(max_diff(out, linear(x.to(kFloat64), w.to(kFloat64), b.to(kFloat64))), 0.1);
    EXPECT_EQ(cross_entropy(out, y).dtype(), kFloat32);  // float32 list
    EXPECT_EQ(softmax(out, 1).dtype(), kBFloat16);       // torch's CPU list leaves softmax alone
    EXPECT_EQ((x + 1).dtype(), kFloat32);                // not listed: as without autocast
    EXPECT_EQ(linear(x.to(kFloat64), w.to(kFloat64)).dtype(), kFloat64);  // float64 is never cast
    EXPECT_EQ(cat({out, x.narrow(1, 0, 3)}, 0).dtype(), kFloat32);        // promote list: the widest
  }
  EXPECT_FALSE(is_autocast_enabled(DeviceType::CPU));
  EXPECT_EQ(linear(x, w, b).dtype(), kFloat32);
}

TEST(Autocast, Float16AndNestedDisable) {
  Tensor x = randn({2, 4}), w = randn({4, 4});
  autocast outer(kCPU, kFloat16);
  EXPECT_EQ(mm(x, w).dtype(), kFloat16);
  {
    autocast off(kCPU, std::nullopt, /*enabled=*/false);
    EXPECT_EQ(mm(x, w).dtype(), kFloat32);
  }
  EXPECT_EQ(mm(x, w).dtype(), kFloat16);
  {
    autocast inner(kCPU, kBFloat16);
    EXPECT_EQ(mm(x, w).dtype(), kBFloat16);
  }
  EXPECT_EQ(get_autocast_dtype(DeviceType::CPU), kFloat16);
}

TEST(Autocast, GradientsFlowBackInTheParametersDtype) {
  manual_seed(1);
  Tensor x = randn({5, 6});
  Tensor w = randn({4, 6}).requires_grad_();
  Tensor b = randn({4}).requires_grad_();
  Tensor y = tensor<int64_t>({0, 1, 2, 3, 0}, kInt64);
  Tensor loss;
  {
    autocast ac(kCPU);
    loss = cross_entropy(linear(x, w, b), y);
  }
  loss.backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  EXPECT_EQ(b.grad().dtype(), kFloat32);
  // Against float64: bfloat16 keeps 8 bits of mantissa.
  Tensor w64 = w.detach().to(kFloat64).requires_grad_(), b64 = b.detach().to(kFloat64).requires_grad_();
  cross_entropy(linear(x.to(kFloat64), w64, b64), y).backward();
  EXPECT_LT(max_diff(w.grad(), w64.grad()), 0.05);
  EXPECT_LT(max_diff(b.grad(), b64.grad()), 0.05);
}

TEST(Autocast, BackwardInsideTheRegionIsNotAutocast) {
  Tensor x = randn({3, 3}, TensorOptions(kFloat64));
  Tensor w = randn({3, 3}).requires_grad_();
  autocast ac(kCPU);
  Tensor out = mm(x.to(kFloat32), w);  // bf16
  ASSERT_EQ(out.dtype(), kBFloat16);
  out.sum().backward();
  EXPECT_EQ(w.grad().dtype(), kFloat32);
}

TEST(Autocast, ParametersAreCastOncePerRegionUntilTheyChange) {
  Tensor w = randn({4, 4}).requires_grad_();
  Tensor x = randn({2, 4});
  std::vector<uint32_t> counts(static_cast<size_t>(OpId::_foreach_maximum_) + 1, 0);
  {
    autocast ac(kCPU);
    set_op_call_counts(&counts);
    Tensor a = mm(x, w), b = mm(x, w), c = mm(x * 2, w);
    set_op_call_counts(nullptr);
    // x is cast at each use (it is no parameter); w once.
    EXPECT_EQ(counts[static_cast<size_t>(OpId::to)], 4u);
    {
      NoGradGuard no_grad;
      w.mul_(2);  // a new version: the next use casts again, with the new values
    }
    Tensor d = mm(x, w);
    EXPECT_LT(max_diff(d, mm(x, w.detach()).to(kFloat64)), 0.2);
    EXPECT_GT(max_diff(d, a), 0.01);
  }
}

TEST(Autocast, ClearErrors) {
  expect_error([] { autocast ac(kCPU, kFloat32); }, {"autocast", "bfloat16 and float16", "float32"});
  expect_error([] { autocast ac(Device("meta")); }, {"autocast", "cpu or cuda", "meta"});
  EXPECT_FALSE(is_autocast_enabled(DeviceType::CPU));
}

TEST(Autocast, CompiledGivesEagersAnswer) {
  manual_seed(3);
  Tensor w = randn({6, 6}).requires_grad_();
  auto f = [&](const Tensor& x) {
    autocast ac(kCPU);
    return softmax(mm(x, w), 1).sum(1);
  };
  auto fast = kiln::compile(f);
  Tensor x = randn({3, 6});
  Tensor eager = f(x), compiled = fast(x);
  EXPECT_EQ(compiled.dtype(), eager.dtype());
  EXPECT_EQ(max_diff(compiled, eager), 0.0);
}

// cross_entropy is AUTOCAST_FP32_DTYPE: autocast sets its result dtype to float32 instead of
// casting the logits (the CUDA fused kernel reads bf16 directly); every path keeps the float32 cast
// path's answer: the float32 loss, and the gradient of the low-precision logits as that path's
// float32 gradient rounded once to their dtype.
TEST(Autocast, CrossEntropyIsFloat32WithoutCastingTheLogitsUpFront) {
  manual_seed(4);
  Tensor y = tensor<int64_t>({0, 2, 1, 4, -100, 3}, kInt64), w = rand({5}) + 0.5;
  Tensor y3 = tensor<int64_t>({0, 2, 1, 4, 3, 1}, kInt64).view({2, 3});
  Tensor probs = softmax(randn({6, 5}), 1);
  for (DType low : {kBFloat16, kFloat16})
    for (int variant = 0; variant < 5; ++variant) {
      SCOPED_TRACE(::testing::Message() << low << " variant " << variant);
      // [6, 5] logits: plain, weighted with label smoothing, sum, class-probability targets;
      // [2, 5, 3] logits with a [2, 3] target.
      Tensor x = variant == 4 ? (randn({2, 5, 3}) * 3).to(low) : (randn({6, 5}) * 3).to(low);
      auto loss = [&](const Tensor& in) {
        switch (variant) {
          case 0:
            return cross_entropy(in, y);
          case 1:
            return cross_entropy(in, y, w.to(low), -100, "mean", 0.1);
          case 2:
            return cross_entropy(in, y, Tensor(), -100, "sum");
          case 3:
            return cross_entropy(in, probs.to(low), Tensor(), -100, "mean", 0.2);
          default:
            return cross_entropy(in, y3, Tensor(), -100, "none");
        }
      };
      Tensor xa = x.detach().requires_grad_(), xc = x.to(kFloat32).requires_grad_();
      Tensor la;
      {
        autocast ac(kCPU, low);
        la = loss(xa);
      }
      // The cast path: float32 logits; the weight and probabilities as AUTOCAST_FP32 cast them.
      Tensor lc = [&] {
        switch (variant) {
          case 1:
            return cross_entropy(xc, y, w.to(low).to(kFloat32), -100, "mean", 0.1);
          case 3:
            return cross_entropy(xc, probs.to(low).to(kFloat32), Tensor(), -100, "mean", 0.2);
          default:
            return loss(xc);
        }
      }();
      EXPECT_EQ(la.dtype(), kFloat32);
      EXPECT_LT(max_diff(la, lc), 1e-6);
      la.sum().backward();
      lc.sum().backward();
      ASSERT_TRUE(xa.grad().defined());
      EXPECT_EQ(xa.grad().dtype(), low);
      EXPECT_EQ(max_diff(xa.grad(), xc.grad().to(low)), 0.0);
      // Without autocast the loss keeps the logits' dtype, as torch's.
      EXPECT_EQ(loss(x).dtype(), low);
      EXPECT_LT(max_diff(loss(x), lc), 0.03 * (1 + lc.abs().max().item<double>()));
    }
  // float64 logits are never autocast.
  autocast ac(kCPU);
  EXPECT_EQ(cross_entropy(randn({6, 5}, TensorOptions(kFloat64)), y).dtype(), kFloat64);
}

TEST(Autocast, CompiledCrossEntropyGivesEagersAnswer) {
  manual_seed(5);
  Tensor w = randn({5, 6}).requires_grad_();
  Tensor y = tensor<int64_t>({0, 2, 1, 4}, kInt64);
  auto f = [&](const Tensor& x) {
    autocast ac(kCPU);
    return cross_entropy(mm(x, w.t()), y);
  };
  auto fast = kiln::compile(f);
  Tensor x = randn({4, 6});
  Tensor eager = f(x), compiled = fast(x);
  EXPECT_EQ(eager.dtype(), kFloat32);
  EXPECT_EQ(compiled.dtype(), kFloat32);
  EXPECT_EQ(max_diff(compiled, eager), 0.0);
  Tensor ge = autograd::grad({eager}, {w})[0], gc = autograd::grad({compiled}, {w})[0];
  EXPECT_LT(max_diff(gc, ge), 1e-6);
}

// --- GradScaler ---

struct Quadratic {
  Tensor w = tensor<float>({1.0f, -2.0f, 3.0f}, kFloat32).requires_grad_();
  Tensor loss() { return (w * w).sum(); }  // grad = 2w
};

TEST(GradScaler, UnscalesAndSteps) {
  Quadratic q;
  optim::SGD opt(std::vector<Tensor>{q.w}, {.lr = 0.1});
  GradScaler scaler({.init_scale = 1024.0});
  Tensor scaled = scaler.scale(q.loss());
  EXPECT_DOUBLE_EQ(scaled.item<double>(), 1024.0 * 14.0);
  scaled.backward();
  EXPECT_DOUBLE_EQ(q.w.grad().to_vector<double>()[0], 2048.0);
  EXPECT_TRUE(scaler.step(opt));
  const std::vector<double> w = q.w.detach().to_vector<double>(), want{0.8, -1.6, 2.4};  // w - 0.1 * 2w
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(w[i], want[i], 1e-6);
  scaler.update();
  EXPECT_DOUBLE_EQ(scaler.get_scale(), 1024.0);
}

TEST(GradScaler, SkipsTheStepOnInfAndBacksOffThenGrows) {
  Quadratic q;
  optim::SGD opt(std::vector<Tensor>{q.w}, {.lr = 0.1});
  GradScaler scaler({.init_scale = 8.0, .growth_interval = 2});
  scaler.scale(q.loss() * std::numeric_limits<double>::infinity()).backward();
  const std::vector<float> before = q.w.detach().to_vector<float>();
  EXPECT_FALSE(scaler.step(opt));
  EXPECT_EQ(q.w.detach().to_vector<float>(), before);
  scaler.update();
  EXPECT_DOUBLE_EQ(scaler.get_scale(), 4.0);
  for (int i = 0; i < 2; ++i) {
    opt.zero_grad();
    scaler.scale(q.loss()).backward();
    EXPECT_TRUE(scaler.step(opt));
    scaler.update();
  }
  EXPECT_DOUBLE_EQ(scaler.get_scale(), 8.0);  // two good steps: growth_interval
}

TEST(GradScaler, OrderOfCallsIsChecked) {
  Quadratic q;
  optim::SGD opt(std::vector<Tensor>{q.w}, {.lr = 0.1});
  GradScaler scaler;
  expect_error([&] { scaler.update(); }, {"no inf checks were recorded"});
  scaler.scale(q.loss()).backward();
  scaler.unscale_(opt);
  expect_error([&] { scaler.unscale_(opt); }, {"unscale_() has already been called"});
  scaler.step(opt);
  expect_error([&] { scaler.step(opt); }, {"step() has already been called"});
  expect_error([&] { scaler.unscale_(opt); }, {"after step()"});
  scaler.update();
  Tensor h = tensor<float>({1.0f}, kFloat16).requires_grad_();
  optim::SGD opt16(std::vector<Tensor>{h}, {.lr = 0.1});
  (h * h).sum().backward();
  expect_error([&] { scaler.unscale_(opt16); }, {"float16 gradients"});
  expect_error([] { GradScaler bad({.growth_factor = 0.5}); }, {"growth_factor"});
}

TEST(GradScaler, StateDictRoundTripAndDisabled) {
  GradScaler a({.init_scale = 32.0, .growth_interval = 7});
  GradScaler b;
  b.load_state_dict(a.state_dict());
  EXPECT_DOUBLE_EQ(b.get_scale(), 32.0);
  EXPECT_EQ(b.get_growth_interval(), 7);
  auto bad = a.state_dict();
  bad.erase("scale");
  expect_error([&] { b.load_state_dict(bad); }, {"'scale' is missing"});

  GradScaler off({.enabled = false});
  Quadratic q;
  optim::SGD opt(std::vector<Tensor>{q.w}, {.lr = 0.1});
  Tensor l = q.loss();
  EXPECT_TRUE(off.scale(l).is_same(l));
  l.backward();
  EXPECT_TRUE(off.step(opt));
  off.update();
  EXPECT_DOUBLE_EQ(off.get_scale(), 1.0);
  EXPECT_TRUE(off.state_dict().empty());
}

}  // namespace
