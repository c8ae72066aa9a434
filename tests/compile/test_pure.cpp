// assume_pure: guards alone select the graph (Note [assume_pure] in compile.h).
#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "models/mlp.h"
#include "tests/compile/compare.h"

namespace kiln {
namespace {

using kiln::testing::max_abs;

TEST(AssumePure, GuardsSelectTheGraphWithoutRerunning) {
  int runs = 0;
  Tensor w = tensor<float>({1, 2, 3}, {3});
  auto fn = [&](const Tensor& x, double scale) {
    ++runs;
    return (x * w).sum(0) * scale;
  };
  auto f = compile(fn, {.assume_pure = true});
  Tensor x = ones({4, 3});
  Tensor a = f(x, 2.0);
  Tensor b = f(x * 3, 2.0);  // same metadata: replayed
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(f.stats().pure_replays, 1);
  EXPECT_LE(max_abs(b, fn(x * 3, 2.0)), 1e-6);
  runs = 0;
  f(x, 5.0);             // another number: re-recorded
  f(ones({2, 3}), 2.0);  // another shape: re-recorded
  EXPECT_EQ(runs, 2);
  w.mul_(2);  // an in-place update of a captured tensor is seen by the replay
  EXPECT_LE(max_abs(f(x, 2.0), (x * w).sum(0) * 2.0), 1e-6);
}

TEST(AssumePure, ModuleTrainsWithReplayedForwardsAndSeesParameterUpdates) {
  manual_seed(3);
  auto m = std::make_shared<models::MLP>(8, 16, 2, 3);
  manual_seed(3);
  auto ref = std::make_shared<models::MLP>(8, 16, 2, 3);
  auto fast = compile(m, {.assume_pure = true});
  optim::SGD opt(m->parameters(), {.lr = 0.1});
  optim::SGD opt_ref(ref->parameters(), {.lr = 0.1});
  Tensor x = randn({5, 8});
  Tensor y = randint(0, 3, {5});
  for (int i = 0; i < 3; ++i) {
    Tensor l = cross_entropy(fast->forward(x), y);
    Tensor le = cross_entropy(ref->forward(x), y);
    EXPECT_LE(max_abs(l, le), 1e-5) << "step " << i;
    opt.zero_grad();
    opt_ref.zero_grad();
    l.backward();
    le.backward();
    opt.step();
    opt_ref.step();
  }
  EXPECT_EQ(fast->stats().pure_replays, 2);
  auto pa = m->parameters(), pb = ref->parameters();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_LE(max_abs(pa[i], pb[i]), 1e-5);
  // New data behind the same parameter (set_data) is read by the replay; train/eval re-records.
  {
    NoGradGuard no_grad;
    m->parameters()[0].set_data(zeros({16, 8}));
    ref->parameters()[0].set_data(zeros({16, 8}));
  }
  int before = fast->stats().calls;
  EXPECT_LE(max_abs(fast->forward(x), ref->forward(x)), 1e-5);
  EXPECT_EQ(fast->stats().calls, before);
  fast->eval();
  ref->eval();
  EXPECT_LE(max_abs(fast->forward(x), ref->forward(x)), 1e-5);
  EXPECT_EQ(fast->stats().calls, before + 1);
}

TEST(AssumePure, WritesToBuffersAreReplayedAndBumpVersions) {
  Tensor running = zeros({3});
  auto f = compile(
      [&](const Tensor& x) {
        NoGradGuard no_grad;
        running.mul_(0.5).add_(x.mean(0));
        return x * 2;
      },
      {.assume_pure = true});
  Tensor x = ones({2, 3});
  f(x);
  uint32_t v = running._version();
  f(x);
  EXPECT_EQ(f.stats().pure_replays, 1);
  EXPECT_GT(running._version(), v);
  EXPECT_LE(max_abs(running, ones({3}) * 1.5), 1e-6);
}

TEST(AssumePure, RandomOpsAndBreaksAlwaysRerecord) {
  int runs = 0;
  auto f = compile(
      [&](const Tensor& x) {
        ++runs;
        return dropout(x, 0.5, true);
      },
      {.assume_pure = true});
  f(ones({8}));
  f(ones({8}));
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(f.stats().pure_replays, 0);
}

}  // namespace
}  // namespace kiln
