// Capture: graphs, caching, graph breaks, control flow, backends (Note [Capture semantics]).
#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "ops/registry.h"
#include "tests/unit/expect_error.h"

namespace kiln {
namespace {

void expect_same(const Tensor& a, const Tensor& b, double tol = 0) {
  ASSERT_TRUE(a.defined() && b.defined());
  ASSERT_EQ(a.sizes().vec(), b.sizes().vec());
  ASSERT_EQ(a.dtype(), b.dtype());
  auto x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], y[i], tol * (1 + std::abs(y[i]))) << "element " << i;
}

Tensor f_simple(const Tensor& x, const Tensor& y) { return (x * y).sin() + x.sum(1, true) / 3.0; }

TEST(Capture, FunctionMatchesEagerAndIsCachedForEachBackend) {
  for (const char* backend : {"eager", "aot_eager"}) {
    SCOPED_TRACE(backend);
    manual_seed(1);
    Tensor x = randn({4, 5}), y = randn({4, 5});
    auto f = compile(f_simple, {.backend = backend});
    Tensor want = f_simple(x, y);
    Tensor got = f(x, y);
    expect_same(got, want, 1e-6);
    EXPECT_TRUE(got.has_storage());
    Tensor got2 = f(y, x);
    expect_same(got2, f_simple(y, x), 1e-6);
    EXPECT_EQ(f.stats().graphs_compiled, 1);
    EXPECT_EQ(f.stats().cache_hits, 1);
    EXPECT_EQ(f.stats().calls, 2);
  }
}

TEST(Capture, ModulesWhoseForwardReturnsATupleCompile) {
  manual_seed(3);
  auto lstm = std::make_shared<nn::LSTM>(nn::LSTMOptions{.input_size = 4, .hidden_size = 6, .batch_first = true});
  auto fast = compile(lstm);
  Tensor x = randn({2, 5, 4});
  for (int i = 0; i < 2; ++i) {
    auto [out, hc] = fast->forward(x);
    auto [want, want_hc] = lstm->forward(x);
    expect_same(out, want, 1e-6);
    expect_same(std::get<1>(hc), std::get<1>(want_hc), 1e-6);
  }
  EXPECT_EQ(fast->stats().graphs_compiled, 1);
  auto mha = std::make_shared<nn::MultiheadAttention>(8, 2);
  auto fast_mha = compile(mha);
  Tensor q = randn({3, 2, 8});
  auto [y, w] = fast_mha->forward(q, q, q);
  expect_same(y, std::get<0>(mha->forward(q, q, q)), 1e-6);
  // The one-tensor Module::forward of such a module is the base's error, as for the module itself.
  kiln::testing::expect_error([&] { (void)static_cast<nn::Module&>(*fast).forward(x); }, "forward");
}

TEST(Capture, EagerBackendIsBitForBit) {
  manual_seed(2);
  Tensor x = randn({16, 8});
  auto fn = [](const Tensor& t) { return softmax(t * 2.5, 1).log().mean(); };
  auto f = compile(fn, {.backend = "eager"});
  EXPECT_EQ(f(x).item<double>(), fn(x).item<double>());
}

TEST(Capture, GraphBreakAtItemTakesBothBranches) {
  auto fn = [](const Tensor& x) {
    Tensor s = x.sum();
    if (s.item<float>() > 0) return x * 2;
    return x * 3 - 1;
  };
  auto f = compile(fn);
  Tensor pos = ones({3}), neg = -ones({3});
  expect_same(f(pos), fn(pos));
  expect_same(f(neg), fn(neg));
  expect_same(f(pos), fn(pos));
  EXPECT_EQ(f.stats().breaks.size(), 3u);
  EXPECT_NE(f.stats().breaks[0].reason.find("reads"), std::string::npos);
  // Graph 0 (the sum) is the same every call; graph 1 differs by branch.
  EXPECT_EQ(f.stats().graphs_compiled, 3);
}

TEST(Capture, FullgraphRefusesTheFirstBreak) {
  auto f = compile([](const Tensor& x) { return x * x.sum().item<double>(); }, {.fullgraph = true});
  kiln::testing::expect_error([&] { f(ones({2})); }, "fullgraph=true): graph break at reading its values");
}

