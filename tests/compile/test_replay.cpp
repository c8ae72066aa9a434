// Trace replay (Note [Trace replay]): a call whose trace matches the latest graph reuses it
// without rebuilding; every way a trace can differ midway still gives eager's answer.
#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "kiln/optim.h"

namespace kiln {
namespace {

void expect_same(const Tensor& a, const Tensor& b, double tol = 1e-6) {
  ASSERT_TRUE(a.defined() && b.defined());
  ASSERT_EQ(a.sizes().vec(), b.sizes().vec());
  ASSERT_EQ(a.dtype(), b.dtype());
  auto x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], y[i], tol * (1 + std::abs(y[i]))) << "element " << i;
}

TEST(Replay, SteadyCallsReplayTheLatestGraph) {
  for (const char* backend : {"eager", "aot_eager"}) {
    SCOPED_TRACE(backend);
    auto fn = [](const Tensor& x) { return (x.relu() * 2 + 1).sum(1); };
    auto f = compile(fn, {.backend = backend});
    for (int i = 0; i < 4; ++i) {
      Tensor x = randn({3, 4});
      expect_same(f(x), fn(x));
    }
    EXPECT_EQ(f.stats().graphs_compiled, 1);
    EXPECT_EQ(f.stats().trace_replays, 3);
  }
}

TEST(Replay, AnAttrThatAlternatesSelectsEachGraph) {
  auto fn = [](const Tensor& x, int64_t dim) { return (x * 3).exp().sum(dim); };  // dim is an attr
  auto f = compile(fn, {.dynamic = false});
  Tensor x = rand({4, 4});
  for (int i = 0; i < 6; ++i) {
    const int64_t dim = i % 2;
    expect_same(f(x, dim), fn(x, dim));
  }
  EXPECT_EQ(f.stats().graphs_compiled, 2);
  EXPECT_EQ(f.stats().trace_replays, 0);  // each call differs from the one before at sum
  EXPECT_EQ(f.stats().cache_hits, 4);
}

TEST(Replay, SameOpsWithDifferentLiveOutputsGiveTheRightTensor) {
  auto fn = [](const Tensor& x, bool first) {
    Tensor a = x * 2;
    Tensor b = a + 1;
    return first ? a : b;
  };
  auto f = compile(fn);
  Tensor x = randn({4});
  for (int i = 0; i < 6; ++i) expect_same(f(x, i % 3 == 0), fn(x, i % 3 == 0));
}

TEST(Replay, ACapturedTensorOfAnotherShapeOrDtypeIsNoticedMidway) {
  Tensor w = randn({4});
  auto fn = [&](const Tensor& x) { return (x.exp() + w).sum(); };
  auto f = compile(fn, {.dynamic = false});
  Tensor x = randn({4});
  expect_same(f(x), fn(x));
  expect_same(f(x), fn(x));
  w = randn({1});  // broadcasts: the same ops, a new shape for the second input
  expect_same(f(x), fn(x));
  w = randn({4}, kFloat64);
  expect_same(f(x), fn(x));
  w = randn({4});
  w.requires_grad_(true);
  Tensor y = f(x);
  expect_same(y, fn(x));
  EXPECT_TRUE(y.requires_grad());
  EXPECT_EQ(f.stats().graphs_compiled, 4);
}

TEST(Replay, LongerAndShorterTracesThanTheLatest) {
  auto fn = [](const Tensor& x, int n) {
    Tensor y = x;
    for (int i = 0; i < n; ++i) y = y.sin() + 1;
    return y;
  };
  auto f = compile(fn);
  Tensor x = randn({3});
  for (int n : {2, 2, 3, 3, 1, 2, 3}) expect_same(f(x, n), fn(x, n));
  EXPECT_EQ(f.stats().graphs_compiled, 3);
}

TEST(Replay, GraphBreaksReplayEachGraph) {
  auto fn = [](const Tensor& x) {
    Tensor s = x.exp().sum();
    if (s.item<double>() > 4) return x * 2;
    return x - 1;
  };
  auto f = compile(fn);
  Tensor big = ones({5}), small = -ones({5});
  for (int i = 0; i < 3; ++i) expect_same(f(big), fn(big));
  const int before = f.stats().trace_replays;
  EXPECT_EQ(before, 4);  // two graphs a call, the latter two calls
  expect_same(f(small), fn(small));
  expect_same(f(big), fn(big));
  EXPECT_EQ(f.stats().trace_replays, before + 2);  // graph 0 both times; graph 1 differed twice
}

TEST(Replay, DropoutDrawsNewNumbersEachReplayedCall) {
  auto fn = [](const Tensor& x) { return dropout(x, 0.5, true) * 3; };
  auto f = compile(fn);
  Tensor x = ones({64});
  std::vector<std::vector<double>> seen;
  for (int i = 0; i < 3; ++i) {
    manual_seed(100 + i);
    Tensor want = fn(x);
    manual_seed(100 + i);
    Tensor got = f(x);
    expect_same(got, want, 0);
    seen.push_back(got.to_vector<double>());
  }
  EXPECT_NE(seen[0], seen[1]);
  EXPECT_NE(seen[1], seen[2]);
  EXPECT_GE(f.stats().trace_replays, 2);
}

TEST(Replay, TrainingStepsAgreeWithEager) {
  manual_seed(3);
  nn::Linear e1(6, 8), c1(6, 8);
  for (size_t i = 0; i < e1.parameters().size(); ++i) {
    NoGradGuard g;
    c1.parameters()[i].copy_(e1.parameters()[i]);
  }
  optim::AdamW oe(e1.parameters(), {.lr = 1e-2}), oc(c1.parameters(), {.lr = 1e-2});
  Tensor x = randn({5, 6});
  auto step = [&](nn::Linear& m, optim::AdamW& o) {
    Tensor loss = m.forward(x).tanh().pow(2).mean();
    loss.backward();
    o.step();
    o.zero_grad(true);
    return loss;
  };
  auto cstep = compile([&] { return step(c1, oc); });
  for (int i = 0; i < 4; ++i) expect_same(cstep(), step(e1, oe), 1e-5);
  for (size_t i = 0; i < e1.parameters().size(); ++i) expect_same(c1.parameters()[i], e1.parameters()[i], 1e-5);
  // The first step differs (AdamW makes its state); the later ones replay.
  EXPECT_LE(cstep.stats().graphs_compiled, 2);
  EXPECT_EQ(cstep.stats().trace_replays, 4 - cstep.stats().graphs_compiled);
}

// The "eager" backend keeps the tracers' own autograd graph: a replayed forward must leave
// eager's gradients, call after call.
TEST(Replay, ReplayedForwardsKeepEagersAutogradOnTheEagerBackend) {
  for (const char* backend : {"eager", "aot_eager"}) {
    SCOPED_TRACE(backend);
    manual_seed(4);
    Tensor w = randn({4, 3}).requires_grad_(true);
    auto fn = [&](const Tensor& x) { return (x.matmul(w).sigmoid() * x.sum(1, true)).pow(2).mean(); };
    auto f = compile(fn, {.backend = backend});
    for (int i = 0; i < 3; ++i) {
      Tensor x = randn({5, 4});
      Tensor got = f(x);
      got.backward();
      Tensor g_compiled = w.grad().clone();
      w.set_grad(Tensor());
      Tensor want = fn(x);
      want.backward();
      expect_same(got, want);
      expect_same(g_compiled, w.grad(), 1e-5);
      w.set_grad(Tensor());
    }
    EXPECT_EQ(f.stats().trace_replays, 2);
  }
}

}  // namespace
}  // namespace kiln
