// Autograd behaviour users rely on: accumulation, retain_graph, create_graph,
// hooks, grad-mode guards, version-counter errors, custom functions.
#include <gtest/gtest.h>

#include <cmath>

#include "dispatch/dispatch.h"
#include "kiln/kiln.h"

using namespace kiln;

namespace {

Tensor vec(std::vector<double> v) { return tensor<double>(v, kFloat64); }
std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }

TEST(Autograd, GradOfProductAndSum) {
  Tensor x = vec({1, 2, 3}).requires_grad_();
  Tensor y = vec({4, 5, 6}).requires_grad_();
  Tensor loss = (x * y + x).sum();
  loss.backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{5, 6, 7}));
  EXPECT_EQ(vals(y.grad()), (std::vector<double>{1, 2, 3}));
  EXPECT_TRUE(x.is_leaf());
  EXPECT_FALSE(loss.is_leaf());
  EXPECT_TRUE(loss.requires_grad());
}

TEST(Autograd, GradientsAccumulateAcrossBackwardCalls) {
  Tensor x = vec({1, 2}).requires_grad_();
  (x * 3.0).sum().backward();
  (x * 2.0).sum().backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{5, 5}));
}

TEST(Autograd, SharedSubexpressionSumsBothPaths) {
  Tensor x = vec({2}).requires_grad_();
  Tensor a = x * x;                 // used twice below
  Tensor loss = (a * a + a).sum();  // x^4 + x^2 → 4x^3 + 2x = 36
  loss.backward();
  EXPECT_DOUBLE_EQ(vals(x.grad())[0], 36.0);
}

TEST(Autograd, BackwardTwiceWithoutRetainGraphFails) {
  Tensor x = vec({1, 2}).requires_grad_();
  Tensor loss = (x * x).sum();
  loss.backward();
  try {
    loss.backward();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("second time"), std::string::npos) << e.what();
  }
}

TEST(Autograd, RetainGraphAllowsASecondBackward) {
  Tensor x = vec({1, 2}).requires_grad_();
  Tensor loss = (x * x).sum();
  loss.backward({}, /*retain_graph=*/true);
  loss.backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{4, 8}));
}

TEST(Autograd, CreateGraphGivesSecondDerivatives) {
  Tensor x = vec({1.5}).requires_grad_();
  Tensor y = (x * x * x).sum();  // y = x^3
  auto g = autograd::grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true);
  EXPECT_NEAR(vals(g[0])[0], 3 * 1.5 * 1.5, 1e-12);
  ASSERT_TRUE(g[0].requires_grad());
  auto gg = autograd::grad({g[0].sum()}, {x});
  EXPECT_NEAR(vals(gg[0])[0], 6 * 1.5, 1e-12);
}

TEST(Autograd, GradDoesNotTouchDotGrad) {
  Tensor x = vec({1, 2}).requires_grad_();
  auto g = autograd::grad({(x * x).sum()}, {x});
  EXPECT_EQ(vals(g[0]), (std::vector<double>{2, 4}));
  EXPECT_FALSE(x.grad().defined());
}

TEST(Autograd, UnusedInputNeedsAllowUnused) {
  Tensor x = vec({1}).requires_grad_();
  Tensor z = vec({1}).requires_grad_();
  Tensor y = (x * 2.0).sum();
  EXPECT_THROW(autograd::grad({y}, {z}, {}, true), Error);
  auto g = autograd::grad({y}, {z}, {}, true, false, /*allow_unused=*/true);
  EXPECT_FALSE(g[0].defined());
}

TEST(Autograd, NoGradGuardStopsRecording) {
  Tensor x = vec({1}).requires_grad_();
  Tensor y;
  {
    NoGradGuard g;
    y = x * 2.0;
    EXPECT_FALSE(is_grad_enabled());
    {
      EnableGradGuard e;
      EXPECT_TRUE((x * 2.0).requires_grad());
    }
  }
  EXPECT_TRUE(is_grad_enabled());
  EXPECT_FALSE(y.requires_grad());
  EXPECT_THROW(y.sum().backward(), Error);
}

TEST(Autograd, DetachCutsTheGraphButSharesData) {
  Tensor x = vec({1, 2}).requires_grad_();
  Tensor d = (x * 2.0).detach();
  EXPECT_FALSE(d.requires_grad());
  Tensor loss = (x * d).sum();
  loss.backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{2, 4}));
}

