// Dynamic shapes: symbolic sizes, automatic dynamic dims, one graph for many sizes
// (Note [Dynamic shapes] in src/compile/capture/sym_shapes.h).
#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "models/gpt.h"
#include "models/mlp.h"
#include "models/zoo.h"
#include "tests/compile/compare.h"
#include "tests/unit/expect_error.h"

namespace kiln {
namespace {

using testing::max_abs;

models::GPTConfig small_gpt() { return {.vocab_size = 64, .block_size = 16, .n_embd = 32, .n_head = 4, .n_layer = 2}; }

std::shared_ptr<models::GPT> gpt() {
  manual_seed(11);
  return std::make_shared<models::GPT>(small_gpt());
}

bool mentions(const compiler::CompileStats& s, const std::string& what) {
  for (const std::string& g : s.graphs)
    if (g.find(what) != std::string::npos) return true;
  return false;
}

// PyTorch's own test of the idea: a GPT forward over 10 sequence lengths compiles at most 2
// graphs (the first length static, the second makes T symbolic), each call equal to eager.
TEST(Dynamic, GptOverTenSequenceLengthsCompilesAtMostTwoGraphs) {
  for (const char* backend : {"eager", "aot_eager"}) {
    SCOPED_TRACE(backend);
    auto m = gpt();
    auto fast = compile(m, {.backend = backend});
    NoGradGuard no_grad;
    for (int64_t T = 1; T <= 10; ++T) {
      SCOPED_TRACE(T);
      manual_seed(T);
      Tensor idx = randint(0, 64, {2, T});
      Tensor got = fast->forward(idx), want = m->forward(idx);
      ASSERT_EQ(got.sizes().vec(), want.sizes().vec());
      EXPECT_LE(max_abs(got, want), 1e-5);
    }
    EXPECT_LE(fast->stats().graphs_compiled, 2) << fast->stats().str();
    EXPECT_FALSE(fast->stats().fell_back_to_eager);
    EXPECT_TRUE(mentions(fast->stats(), "i64[2, s0]")) << fast->stats().str();
    // "eager" runs the symbolic graph itself; a backend that takes numbers compiles per binding.
    if (std::string(backend) == "eager") {
      EXPECT_EQ(fast->stats().specializations, 0);
    }
  }
}

TEST(Dynamic, GptTrainingOverSequenceLengthsMatchesEagerGradients) {
  auto m = gpt(), ref = gpt();
  auto fast = compile(m);
  for (int64_t T : {4, 7, 12, 5, 16}) {
    SCOPED_TRACE(T);
    manual_seed(100 + T);
    Tensor idx = randint(0, 64, {2, T}), tgt = randint(0, 64, {2, T});
    m->zero_grad();
    ref->zero_grad();
    Tensor a = cross_entropy(fast->forward(idx).view({-1, 64}), tgt.view({-1}));
    Tensor b = cross_entropy(ref->forward(idx).view({-1, 64}), tgt.view({-1}));
    EXPECT_LE(max_abs(a, b), 1e-5);
    a.backward();
    b.backward();
    auto pa = m->parameters(), pb = ref->parameters();
    for (size_t i = 0; i < pa.size(); ++i) EXPECT_LE(max_abs(pa[i].grad(), pb[i].grad()), 1e-5) << "parameter " << i;
  }
  EXPECT_LE(fast->stats().graphs_compiled, 2) << fast->stats().str();
}

TEST(Dynamic, NewBatchSizesRecompileOnce) {
  manual_seed(3);
  auto m = std::make_shared<models::MLP>(12, 16, 2, 4);
  auto fast = compile(m);
  for (int64_t B : {4, 6, 9, 33, 6}) {
    Tensor x = randn({B, 12});
    EXPECT_LE(max_abs(fast->forward(x), m->forward(x)), 1e-5);
  }
  EXPECT_EQ(fast->stats().graphs_compiled, 2) << fast->stats().str();
  EXPECT_EQ(fast->stats().recompiles, 1);
  ASSERT_EQ(fast->stats().recompile_reasons.size(), 1u);
  EXPECT_NE(fast->stats().recompile_reasons[0].find("compiled as f32[s0, 12]"), std::string::npos)
      << fast->stats().recompile_reasons[0];
}

TEST(Dynamic, TrueStartsSymbolicFalseNever) {
  auto fn = [](const Tensor& x) { return (x * 2).sum(1); };
  auto dyn = compile(fn, {.dynamic = true});
  auto fixed = compile(fn, {.dynamic = false, .recompile_limit = 16});
  for (int64_t n = 2; n <= 6; ++n) {
    Tensor x = ones({n, n + 1});
    EXPECT_LE(max_abs(dyn(x), fn(x)), 0);
    EXPECT_LE(max_abs(fixed(x), fn(x)), 0);
  }
  EXPECT_EQ(dyn.stats().graphs_compiled, 1) << dyn.stats().str();
  EXPECT_TRUE(mentions(dyn.stats(), "f32[s0, s1]")) << dyn.stats().str();
  EXPECT_EQ(fixed.stats().graphs_compiled, 5);
  // Sizes 0 and 1 stay numbers (as in PyTorch): a new graph, still right.
  Tensor one = ones({1, 3});
  EXPECT_LE(max_abs(dyn(one), fn(one)), 0);
  EXPECT_EQ(dyn.stats().graphs_compiled, 2);
}

// Sizes the user computes from x.size(d) reach the graph as expressions.
TEST(Dynamic, SymIntArithmeticBecomesExpressions) {
  auto fn = [](const Tensor& x) {
    SymInt n = x.size(0), k = x.size(1);
    Tensor y = x.reshape({n * 2, k / 2});
    return y.narrow(0, 1, n * 2 - 1) + 1;
  };
  auto f = compile(fn, {.dynamic = true, .backend = "eager"});
  for (int64_t n : {2, 3, 5}) {
    Tensor x = arange(n * 6, TensorOptions(kFloat32)).view({n, 6});
    EXPECT_EQ(f(x).sizes().vec(), fn(x).sizes().vec());
    EXPECT_LE(max_abs(f(x), fn(x)), 0);
  }
  EXPECT_EQ(f.stats().graphs_compiled, 1) << f.stats().str();
  EXPECT_TRUE(mentions(f.stats(), "s0*2")) << f.stats().str();
}

// A branch on a symbolic size takes eager's path on every call: the code re-runs.
TEST(Dynamic, BranchesOnSizesTakeEagersPath) {
  auto fn = [](const Tensor& x) { return x.size(1) > 4 ? x.sum(1) : x.amax(1); };
  auto f = compile(fn, {.dynamic = true});
  for (int64_t n : {3, 6, 5, 8}) {  // not 2: equal to dim 0, it would share its symbol (duck sizing)
    manual_seed(n);
    Tensor x = randn({2, n});
    EXPECT_LE(max_abs(f(x), fn(x)), 1e-6);
  }
  EXPECT_EQ(f.stats().graphs_compiled, 2);
}

// A size that coincides with a symbol's value is still right (at worst another graph).
TEST(Dynamic, CoincidingSizesStayCorrect) {
  auto fn = [](const Tensor& x, const Tensor& w) { return matmul(x, w).view({x.size(0), 4, -1}).sum(2); };
  auto f = compile(fn, {.dynamic = true});
  manual_seed(5);
  Tensor w = randn({8, 8});
  for (int64_t n : {3, 4, 8, 5, 4}) {
    Tensor x = randn({n, 8});
    EXPECT_LE(max_abs(f(x, w), fn(x, w)), 1e-5) << n;
  }
}

TEST(Dynamic, OutOfBoundsSizesGiveEagersError) {
  auto fn = [](const Tensor& x) { return x.narrow(1, 0, 4) * 2; };
  auto f = compile(fn, {.dynamic = true});
  EXPECT_LE(max_abs(f(ones({2, 6})), fn(ones({2, 6}))), 0);
  std::string eager;
  try {
    fn(ones({2, 3}));
  } catch (const Error& e) {
    eager = e.what();
  }
  ASSERT_FALSE(eager.empty());
  kiln::testing::expect_error([&] { f(ones({2, 3})); }, eager);
  EXPECT_LE(max_abs(f(ones({2, 9})), fn(ones({2, 9}))), 0);
}

TEST(Dynamic, ASymbolicSizeKeptPastItsCallIsAnError) {
  SymInt kept = 0;
  auto f = compile([&](const Tensor& x) {
    kept = x.sum(1).size(0);
    return x + 1;
  }, {.dynamic = true});
  f(ones({3, 2}));
  ASSERT_TRUE(kept.is_symbolic());
  kiln::testing::expect_error([&] { (void)static_cast<int64_t>(kept); }, "was used after that call ended");
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Every zoo model at its CPU sizes: three batch sizes compile two graphs (the second makes
// the batch dim symbolic), each forward equal to eager's by the accuracy rule.
TEST(Dynamic, EveryZooModelServesNewBatchSizesWithTwoGraphs) {
  for (const std::string& name : models::names()) {
    if (name == "gpt2") continue;
    SCOPED_TRACE(name);
    models::Workload w = models::make_workload(name, kCPU, /*cpu_sizes=*/true);
    w.module->eval();
    auto fast = compile([&](const std::vector<Tensor>& in) { return w.forward(in); });
    NoGradGuard no_grad;
    const int64_t B = w.inputs[0].size(0);
    for (int64_t b : {B, B - 1, std::max<int64_t>(2, B / 2)}) {
      SCOPED_TRACE(b);
      std::vector<Tensor> in;
      for (const Tensor& t : w.inputs) in.push_back(t.narrow(0, 0, b).contiguous());
      Tensor got = fast(in), want = w.forward(in);
      ASSERT_EQ(got.sizes().vec(), want.sizes().vec());
      double tol = 1e-3 * (1 + want.abs().max().item<double>());
      EXPECT_LE(max_abs(got, want), tol);
    }
    EXPECT_EQ(fast.stats().graphs_compiled, 2) << fast.stats().str();
  }
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// A whole training step (forward, backward, AdamW) over changing batch sizes: the step's one
// graph is symbolic from the second size on, and the parameters follow eager's.
TEST(Dynamic, WholeStepOverBatchSizesFollowsEager) {
  manual_seed(8);
  auto m = std::make_shared<models::MLP>(10, 16, 2, 3);
  manual_seed(8);
  auto ref = std::make_shared<models::MLP>(10, 16, 2, 3);
  optim::AdamW opt(m->parameters(), {.lr = 1e-2}), opt_ref(ref->parameters(), {.lr = 1e-2});
  auto step = [](nn::Module& model, optim::Optimizer& o, const Tensor& x, const Tensor& y) {
    Tensor loss = cross_entropy(model.forward(x), y);
    o.zero_grad();
    loss.backward();
    o.step();
    return loss;
  };
  auto fast = compile([&](const Tensor& x, const Tensor& y) { return step(*m, opt, x, y); });
  for (int64_t b : {8, 6, 5, 9, 6}) {
    SCOPED_TRACE(b);
    manual_seed(20 + b);
    Tensor x = randn({b, 10}), y = randint(0, 3, {b});
    Tensor got = fast(x, y), want = step(*ref, opt_ref, x, y);
    EXPECT_LE(max_abs(got, want), 1e-5);
  }
  auto pa = m->parameters(), pb = ref->parameters();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_LE(max_abs(pa[i], pb[i]), 1e-5) << "parameter " << i;
  EXPECT_EQ(fast.stats().graphs_compiled, 2) << fast.stats().str();
}

}  // namespace
}  // namespace kiln