TEST(Capture, DataDependentOpBreaks) {
  auto fn = [](const Tensor& x) { return nonzero(x > 0).to(kFloat32).sum() + x.sum(); };
  auto f = compile(fn);
  Tensor x = tensor<float>({1, -2, 3, 0, 5}, {5});
  expect_same(f(x), fn(x));
  ASSERT_FALSE(f.stats().breaks.empty());
  EXPECT_EQ(f.stats().breaks[0].op, "nonzero");
}

TEST(Capture, ControlFlowOnMembersAndCountersGivesEagerAnswers) {
  struct Counter {
    int step = 0;
    Tensor operator()(const Tensor& x) { return ++step % 2 ? x + step : x * step; }
  };
  Counter eager_c;
  auto f = compile(Counter{});
  Tensor x = ones({2});
  for (int i = 0; i < 4; ++i) expect_same(f(x), eager_c(x));
  // Odd and even steps differ in op; the step itself is a wrapped-number input, not part of the graph.
  EXPECT_EQ(f.stats().graphs_compiled, 2);
}

TEST(Capture, LoopTripCountFromAnArgument) {
  auto fn = [](const Tensor& x, int n) {
    Tensor y = x;
    for (int i = 0; i < n; ++i) y = y * 1.5 + 1;
    return y;
  };
  auto f = compile(fn);
  Tensor x = randn({3});
  for (int n : {1, 3, 3, 1}) expect_same(f(x, n), fn(x, n), 1e-6);
  EXPECT_EQ(f.stats().graphs_compiled, 2);
}

TEST(Capture, NewBatchSizeRecompilesOnceAndSaysWhy) {
  auto f = compile([](const Tensor& x) { return relu(x).sum(0); });
  f(ones({4, 3}));
  f(ones({4, 3}));
  f(ones({6, 3}));
  f(ones({6, 3}));
  f(ones({9, 3}));  // dim 0 is symbolic since the second size: no third graph
  EXPECT_EQ(f.stats().graphs_compiled, 2);
  EXPECT_EQ(f.stats().recompiles, 1);
  ASSERT_EQ(f.stats().recompile_reasons.size(), 1u);
  EXPECT_NE(f.stats().recompile_reasons[0].find("input 0 changed from f32[4, 3]"), std::string::npos)
      << f.stats().recompile_reasons[0];
}

TEST(Capture, RecompileLimitFallsBackToEagerWithOneWarning) {
  auto fn = [](const Tensor& x) { return x * 2; };
  auto f = compile(fn, {.dynamic = false, .recompile_limit = 2});  // a symbolic dim would serve every size
  ::testing::internal::CaptureStderr();
  for (int n = 1; n <= 5; ++n) expect_same(f(ones({n})), fn(ones({n})));
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("recompile_limit (2) reached"), std::string::npos) << err;
  EXPECT_EQ(err.find("recompile_limit", err.find("recompile_limit") + 1), std::string::npos) << "warned twice: " << err;
  EXPECT_TRUE(f.stats().fell_back_to_eager);
  EXPECT_EQ(f.stats().calls, 3);
}

TEST(Capture, BadInputGivesEagersErrorOnALaterCall) {
  auto fn = [](const Tensor& a, const Tensor& b) { return matmul(a, b).relu(); };
  auto f = compile(fn);
  for (int i = 0; i < 9; ++i) f(ones({2, 3}), ones({3, 4}));
  std::string eager_msg;
  try {
    fn(ones({2, 3}), ones({5, 4}));
  } catch (const Error& e) {
    eager_msg = e.what();
  }
  ASSERT_FALSE(eager_msg.empty());
  kiln::testing::expect_error([&] { f(ones({2, 3}), ones({5, 4})); }, eager_msg);
  expect_same(f(ones({2, 3}), ones({3, 4})), matmul(ones({2, 3}), ones({3, 4})));
}

// Indices that eager refuses (negative ones, for ops that do not wrap) are refused compiled too.
TEST(Capture, NegativeIndicesRaiseAsInEager) {
  manual_seed(9);
  Tensor w = randn({5, 3});
  auto f = compile([&](const Tensor& i) { return index_select(w, 0, i) + embedding(w, i); });
  Tensor good = tensor<int64_t>({1, 4}, {2});
  expect_same(f(good), index_select(w, 0, good) + embedding(w, good));
  Tensor bad = tensor<int64_t>({-1, 2}, {2});
  kiln::testing::expect_error([&] { f(bad); }, "out of bounds");
  kiln::testing::expect_error([&] { (void)index_select(w, 0, bad); }, "negative indices are not allowed");
}