TEST(Autograd, HooksSeeAndReplaceGradients) {
  Tensor x = vec({1, 2}).requires_grad_();
  std::vector<double> seen;
  x.register_hook([&](const Tensor& g) {
    seen = g.to_vector<double>();
    return g * 10.0;
  });
  Tensor h = x * 3.0;
  h.register_hook([](const Tensor& g) { return g + 1.0; });
  h.sum().backward();
  EXPECT_EQ(seen, (std::vector<double>{6, 6}));  // (1 + 1) * 3
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{60, 60}));
}

TEST(Autograd, RetainGradKeepsNonLeafGradient) {
  Tensor x = vec({1, 2}).requires_grad_();
  Tensor h = x * 2.0;
  h.retain_grad();
  (h * h).sum().backward();
  EXPECT_EQ(vals(h.grad()), (std::vector<double>{4, 8}));
}

TEST(Autograd, InPlaceChangeOfASavedTensorIsAnError) {
  Tensor x = vec({1, 2}).requires_grad_();
  Tensor a = x * 2.0;
  Tensor b = a * a;  // saves a
  {
    NoGradGuard g;
    a.add_(1.0);
  }
  try {
    b.sum().backward();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("modified by an in-place operation"), std::string::npos) << e.what();
  }
}

// Norms save their input, not their output (as torch): `relu_` on a norm's output, torchvision's
// pattern, is no error and gives the out-of-place gradient; the output is not kept for backward.
TEST(Autograd, InPlaceReluAfterANormIsNoError) {
  manual_seed(3);
  for (bool layer : {false, true}) {
    Tensor x = randn({4, 3, 5}, TensorOptions(kFloat64)).requires_grad_();
    Tensor w = randn({layer ? 5 : 3}, TensorOptions(kFloat64)).requires_grad_();
    auto norm = [&] {
      return layer ? layer_norm(x, {5}, w) : batch_norm(x, {}, {}, w, {}, /*training=*/true, 0.1, 1e-5);
    };
    Tensor want = relu(norm());
    Tensor coeff = randn({4, 3, 5}, TensorOptions(kFloat64));
    std::vector<Tensor> ref = autograd::grad({(want * coeff).sum()}, {x, w});
    Tensor y = norm();
    y.relu_();
    std::vector<Tensor> got = autograd::grad({(y * coeff).sum()}, {x, w});
    EXPECT_EQ(vals(y), vals(want)) << (layer ? "layer_norm" : "batch_norm");
    EXPECT_EQ(vals(got[0]), vals(ref[0])) << (layer ? "layer_norm" : "batch_norm");
    EXPECT_EQ(vals(got[1]), vals(ref[1])) << (layer ? "layer_norm" : "batch_norm");
  }
}

TEST(Autograd, InPlaceOnALeafThatRequiresGradIsAnError) {
  Tensor x = vec({1, 2}).requires_grad_();
  EXPECT_THROW(x.add_(1.0), Error);
  NoGradGuard g;
  x.add_(1.0);  // allowed without grad mode
  EXPECT_EQ(vals(x), (std::vector<double>{2, 3}));
}

TEST(Autograd, InPlaceOnANonLeafIsRecorded) {
  Tensor x = vec({1, 2}).requires_grad_();
  Tensor h = x * 2.0;
  h.mul_(h);  // h = (2x)^2
  EXPECT_EQ(h._version(), 1u);
  h.sum().backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{8, 16}));  // 8x
}

TEST(Autograd, VersionCounterIsSharedWithViews) {
  Tensor x = zeros({4});
  Tensor v = x.slice(0, 1, 3);
  uint32_t before = x._version();
  v.add_(1.0);
  EXPECT_EQ(x._version(), before + 1);
  EXPECT_EQ(vals(x), (std::vector<double>{0, 1, 1, 0}));
}

TEST(Autograd, GradThroughViews) {
  Tensor x = vec({1, 2, 3, 4, 5, 6}).requires_grad_();
  Tensor m = x.view({2, 3}).t();                                       // [3, 2]
  Tensor loss = (m.select(0, 1) * m.slice(0, 0, 1).squeeze(0)).sum();  // x1*x0 + x4*x3
  loss.backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{2, 1, 0, 5, 4, 0}));
}

TEST(Autograd, BroadcastGradientsAreReduced) {
  Tensor a = vec({1, 2, 3}).view({3, 1}).detach().requires_grad_();
  Tensor b = vec({10, 20}).requires_grad_();
  (a * b).sum().backward();
  EXPECT_EQ(vals(a.grad()), (std::vector<double>{30, 30, 30}));
  EXPECT_EQ(vals(b.grad()), (std::vector<double>{6, 6}));
  EXPECT_EQ(a.grad().sizes().vec(), (std::vector<int64_t>{3, 1}));
}

