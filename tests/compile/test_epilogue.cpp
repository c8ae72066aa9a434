// Backend "inductor"'s GEMM epilogues (Note [GEMM epilogues]): float32 linear layers with their
// activation and residual add become one _addmm_epilogue extern call; compiled forward and
// training steps still match eager, and the counts show what was fused.
#include <gtest/gtest.h>

#include <string>

#include "compile/lower/epilogue.h"
#include "kiln/backends.h"
#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "tests/compile/compare.h"
#include "tests/compile/fresh_jit_cache.h"

namespace kiln {
namespace {

class Epilogue : public testing::FreshJitCache {};

CompileOptions inductor() { return {.backend = "inductor", .background = false}; }

// Chains the epilogue pass rewrote while `run` compiled and ran.
template <class F>
int64_t epilogues_in(F&& run) {
  const int64_t before = compiler::lower::gemm_epilogues_fused();
  run();
  return compiler::lower::gemm_epilogues_fused() - before;
}

// An MLP of every activation the pass knows, with a residual block over 3-D activations.
struct Net {
  mutable nn::Linear l1{16, 32}, l2{32, 32}, l3{32, 32}, l4{32, 32}, l5{32, 8};
  Tensor operator()(const Tensor& x) const {
    Tensor h = relu(l1.forward(x));
    h = nn::functional::gelu(l2.forward(h));
    h = h + nn::functional::gelu(l3.forward(h), "tanh");  // linear, gelu-tanh, residual
    h = silu(l4.forward(h)) + h;
    return l5.forward(h);
  }
  std::vector<Tensor> params() const {
    return {l1.weight, l1.bias, l2.weight, l2.bias, l3.weight, l3.bias, l4.weight, l4.bias, l5.weight, l5.bias};
  }
};

TEST_F(Epilogue, CompiledForwardMatchesEagerAndFusesEveryLayer) {
  manual_seed(5);
  Net net;
  NoGradGuard no_grad;
  for (bool onednn : {true, false}) {
    SCOPED_TRACE(onednn ? "oneDNN" : "kiln GEMM (KILN_ONEDNN=0)");
    const bool prev = backends::onednn::enabled();
    backends::onednn::set_enabled(onednn);
    auto f = compile([&](const Tensor& x) { return net(x); }, inductor());
    const int64_t fused = epilogues_in([&] {
      for (std::vector<int64_t> s : {std::vector<int64_t>{64, 16}, std::vector<int64_t>{4, 24, 16}}) {
        Tensor x = randn(s);  // 2-D, and 3-D (the GEMM on a view of the rows)
        testing::expect_forward_close(f(x), net(x), "forward " + std::to_string(s.size()) + "-D");
      }
    });
    backends::onednn::set_enabled(prev);
    // Five layers in each of the two graphs: relu, gelu, gelu-tanh + residual, silu + residual,
    // and the last layer's bias.
    EXPECT_EQ(fused, 10);
  }
}

// The count test: the chain leaves no loop kernel behind, and without the pass (float64) it does.
TEST_F(Epilogue, ChainBecomesOneExternCall) {
  manual_seed(6);
  Tensor w = randn({24, 16}), b = randn({24});
  auto layer = [&](const Tensor& x, const Tensor& r) {
    return nn::functional::gelu(nn::functional::linear(x, w.to(x.dtype()), b.to(x.dtype()))) + r;
  };
  NoGradGuard no_grad;
  auto f = compile(layer, inductor());
  Tensor x = randn({40, 16}), r = randn({40, 24});
  EXPECT_EQ(epilogues_in([&] { testing::expect_forward_close(f(x, r), layer(x, r), "forward"); }), 1);
  EXPECT_EQ(f.stats().generated_kernel_runs, 0) << "a loop kernel still runs beside the GEMM";
  // float64 (and other dtypes) stay unfused: mm, then a generated loop.
  auto g = compile(layer, inductor());
  Tensor xd = x.to(kFloat64), rd = r.to(kFloat64);
  EXPECT_EQ(epilogues_in([&] { testing::expect_forward_close(g(xd, rd), layer(xd, rd), "float64"); }), 0);
  EXPECT_GT(g.stats().generated_kernel_runs, 0);
}

// A GEMM output read by anything besides the chain keeps its own buffer: no rewrite.
TEST_F(Epilogue, OutputReadElsewhereIsNotFused) {
  manual_seed(7);
  Tensor w = randn({16, 8}), b = randn({8});
  NoGradGuard no_grad;
  auto fn = [&](const Tensor& x) {
    Tensor y = matmul(x, w);
    return std::make_tuple(relu(y + b), y * 2);
  };
  auto f = compile(fn, inductor());
  Tensor x = randn({5, 16});
  Tensor a, c;
  EXPECT_EQ(epilogues_in([&] { std::tie(a, c) = f(x); }), 0);
  auto [ea, ec] = fn(x);
  testing::expect_forward_close(a, ea, "relu");
  testing::expect_forward_close(c, ec, "y * 2");
}

// A training step: relu layers fuse whole (relu's VJP reads its output); gelu and silu layers
// fuse the bias only, since their VJPs read the pre-activation value the forward saves.
TEST_F(Epilogue, TrainingStepMatchesEager) {
  manual_seed(8);
  Net net;
  Tensor x = randn({4, 24, 16}), y = randint(0, 8, {96});
  auto step = [&](const Tensor& x2, const Tensor& y2) {
    Tensor loss = nn::functional::cross_entropy(net(x2).reshape({-1, 8}), y2);
    loss.backward();
    return loss;
  };
  Tensor want = step(x, y);
  std::vector<Tensor> eager;
  for (const Tensor& p : net.params()) {
    eager.push_back(p.detach().clone());
    eager.back().mutable_grad() = p.grad().clone();
    Tensor g = p.grad();
    g.zero_();
  }
  auto f = compile(step, inductor());
  Tensor got;
  EXPECT_EQ(epilogues_in([&] { got = f(x, y); }), 5);
  testing::expect_forward_close(got, want, "loss");
  testing::expect_grads_close(net.params(), eager);
  // And through the AOT backward of a compiled forward, the input's gradient too.
  for (const Tensor& p : net.params()) {
    Tensor g = p.grad();
    g.zero_();
  }
  auto fwd = compile([&](const Tensor& x2) { return net(x2); }, inductor());
  Tensor xi = x.clone().requires_grad_(true), xe = x.clone().requires_grad_(true), gy = randn({4, 24, 8});
  EXPECT_EQ(epilogues_in([&] { (fwd(xi) * gy).sum().backward(); }), 5);
  (net(xe) * gy).sum().backward();
  testing::expect_forward_close(xi.grad(), xe.grad(), "input gradient");
}

}  // namespace
}  // namespace kiln
