// Issue 27: what selects a compiled graph (assume_pure guards, confirmed hash hits) and the
// thread contract (Note [Compile threads]).
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "compile/capture/compiled_function.h"
#include "kiln/kiln.h"
#include "tests/compile/compare.h"

namespace kiln {
namespace {

using kiln::testing::max_abs;

struct Net : nn::Module {
  std::shared_ptr<nn::Linear> fc;
  std::shared_ptr<nn::BatchNorm1d> bn;
  Net() : nn::Module("Net") {
    fc = register_module("fc", std::make_shared<nn::Linear>(4, 6));
    bn = register_module("bn", std::make_shared<nn::BatchNorm1d>(6));
  }
  Tensor forward(const Tensor& x) override { return bn->forward(fc->forward(x)); }
};

// A child's train/eval flag is a guard: the child set back to train() runs the training graph.
TEST(Guards, AssumePureSeesEverySubmodulesTrainingFlag) {
  manual_seed(2);
  auto m = std::make_shared<Net>();
  manual_seed(2);
  auto ref = std::make_shared<Net>();
  auto fast = compile(m, {.assume_pure = true});
  manual_seed(4);
  Tensor x = randn({8, 4}) * 3 + 1;
  NoGradGuard no_grad;
  auto step = [&](bool child_training) {
    m->bn->train(child_training);
    ref->bn->train(child_training);
    Tensor got = fast->forward(x), want = ref->forward(x);
    EXPECT_LE(max_abs(got, want), 1e-5) << "child training " << child_training;
    EXPECT_LE(max_abs(m->bn->buffers()[0], ref->bn->buffers()[0]), 1e-6);
  };
  step(true);
  step(false);
  step(false);  // replayed
  step(true);   // the training graph again, not the eval one
  step(true);
  EXPECT_GE(fast->stats().pure_replays, 2);
}

TEST(Guards, ResetDropsAssumePureEntries) {
  Tensor w = ones({3});
  auto f = compile([&](const Tensor& x) { return x * w; }, {.assume_pure = true});
  Tensor x = ones({3});
  f(x);
  f(x);
  EXPECT_EQ(f.stats().pure_replays, 1);
  compiler::reset();
  f(x);
  EXPECT_EQ(f.stats().pure_replays, 1);  // recorded again: no entry survived the reset
  EXPECT_EQ(f.stats().calls, 2);
}

// Note [Confirmed hits]: two different graphs given the same hash each run as themselves.
TEST(Guards, HashCollisionRunsTheRightGraph) {
  using namespace compiler;
  CompiledFunction cf(CompileOptions{.backend = "aot_eager"});
  Tensor x = tensor(std::vector<float>{1, 2});
  TensorMeta m{Shape{2}, kFloat32, kCPU, Shape{1}, 0};
  auto graph_of = [&](OpId op) {
    Graph g;
    int in = g.add_input(m, false);
    int n = g.add_node(op, Attrs{}, {in}, {m});
    g.outputs = {g.nodes[static_cast<size_t>(n)].outputs[0]};
    return g;
  };
  Graph neg_g = graph_of(OpId::neg), exp_g = graph_of(OpId::exp);
  const uint64_t same_hash = 42;
  EXPECT_LE(max_abs(cf.run_graph(0, neg_g, same_hash, {x}, false).outputs.at(0), -x), 0);
  EXPECT_LE(max_abs(cf.run_graph(0, exp_g, same_hash, {x}, false).outputs.at(0), exp(x)), 0);
  EXPECT_LE(max_abs(cf.run_graph(0, neg_g, same_hash, {x}, false).outputs.at(0), -x), 0);
  EXPECT_EQ(cf.stats_.graphs_compiled, 2);
}

// Note [Compile threads]: calls from two threads serialize, each with eager's answer.
TEST(Threads, TwoThreadsCallingOneCompiledFunctionGetEagersAnswers) {
  for (const char* backend : {"eager", "aot_eager"}) {
    SCOPED_TRACE(backend);
    Tensor w = tensor(std::vector<float>{1, 2, 3}).requires_grad_(true);
    auto body = [&](const Tensor& x) { return (x * w).sum(); };
    auto f = compile(body, {.backend = backend});
    std::vector<int> bad(2, 0);
    auto worker = [&](int id) {
      for (int i = 0; i < 40; ++i) {
        Tensor x = full({3}, static_cast<double>(id * 100 + i));
        Tensor got = f(x);
        if (got.item<double>() != 6.0 * (id * 100 + i)) ++bad[static_cast<size_t>(id)];
      }
    };
    std::thread a(worker, 0), b(worker, 1);
    a.join();
    b.join();
    EXPECT_EQ(bad[0], 0);
    EXPECT_EQ(bad[1], 0);
  }
}

TEST(Threads, ResetFromInsideACompiledBodyDoesNotDeadlock) {
  bool reset_now = false;
  auto f = compile([&](const Tensor& x) {
    if (reset_now) compiler::reset();
    return x + 1;
  });
  Tensor x = zeros({2});
  f(x);
  reset_now = true;
  EXPECT_EQ(f(x).to_vector<float>(), std::vector<float>({1, 1}));
  reset_now = false;
  EXPECT_EQ(f(x).to_vector<float>(), std::vector<float>({1, 1}));
  EXPECT_EQ(f.stats().graphs_compiled, 2);  // the reset inside the second call dropped its graph
}

}  // namespace
}  // namespace kiln