TEST(Autograd, ImplicitGradOnlyForScalars) {
  Tensor x = vec({1, 2}).requires_grad_();
  EXPECT_THROW((x * 2.0).backward(), Error);
  (x * 2.0).backward(vec({1, 1}));
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{2, 2}));
}

TEST(Autograd, RequiresGradOnlyForFloatingLeaves) {
  EXPECT_THROW(tensor<int64_t>({1, 2}).requires_grad_(), Error);
  Tensor x = vec({1}).requires_grad_();
  EXPECT_THROW((x * 2.0).requires_grad_(false), Error);
}

struct CubeFn : autograd::Function<CubeFn> {
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x) {
    ctx->save_for_backward({x});
    return x * x * x;
  }
  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, const std::vector<Tensor>& g) {
    Tensor x = ctx->get_saved_variables()[0];
    return {g[0] * x * x * 3.0};
  }
};

TEST(Autograd, CustomFunction) {
  Tensor x = vec({1, 2}).requires_grad_();
  Tensor y = CubeFn::apply(x);
  EXPECT_EQ(vals(y), (std::vector<double>{1, 8}));
  y.sum().backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{3, 12}));
}

// Note [Stealing the gradient]: a custom backward shows where its gradient's buffer lives, so
// the tests can tell a stolen gradient (.grad is that buffer) from a copy.
struct FreshGradFn : autograd::Function<FreshGradFn> {
  // What backward does with its fresh gradient [2, 3] before returning it.
  enum class Return { kFresh, kReshaped, kTransposed, kSlice, kKept };
  static inline Return mode = Return::kFresh;
  static inline const void* fresh_ptr = nullptr;
  static inline Tensor kept;  // a handle the caller keeps (kKept)
  static Tensor forward(autograd::AutogradContext*, const Tensor& x) { return x * 2.0; }
  static std::vector<Tensor> backward(autograd::AutogradContext*, const std::vector<Tensor>& g) {
    if (mode == Return::kSlice) {
      Tensor big = cat({g[0] * 2.0, g[0]}, 0);  // [4, 3]: .grad is the first half
      fresh_ptr = big.data_ptr();
      return {big.narrow(0, 0, 2)};
    }
    Tensor fresh = mode == Return::kTransposed ? (g[0].t() * 2.0).contiguous() : g[0] * 2.0;
    fresh_ptr = fresh.data_ptr();
    if (mode == Return::kReshaped) return {fresh.reshape({6}).reshape({2, 3})};
    if (mode == Return::kTransposed) return {fresh.t()};
    if (mode == Return::kKept) kept = fresh;
    return {fresh};
  }
};

std::vector<double> fresh_grad_of(FreshGradFn::Return mode, Tensor& x) {
  FreshGradFn::mode = mode;
  x = vec({1, 2, 3, 4, 5, 6}).reshape({2, 3}).detach().requires_grad_();
  (FreshGradFn::apply(x) * vec({1, 2, 3, 4, 5, 6}).reshape({2, 3})).sum().backward();
  return vals(x.grad());
}

TEST(Autograd, FirstGradientIsStolenWhenNothingElseSeesIt) {
  const std::vector<double> want{2, 4, 6, 8, 10, 12};
  for (auto mode : {FreshGradFn::Return::kFresh, FreshGradFn::Return::kReshaped}) {
    Tensor x;
    EXPECT_EQ(fresh_grad_of(mode, x), want);
    // A fresh buffer, or a whole-buffer contiguous view whose base nobody holds: no copy.
    EXPECT_EQ(x.grad().data_ptr(), FreshGradFn::fresh_ptr);
    EXPECT_TRUE(x.grad().is_contiguous());
    EXPECT_FALSE(x.grad().is_view());
  }
}

