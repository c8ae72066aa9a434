// Deferred tracer autograd (Note [Deferred tracer autograd]): recording with inputs that
// require grad builds no autograd nodes on tracers for an AOT backend, and whatever needs
// them (grad_fn, hooks, in-place ops, a backward inside, a custom Function, a leaf made
// inside) gets the nodes eager would have built, with eager's gradients.
#include <gtest/gtest.h>

#include "autograd/deferred.h"
#include "autograd/node.h"
#include "kiln/kiln.h"
#include "models/mlp.h"
#include "tests/unit/expect_error.h"

namespace kiln {
namespace {

void expect_close(const Tensor& a, const Tensor& b, double tol = 1e-5) {
  ASSERT_TRUE(a.defined() && b.defined());
  ASSERT_EQ(a.sizes().vec(), b.sizes().vec());
  auto x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], y[i], tol * (1 + std::abs(y[i]))) << "element " << i;
}

// Runs fn(x, w) compiled under `backend` and eagerly on copies, then compares outputs and
// the gradients of x and w.
template <class F>
void expect_eager_gradients(F fn, const char* backend = "aot_eager", int calls = 3) {
  auto f = compile(fn, {.backend = backend});
  for (int i = 0; i < calls; ++i) {
    manual_seed(10 + i);
    Tensor x = randn({4, 5}).requires_grad_(), w = randn({5, 3}).requires_grad_();
    Tensor x2 = x.detach().clone().requires_grad_(), w2 = w.detach().clone().requires_grad_();
    Tensor got = f(x, w), want = fn(x2, w2);
    expect_close(got, want);
    (got * got).sum().backward();
    (want * want).sum().backward();
    expect_close(x.grad(), x2.grad());
    expect_close(w.grad(), w2.grad());
  }
}

TEST(DeferredAutograd, ACallOnTracersBuildsNoNodes) {
  manual_seed(1);
  auto m = std::make_shared<models::MLP>(6, 16, 2, 3);
  auto fast = compile(m, {.backend = "aot_eager"});
  Tensor x = randn({4, 6}), y = randint(0, 3, {4});
  for (int i = 0; i < 3; ++i) {
    const auto before = autograd::deferred_counts();
    Tensor loss = cross_entropy(fast->forward(x), y);
    const auto after = autograd::deferred_counts();
    EXPECT_GT(after.deferred, before.deferred) << "call " << i;
    EXPECT_EQ(after.built, before.built) << "call " << i;
    loss.backward();
  }
  // The eager backend keeps the tracers' autograd graph as its backward: nothing deferred.
  auto eager = compile(m, {.backend = "eager"});
  const auto before = autograd::deferred_counts();
  (void)eager->forward(x);
  EXPECT_EQ(autograd::deferred_counts().deferred, before.deferred);
}

TEST(DeferredAutograd, GradFnOfAnIntermediateIsBuiltOnDemand) {
  std::string name;
  auto fn = [&name](const Tensor& x, const Tensor& w) {
    Tensor h = x.matmul(w).tanh();
    name = h.grad_fn() ? h.grad_fn()->name() : "none";
    return h * 2;
  };
  expect_eager_gradients(fn);
  Tensor x = randn({2, 5}).requires_grad_(), w = randn({5, 3});
  (void)fn(x, w);
  const std::string eager_name = name;
  auto f = compile(fn, {.backend = "aot_eager"});
  (void)f(x, w);
  EXPECT_EQ(name, eager_name);
  EXPECT_NE(name, "DeferredNode");
}

TEST(DeferredAutograd, HooksAndRetainedGradsOnIntermediates) {
  auto fn = [](const Tensor& x, const Tensor& w) {
    Tensor h = x.matmul(w);
    h.register_hook([](const Tensor& g) { return g * 3; });
    return h.sigmoid();
  };
  expect_eager_gradients(fn);
  Tensor kept;
  auto retains = [&kept](const Tensor& x, const Tensor& w) {
    Tensor h = x.matmul(w);
    h.retain_grad();
    kept = h;
    return h.sigmoid();
  };
  auto f = compile(retains, {.backend = "aot_eager"});
  Tensor x = randn({4, 5}).requires_grad_(), w = randn({5, 3});
  f(x, w).sum().backward();
  const Tensor got = kept.grad();
  retains(x, w).sum().backward();
  expect_close(got, kept.grad());
}

TEST(DeferredAutograd, InPlaceOpsOnNonLeafTracers) {
  auto fn = [](const Tensor& x, const Tensor& w) {
    Tensor h = x.matmul(w);
    h.mul_(h);  // self takes over the history of an op on itself
    h.add_(1);
    return h.tanh();
  };
  expect_eager_gradients(fn);
}

TEST(DeferredAutograd, ALeafMadeInsideKeepsEagersGraph) {
  auto fn = [](const Tensor& x, const Tensor& w) {
    Tensor scale = full({3}, 0.5).requires_grad_();  // a leaf made inside the compiled code
    return x.matmul(w) * scale;
  };
  expect_eager_gradients(fn);
}

TEST(DeferredAutograd, BackwardInsideTheCompiledCode) {
  auto fn = [](const Tensor& x, const Tensor& w) {
    Tensor loss = x.matmul(w).tanh().sum();
    Tensor gw = autograd::grad({loss}, {w})[0];
    return x.matmul(w) * gw.detach().sum();  // a gradient computed inside, and a graph through x and w
  };
  expect_eager_gradients(fn);
}

// Straight-through rounding: its backward is not the derivative of its forward, so a
// backend that differentiated the recorded ops would give zero gradients.
struct StraightThroughRound : autograd::Function<StraightThroughRound> {
  static Tensor forward(autograd::AutogradContext*, const Tensor& x) { return x.round(); }
  static std::vector<Tensor> backward(autograd::AutogradContext*, const std::vector<Tensor>& g) { return {g[0]}; }
};

TEST(DeferredAutograd, CustomFunctionsKeepTheirBackward) {
  auto fn = [](const Tensor& x, const Tensor& w) { return StraightThroughRound::apply(x.matmul(w) * 4) * 0.25; };
  expect_eager_gradients(fn);
}

TEST(DeferredAutograd, ModifiedSavedTensorIsStillAnError) {
  // A tensor saved for backward and then changed in place: eager's error under the eager backend,
  // whose backward is the tracers' graph (built when the graph ends).
  for (const char* backend : {"eager", "aot_eager"}) {
    SCOPED_TRACE(backend);
    auto f = compile(
        [](const Tensor& x) {
          Tensor s = full({2}, 0.5).requires_grad_();  // a leaf made inside: eager's graph is kept
          Tensor e = x.exp();
          Tensor out = e * s;
          {
            NoGradGuard no_grad;
            e.add_(1);
          }
          return out;
        },
        {.backend = backend});
    Tensor x = randn({2}).requires_grad_();
    Tensor out = f(x);
    kiln::testing::expect_error([&] { out.sum().backward(); }, "modified by an in-place operation");
  }
}

}  // namespace
}  // namespace kiln