TEST(Capture, TracersStoredInAMemberBecomeReal) {
  struct Keep {
    Tensor hidden;
    Tensor operator()(const Tensor& x) {
      hidden = x.exp();
      return hidden.sum();
    }
  };
  Keep k;
  auto f = compile(std::ref(k));
  Tensor x = randn({5});
  Tensor s = f(x);
  ASSERT_TRUE(k.hidden.has_storage());
  expect_same(k.hidden, x.exp(), 1e-6);
  expect_same(s, x.exp().sum(), 1e-6);
}

TEST(Capture, InPlaceWritesToInputsAndBuffersLand) {
  for (const char* backend : {"eager", "aot_eager"}) {
    SCOPED_TRACE(backend);
    Tensor buf = zeros({3});
    auto f = compile(
        [&](const Tensor& x) {
          NoGradGuard no_grad;
          buf.mul_(0.5).add_(x);
          Tensor y = x.clone();
          y.mul_(2);
          return y + buf;
        },
        {.backend = backend});
    Tensor x = tensor<float>({1, 2, 3}, {3});
    Tensor r1 = f(x);
    expect_same(buf, x);
    expect_same(r1, x * 3);
    Tensor r2 = f(x);
    expect_same(buf, x * 1.5);
    expect_same(r2, x * 3.5);
  }
}

TEST(Capture, OptionsAreValidated) {
  kiln::testing::expect_error([] { compile([](const Tensor& x) { return x; }, {.backend = "nope"}); },
                              "unknown backend \"nope\"; valid backends: eager, aot_eager, inductor");
  kiln::testing::expect_error([] { compile([](const Tensor& x) { return x; }, {.mode = "fast"}); },
                              "unknown mode \"fast\"");
  kiln::testing::expect_error(
      [] {
        compile([](const Tensor& x) { return x; }, {.options = {{"x", "1"}}});
      },
      "unknown option \"x\"");
  auto names = list_backends();
  EXPECT_NE(std::find(names.begin(), names.end(), "aot_eager"), names.end());
}

TEST(Capture, UserBackendSeesPrimGraphs) {
  static int graphs = 0;
  static size_t ops = 0;
  static std::vector<std::string> names;
  register_backend("counting", [](const compiler::GraphView& g, compiler::GraphFn run_eager) {
    ++graphs;
    ops += g.num_nodes();
    for (size_t i = 0; i < g.num_nodes(); ++i) names.push_back(g.op(i));
    return run_eager;
  });
  auto fn = [](const Tensor& x) { return gelu(x, "tanh").sum() + softmax(x, 0).max(); };
  auto f = compile(fn, {.backend = "counting"});
  Tensor x = randn({6});
  expect_same(f(x), fn(x), 1e-6);
  f(x);
  EXPECT_EQ(graphs, 1);
  EXPECT_GT(ops, 4u);
  for (const std::string& n : names) {
    OpId id{};
    bool found = false;
    for (int i = 0; i < kNumOps && !found; ++i)
      if (n == op_name(static_cast<OpId>(i))) {
        id = static_cast<OpId>(i);
        found = true;
      }
    ASSERT_TRUE(found) << n;
    EXPECT_EQ(op_info(id).kind, OpKind::Prim) << n << " reached a prims-only backend";
  }
}

TEST(Capture, ExplainReportsGraphsAndBreaks) {
  auto out = explain(
      [](const Tensor& x) {
        Tensor y = x * 2;
        if (y.sum().item<double>() > 0) y = y + 1;
        return y;
      },
      ones({2}));
  EXPECT_EQ(out.stats.graphs_compiled, 2);
  ASSERT_EQ(out.stats.breaks.size(), 1u);
  std::string s = out.str();
  EXPECT_NE(s.find("= mul("), std::string::npos) << s;
  EXPECT_NE(s.find("break after graph 0"), std::string::npos) << s;
  // The call site is the user's code that read the value: a function name where the binary
  // exports it, else the binary and offset (for addr2line) — never a frame inside libkiln.
  EXPECT_NE(out.stats.breaks[0].call_site.find("kiln_compile_tests"), std::string::npos)
      << out.stats.breaks[0].call_site;
}

}  // namespace
}  // namespace kiln