TEST(Autograd, FirstGradientIsCopiedWhenSomeoneElseCanSeeIt) {
  const std::vector<double> want{2, 4, 6, 8, 10, 12};
  {
    // The function kept a handle on the gradient: .grad must not alias it, or accumulating
    // the next backward into .grad would write the kept tensor.
    Tensor x;
    EXPECT_EQ(fresh_grad_of(FreshGradFn::Return::kKept, x), want);
    EXPECT_NE(x.grad().data_ptr(), FreshGradFn::kept.data_ptr());
    (FreshGradFn::apply(x) * vec({1, 2, 3, 4, 5, 6}).reshape({2, 3})).sum().backward();
    EXPECT_EQ(vals(x.grad()), (std::vector<double>{4, 8, 12, 16, 20, 24}));
    EXPECT_EQ(vals(FreshGradFn::kept), want);
    FreshGradFn::kept = Tensor();
  }
  {
    // A hook keeps a detached alias: one handle on the gradient's impl, two on its storage.
    FreshGradFn::mode = FreshGradFn::Return::kFresh;
    Tensor x = vec({1, 2, 3, 4, 5, 6}).reshape({2, 3}).detach().requires_grad_();
    Tensor alias;
    x.register_hook([&](const Tensor& g) {
      alias = g.detach();
      return Tensor();
    });
    (FreshGradFn::apply(x) * vec({1, 2, 3, 4, 5, 6}).reshape({2, 3})).sum().backward();
    EXPECT_EQ(vals(x.grad()), want);
    EXPECT_NE(x.grad().data_ptr(), alias.data_ptr());
    Tensor grad = x.grad();
    grad.add_(vec({1, 1, 1, 1, 1, 1}).reshape({2, 3}));
    EXPECT_EQ(vals(alias), want);
  }
  {
    // A slice of a larger buffer is copied, so .grad does not keep the whole buffer alive.
    Tensor x;
    EXPECT_EQ(fresh_grad_of(FreshGradFn::Return::kSlice, x), want);
    EXPECT_NE(x.grad().data_ptr(), FreshGradFn::fresh_ptr);
  }
  {
    // A transposed gradient does not have the parameter's layout.
    Tensor x;
    EXPECT_EQ(fresh_grad_of(FreshGradFn::Return::kTransposed, x), want);
    EXPECT_NE(x.grad().data_ptr(), FreshGradFn::fresh_ptr);
  }
}

TEST(Autograd, CustomFunctionPassesGradcheck) {
  Tensor x = vec({0.5, -1.25, 2.0}).requires_grad_();
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return std::vector<Tensor>{CubeFn::apply(in[0])}; }, {x}));
}

TEST(Autograd, GradcheckCatchesAWrongRule) {
  struct WrongFn : autograd::Function<WrongFn> {
    static Tensor forward(autograd::AutogradContext*, const Tensor& x) { return x * x; }
    static std::vector<Tensor> backward(autograd::AutogradContext*, const std::vector<Tensor>& g) { return {g[0]}; }
  };
  Tensor x = vec({0.5, 2.0}).requires_grad_();
  GradcheckOptions o;
  o.raise_exception = false;
  EXPECT_FALSE(
      gradcheck([](const std::vector<Tensor>& in) { return std::vector<Tensor>{WrongFn::apply(in[0])}; }, {x}, o));
}

TEST(Autograd, GradcheckSecondOrder) {
  Tensor x = vec({0.5, -1.5}).requires_grad_();
  GradcheckOptions o;
  o.check_backward_twice = true;
  EXPECT_TRUE(
      gradcheck([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * in[0] * in[0]}; }, {x}, o));
}

}  // namespace

namespace {
TEST(Autograd, FillOnALeafThatRequiresGradIsAnError) {
  Tensor x = tensor<double>({1, 2}, kFloat64).requires_grad_();
  EXPECT_THROW(x.fill_(0.0), Error);
  EXPECT_THROW(x.zero_(), Error);
  Tensor h = x * 2.0;
  h.zero_();  // a non-leaf: allowed, and its value no longer depends on x
  EXPECT_EQ(h.to_vector<double>(), (std::vector<double>{0, 0}));
  EXPECT_FALSE(h.requires_grad());
}
}  // namespace

namespace {
// A composite that returns its input untouched (a scan over a dim of size 1) still gives a
// new tensor: the input keeps its own history (a leaf stays a leaf) and the gradient flows.
TEST(Autograd, IdentityCompositeLeavesItsInputAlone) {
  Tensor x = tensor<double>({1.5, -2.0, 0.25}, kFloat64).reshape({3, 1}).detach().requires_grad_();
  Tensor y = logcumsumexp(x, 1);
  EXPECT_NE(y.unsafe_impl(), x.unsafe_impl());
  EXPECT_TRUE(x.is_leaf());
  EXPECT_EQ(x.grad_fn(), nullptr);
  EXPECT_NE(y.grad_fn(), nullptr);
  (y * 2.0).sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, 2, 2}));
}
}  // namespace

namespace {
// A gradient penalty (WGAN-GP, MAML) differentiates through a convolution's backward.
TEST(Autograd, ConvolutionSecondOrderAgainstFiniteDifferences) {
  manual_seed(3);
  Tensor x = randn({1, 2, 4, 4}, kFloat64).requires_grad_();
  Tensor w = randn({2, 1, 3, 2}, kFloat64).requires_grad_();
  Tensor b = randn({2}, kFloat64).requires_grad_();
  GradcheckOptions o;
  o.check_backward_twice = true;
  auto conv = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{conv2d(in[0], in[1], in[2], {2, 1}, {1, 0}, {1, 2}, 2).tanh()};
  };
  EXPECT_TRUE(gradcheck(conv, {x, w, b}, o));
  auto tconv = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{conv_transpose2d(in[0], in[1], {}, 2, 1, 1).sin()};
  };
  EXPECT_TRUE(gradcheck(tconv, {x, w}, o));
  // The penalty itself: ||d out / d x||^2, differentiated again with respect to w.
  Tensor gx = autograd::grad({conv({x, w, b})[0].sum()}, {x}, {}, true, true)[0];
  gx.square().sum().backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_GT(w.grad().abs().sum().item<double>(), 0.0);
}
}  // namespace

namespace {
// Note [In-place on a view]: an in-place op on a view writes its base too, in the graph as in memory.
TEST(Autograd, InPlaceOnAViewOfANonLeafAgainstFiniteDifferences) {
  manual_seed(5);
  Tensor x = randn({3, 4}, kFloat64).requires_grad_();
  Tensor w = randn({4}, kFloat64).requires_grad_();
  auto f = [](const std::vector<Tensor>& in) {
    Tensor y = in[0] * 2.0;
    y.select(0, 1).mul_(in[1]);                                                     // a row, times w
    y.narrow(1, 1, 2).narrow(0, 0, 2).add_(in[0].narrow(1, 0, 2).narrow(0, 1, 2));  // a view of a view
    y.t().select(0, 3).exp_();                                                      // a strided column
    return std::vector<Tensor>{y.exp()};
  };
  GradcheckOptions o;
  o.check_backward_twice = true;
  EXPECT_TRUE(gradcheck(f, {x, w}, o));
}

TEST(Autograd, InPlaceOnAViewGivesItsBaseAHistory) {
  Tensor w = tensor<double>({1.5, -2.0}, kFloat64).requires_grad_();
  Tensor z = zeros({3, 2}, kFloat64);  // requires no grad until a row takes w
  z.select(0, 2).add_(w);
  EXPECT_TRUE(z.requires_grad());
  (z * z).sum().backward();
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{3.0, -4.0}));
  EXPECT_EQ(z.select(0, 2).to_vector<double>(), (std::vector<double>{1.5, -2.0}));
}

TEST(Autograd, InPlaceOnAViewOfALeafThatRequiresGradIsAnError) {
  Tensor x = tensor<double>({1, 2, 3, 4}, kFloat64).reshape({2, 2}).detach().requires_grad_();
  try {
    x.select(0, 1).mul_(2.0);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    // A detach()ed alias is not a view for autograd (as PyTorch's): x is a leaf of its own.
    EXPECT_NE(std::string(e.what()).find("mul_: a view of a leaf tensor that requires grad"), std::string::npos)
        << e.what();
  }
  Tensor leaf = tensor<double>({1, 2}, kFloat64).requires_grad_();
  try {
    leaf.narrow(0, 1, 1).mul_(2.0);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mul_: a view of a leaf tensor that requires grad"), std::string::npos)
        << e.what();
  }
}
}  // namespace

namespace {
// Note [Flash attention]: the fused attention's backward has its own derivative (a second
// derivative of attention), checked by finite differences on small inputs, causal or not, with
// the logsumexp output taking part.
TEST(Autograd, FusedAttentionSecondDerivative) {
  for (bool causal : {false, true}) {
    manual_seed(3);
    std::vector<Tensor> in{randn({1, 3, 2}, kFloat64).requires_grad_(true), randn({1, 4, 2}, kFloat64).requires_grad_(true),
                           randn({1, 4, 3}, kFloat64).requires_grad_(true)};
    auto fn = [causal](const std::vector<Tensor>& x) {
      std::vector<Tensor> r = call_op(OpId::_scaled_dot_product_flash_attention, {x[0], x[1], x[2]}, {causal, 0.7});
      return std::vector<Tensor>{r[0], r[1] * 0.5};
    };
    GradcheckOptions o;
    o.check_backward_twice = true;
    EXPECT_TRUE(gradcheck(fn, in, o)) << (causal ? "causal" : "full");
  }
}
}  // namespace
