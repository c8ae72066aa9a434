// Backend "inductor" on the CPU: generated loop kernels against eager, the
// scheduler's fusion decisions, and the JIT's disk cache.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include "compile/ir/graph.h"
#include "compile/jit/cpp_jit.h"
#include "compile/lower/layout.h"
#include "compile/lower/schedule.h"
#include "compile/lower/split_reduction.h"
#include "dispatch/dispatch.h"
#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "kiln/optim.h"
#include "kiln/parallel.h"
#include "tests/compile/fresh_jit_cache.h"
#include "tests/unit/expect_error.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// Each test compiles into a cache of its own (cold), removed afterwards.
class Inductor : public testing::FreshJitCache {};

// The first call waits for the kernels (no background compilation): the tests check them.
CompileOptions inductor() { return {.backend = "inductor", .background = false}; }

// Same bits (NaNs equal), same dtype and shape.
void expect_identical(const Tensor& got, const Tensor& want, const char* what) {
  ASSERT_EQ(got.sizes().vec(), want.sizes().vec()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  auto g = got.to_vector<double>(), w = want.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i)
    if (!(g[i] == w[i] || (std::isnan(g[i]) && std::isnan(w[i])))) {
      ADD_FAILURE() << what << ": element " << i << " is " << g[i] << ", eager " << w[i];
      return;
    }
}

void expect_close(const Tensor& got, const Tensor& want, double tol, const char* what) {
  ASSERT_EQ(got.sizes().vec(), want.sizes().vec()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  auto g = got.to_vector<double>(), w = want.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i)
    if (!(std::abs(g[i] - w[i]) <= tol * (1 + std::abs(w[i])) || (std::isnan(g[i]) && std::isnan(w[i])))) {
      ADD_FAILURE() << what << ": element " << i << " is " << g[i] << ", eager " << w[i];
      return;
    }
}

// Pointwise kernels run eager's functors in eager's dtypes: identical results.
TEST_F(Inductor, PointwiseChainsMatchEagerBitForBit) {
  manual_seed(3);
  auto chain = [](const Tensor& a, const Tensor& b) {
    Tensor t = exp(a) * b + 2.5;
    t = where(t > 1, sigmoid(t), tanh(t) - b);
    return clamp(t, -0.75, 0.8) / (abs(b) + 1);
  };
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    auto f = compile(chain, inductor());
    Tensor a = randn({33, 17}).to(dt), b = randn({17}).to(dt);
    expect_identical(f(a, b), chain(a, b), "broadcast");
    // Non-contiguous (transposed) and expanded inputs.
    Tensor at = randn({17, 33}).to(dt).t(), bt = randn({1}).to(dt).expand({17});
    expect_identical(f(at, bt), chain(at, bt), "strided");
    // Generated kernels ran, not eager's (which would match as well).
    EXPECT_GT(f.stats().generated_kernel_runs, 0);
    EXPECT_EQ(f.stats().kernel_fallbacks, 0);
  }
  auto f = compile(chain, inductor());
  Tensor s = full({}, 0.3), e = empty({0, 5});
  expect_identical(f(s, s), chain(s, s), "0-d");
  expect_identical(f(e, randn({5})), chain(e, randn({5})), "empty");
}

TEST_F(Inductor, IntegerBoolAndMixedDtypes) {
  auto fn = [](const Tensor& i, const Tensor& j, const Tensor& x) {
    Tensor m = logical_and(i > j, x < 0.5);
    Tensor k = bitwise_xor(i * 3 + j, j);
    return std::vector<Tensor>{m, k, where(m, x, i.to(kFloat32)), i + x, minimum(i, j)};
  };
  auto f = compile(fn, inductor());
  Tensor i = randint(-100, 100, {6, 7}), j = randint(-100, 100, {7}).to(kInt32), x = rand({6, 7});
  auto got = f(i, j, x), want = fn(i, j, x);
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) expect_identical(got[k], want[k], "output");
  // Integer multiplication wraps as in eager.
  Tensor big = full({4}, int64_t{1} << 62, kInt64);
  auto g = compile([](const Tensor& a) { return a * 4 + 1; }, inductor());
  expect_identical(g(big), big * 4 + 1, "wrap");
}

TEST_F(Inductor, ReductionsMatchEager) {
  manual_seed(5);
  auto fn = [](const Tensor& x) {
    Tensor y = x * x + 1;
    return std::vector<Tensor>{sum(y, {1}),        sum(y, {0}, true), sum(x),
                               amax(x, {1}),       amin(y, {0, 2}),   prod(x * 0.1 + 1, {2}),
                               mean(x, {-1}, true)};
  };
  auto f = compile(fn, inductor());
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor x = randn({5, 6, 7}).to(dt);
    auto got = f(x), want = fn(x);
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k) expect_close(got[k], want[k], dt == kFloat32 ? 1e-5 : 1e-12, "reduction");
    Tensor xt = randn({7, 6, 5}).to(dt).permute({2, 1, 0});
    got = f(xt);
    want = fn(xt);
    for (size_t k = 0; k < got.size(); ++k) expect_close(got[k], want[k], dt == kFloat32 ? 1e-5 : 1e-12, "permuted");
  }
  // max/min propagate NaN; integer sums wrap and give int64.
  Tensor n = randn({3, 4});
  n.select(0, 1).select(0, 2).fill_(std::numeric_limits<float>::quiet_NaN());
  auto g = compile([](const Tensor& x) { return std::vector<Tensor>{amax(x, {1}), amin(x, {0})}; }, inductor());
  auto gn = g(n);
  expect_identical(gn[0], amax(n, {1}), "amax NaN");
  expect_identical(gn[1], amin(n, {0}), "amin NaN");
  Tensor ints = randint(0, 1000, {4, 9}).to(kInt32);
  auto h = compile([](const Tensor& x) { return sum(x * 7, {1}); }, inductor());
  expect_identical(h(ints), sum(ints * 7, {1}), "int sum");
}

// Note [Split reductions]: kernels with few, long rows split into partial and final kernels
// (on every device with KILN_SPLIT_REDUCTIONS=1; by default only generated CUDA) give eager's
// answers: batch norm's per-channel sums and their backward's, a mean, max and min with NaN,
// a full sum, and a pointwise output stored beside the reduction it feeds.
TEST_F(Inductor, SplitReductionsMatchEager) {
  setenv("KILN_SPLIT_REDUCTIONS", "1", 1);
  manual_seed(9);
  auto fn = [](const Tensor& x, const Tensor& mu) {
    Tensor y = relu(x);
    return std::vector<Tensor>{sum(x * x + 1, {0, 2, 3}), mean(x, {0, 2, 3}, true), amax(x, {0, 2, 3}),
                               amin(x, {0, 2, 3}), sum(x), y, sum(y, {0, 2, 3}), sum(x * (x - mu), {0, 2, 3})};
  };
  const int64_t before = compiler::lower::reductions_split();
  auto f = compile(fn, inductor());
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor x = randn({16, 3, 32, 32}).to(dt), mu = randn({1, 3, 1, 1}).to(dt);
    x.select(0, 5).select(0, 1).select(0, 7).select(0, 9).fill_(std::numeric_limits<double>::quiet_NaN());
    auto got = f(x, mu), want = fn(x, mu);
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k) expect_close(got[k], want[k], dt == kFloat32 ? 1e-5 : 1e-12, "split");
    Tensor clean = randn({16, 3, 32, 32}).to(dt);
    got = f(clean, mu);
    want = fn(clean, mu);
    for (size_t k = 0; k < got.size(); ++k) expect_close(got[k], want[k], dt == kFloat32 ? 1e-5 : 1e-12, "split");
  }
  // One reduced dim, cut in two first: a bias gradient's column sums, a row's sum, a vector's.
  auto one = [](const Tensor& a, const Tensor& b, const Tensor& c) {
    return std::vector<Tensor>{sum(a * 2, {0}), amax(b, {1}), sum(c), mean(a, {0}, true)};
  };
  auto h = compile(one, inductor());
  Tensor a = randn({8192, 24}), b = randn({4, 100000}), c = randn({65536});
  auto got = h(a, b, c), want = one(a, b, c);
  for (size_t k = 0; k < got.size(); ++k) expect_close(got[k], want[k], 1e-5, "cut");
  // Kernels of several passes: var_mean, softmax and a normalization over few long rows, and
  // batch norm's training forward and backward (statistics, output and gradients).
  auto passes = [](const Tensor& a, const Tensor& b) {
    auto [v, m] = var_mean(a, {0, 2, 3}, /*correction=*/1, /*keepdim=*/true);
    return std::vector<Tensor>{v, (a - m) * rsqrt(v + 1e-5), softmax(b, 0)};
  };
  auto q = compile(passes, inductor());
  Tensor pa = randn({16, 3, 32, 32}) * 3 + 1, pb = randn({8192, 4});
  got = q(pa, pb);
  want = passes(pa, pb);
  for (size_t k = 0; k < got.size(); ++k) expect_close(got[k], want[k], 1e-5, "passes");
  manual_seed(3);
  auto bn = std::make_shared<nn::BatchNorm2d>(3), bn_ref = std::make_shared<nn::BatchNorm2d>(3);
  auto train = compile([&](const Tensor& x) { return (relu(bn->forward(x)) * x).sum(); }, inductor());
  Tensor bx = randn({16, 3, 32, 32}).requires_grad_(), rx = bx.detach().clone().requires_grad_();
  Tensor lc = train(bx), le = (relu(bn_ref->forward(rx)) * rx).sum();
  expect_close(lc.detach(), le.detach(), 1e-4, "batch norm loss");
  lc.backward();
  le.backward();
  expect_close(bx.grad(), rx.grad(), 1e-4, "batch norm input grad");
  expect_close(bn->weight.grad(), bn_ref->weight.grad(), 1e-4, "batch norm weight grad");
  expect_close(bn->running_var, bn_ref->running_var, 1e-5, "running var");
  unsetenv("KILN_SPLIT_REDUCTIONS");
  EXPECT_GE(compiler::lower::reductions_split() - before, 12);
}

// Note [Shifted batch statistics]: the compiled batch norm takes its statistics in one pass of
// sums shifted by each channel's first element. A mean far above the spread (1e4 against 1),
// and a first element far from its channel's mean, still give eager's output and statistics.
TEST_F(Inductor, BatchNormStatisticsSurviveALargeMean) {
  manual_seed(4);
  auto bn = std::make_shared<nn::BatchNorm2d>(3), bn_ref = std::make_shared<nn::BatchNorm2d>(3);
  bn->momentum = bn_ref->momentum = 1.0;  // the running statistics are the batch's
  auto f = compile([&](const Tensor& x) { return bn->forward(x); }, inductor());
  Tensor x = randn({8, 3, 10, 10}) + 1e4;
  x.select(0, 0).select(0, 1).select(0, 0).select(0, 0).fill_(1e4 + 40.0);  // channel 1 starts 40 sd away
  for (int i = 0; i < 2; ++i) {
    Tensor got = f(x), want = bn_ref->forward(x);
    expect_close(got, want, 1e-3, "batch norm output");
    expect_close(bn->running_mean, bn_ref->running_mean, 1e-6, "running mean");
    expect_close(bn->running_var, bn_ref->running_var, 1e-4, "running var");
    x = x.to(kFloat64);
    bn->to(kFloat64);
    bn_ref->to(kFloat64);
  }
}

// Note [Channels-last graphs]: with KILN_CHANNELS_LAST=all the CPU's graphs take the layout pass
// too (their convolutions compute NCHW and the inductor converts their outputs), so the pass,
// the re-derived views and the generated NHWC kernels are checked here without a GPU: a residual
// conv-BN-ReLU block, pooling, a 1x1 convolution, a permute (re-derived) and a view across the
// permuted dims (its base stays contiguous), forward and gradients against eager's, and the
// caller's tensors contiguous as eager's.
TEST_F(Inductor, ChannelsLastConvolutionsMatchEager) {
  setenv("KILN_CHANNELS_LAST", "all", 1);
  setenv("KILN_SPLIT_REDUCTIONS", "1", 1);  // batch norm's statistics split as on a GPU (Note [Split loop order])
  const int64_t split_before = compiler::lower::reductions_split();
  manual_seed(12);
  Tensor w1 = (randn({8, 3, 3, 3}) * 0.3).requires_grad_(), w2 = (randn({8, 8, 3, 3}) * 0.2).requires_grad_();
  Tensor w3 = (randn({4, 8, 1, 1}) * 0.3).requires_grad_(), b3 = randn({4}).requires_grad_();
  auto bn1 = std::make_shared<nn::BatchNorm2d>(8), bn2 = std::make_shared<nn::BatchNorm2d>(8);
  auto fn = [&](const Tensor& x) {
    Tensor h = relu(bn1->forward(conv2d(x, w1, {}, 1, 1)));
    Tensor r = relu(bn2->forward(conv2d(h, w2, {}, 1, 1)) + h);
    Tensor p = max_pool2d(r, {2, 2});
    Tensor c = conv2d(p, w3, b3);
    Tensor t = c.permute({0, 2, 3, 1}) * 0.5;           // a view of an NHWC value, re-derived
    Tensor v = (c + 1).view({c.size(0), c.size(1), -1});  // no NHWC view: its base stays contiguous
    return std::vector<Tensor>{adaptive_avg_pool2d(c, {1, 1}).flatten(1), t.sum({3}), v.amax({2}), r};
  };
  const int64_t before = compiler::lower::nhwc_convolutions();
  auto f = compile(fn, inductor());
  Tensor x = randn({4, 3, 48, 48}), g0 = randn({4, 4}), g1 = randn({4, 24, 24}), g2 = randn({4, 4}), g3 = randn({4, 8, 48, 48});
  std::vector<Tensor> params{w1, w2, w3, b3, bn1->weight, bn2->weight};
  auto run = [&](bool compiled) {
    std::vector<Tensor> out = compiled ? f(x) : fn(x);
    ((out[0] * g0).sum() + (out[1] * g1).sum() + (out[2] * g2).sum() + (out[3] * g3).sum()).backward();
    std::vector<Tensor> grads;
    for (Tensor& p : params) {
      grads.push_back(p.grad().clone());
      p.set_grad(Tensor());
    }
    return std::make_pair(out, grads);
  };
  auto [ce, ge] = run(false);
  auto [cc, gc] = run(true);
  unsetenv("KILN_CHANNELS_LAST");
  unsetenv("KILN_SPLIT_REDUCTIONS");
  EXPECT_GE(compiler::lower::reductions_split() - split_before, 2);
  EXPECT_GE(compiler::lower::nhwc_convolutions() - before, 5);  // 3 forward, 3 backward, less the first's x gradient
  // Every generated kernel met its buffers in the layouts it was compiled for.
  EXPECT_GT(f.stats().generated_kernel_runs, 0);
  EXPECT_EQ(f.stats().kernel_fallbacks, 0);
  for (size_t k = 0; k < ce.size(); ++k) {
    expect_close(cc[k], ce[k], 1e-5, "output");
    EXPECT_EQ(cc[k].strides().vec(), ce[k].strides().vec()) << "output " << k << " laid out as eager's";
  }
  for (size_t k = 0; k < ge.size(); ++k) {
    expect_close(gc[k], ge[k], 1e-4, "gradient");
    EXPECT_TRUE(gc[k].is_contiguous()) << "gradient " << k;
  }
}

TEST_F(Inductor, TrainingStepMatchesEager) {
  manual_seed(7);
  nn::Linear l1(12, 24), l2(24, 5);
  auto step = [&](const Tensor& x, const Tensor& y) {
    Tensor h = nn::functional::layer_norm(nn::functional::gelu(l1.forward(x)), {24});
    Tensor loss = nn::functional::cross_entropy(l2.forward(h), y);
    loss.backward();
    return loss;
  };
  Tensor x = randn({9, 12}), y = randint(0, 5, {9});
  Tensor want = step(x, y);
  std::vector<Tensor> gw;
  for (Tensor p : {l1.weight, l1.bias, l2.weight, l2.bias}) {
    gw.push_back(p.grad().clone());
    Tensor g = p.grad();
    g.zero_();
  }
  auto f = compile(step, inductor());
  Tensor got = f(x, y);
  expect_close(got, want, 1e-6, "loss");
  size_t k = 0;
  for (Tensor p : {l1.weight, l1.bias, l2.weight, l2.bias}) expect_close(p.grad(), gw[k++], 1e-5, "gradient");
  // And through the AOT backward of a compiled forward.
  auto fwd = compile([&](const Tensor& x2) { return l2.forward(nn::functional::gelu(l1.forward(x2))); }, inductor());
  Tensor xi = randn({9, 12}).requires_grad_(true), xe = xi.detach().clone().requires_grad_(true);
  Tensor w = randn({9, 5});
  (fwd(xi) * w).sum().backward();
  (l2.forward(nn::functional::gelu(l1.forward(xe))) * w).sum().backward();
  expect_close(xi.grad(), xe.grad(), 1e-5, "input gradient");
}

// Note [Fused cross_entropy]: _fused_cross_entropy on bf16 logits (as CUDA's cross_entropy records
// it) gives float32 losses, target weights and logsumexp; compiled, an extern call between
// generated bf16 and float32 kernels, and its backward, from a float32 grad_loss, writes the logits'
// gradient in bf16, as eager.
TEST_F(Inductor, FusedCrossEntropyOnBf16LogitsMatchesEager) {
  manual_seed(9);
  Tensor y = tensor<int64_t>({0, 4, 2, -100, 1, 3}, kInt64);
  auto f = [&](const Tensor& x) {
    std::vector<Tensor> r = call_op(OpId::_fused_cross_entropy, {x * 2.0, y, Tensor()}, {int64_t(-100), 0.1});
    return sum(r[0]) / sum(r[1]) + r[2].mean();
  };
  Tensor x0 = (randn({6, 5}) * 3).to(kBFloat16);
  Tensor xe = x0.clone().requires_grad_(true), xc = x0.clone().requires_grad_(true);
  Tensor want = f(xe);
  auto g = compile(f, inductor());
  Tensor got = g(xc);
  EXPECT_EQ(want.dtype(), kFloat32);
  expect_close(got, want, 1e-6, "loss");
  want.backward();
  got.backward();
  ASSERT_TRUE(xc.grad().defined());
  EXPECT_EQ(xc.grad().dtype(), kBFloat16);
  expect_close(xc.grad(), xe.grad(), 1e-2, "logits' gradient");
}

// Note [Split's derivative]: the backward of split / chunk / unbind is one cat (stack); compiled,
// through the AOT backward and whole-step capture, it gives eager's gradients, with pieces left
// unused and a piece written in place.
TEST_F(Inductor, SplitChunkUnbindBackwardMatchesEager) {
  manual_seed(8);
  Tensor w = randn({6, 9});
  auto body = [&](const Tensor& x) {
    Tensor h = x.matmul(w);  // [5, 9]
    std::vector<Tensor> s = h.split(std::vector<int64_t>{4, 0, 5}, 1);
    std::vector<Tensor> c = h.exp().chunk(4, 1);  // 3, 3, 3: the last piece unused
    std::vector<Tensor> u = h.tanh().unbind(0);
    s[2].mul_(2.0);
    Tensor out = (s[0].sum(1) + s[2].sigmoid().sum(1)) * (c[0] * c[1]).sum(1) + u[1].sum() + u[3].select(0, 2);
    return out;
  };
  for (const char* backend : {"eager", "aot_eager", "inductor"}) {
    SCOPED_TRACE(backend);
    auto f = compile(body, {.backend = backend, .background = false});
    Tensor r = randn({5});
    for (int i = 0; i < 2; ++i) {
      Tensor x0 = randn({5, 6}), xi = x0.clone().requires_grad_(true), xe = x0.clone().requires_grad_(true);
      Tensor got = f(xi), want = body(xe);
      expect_close(got.detach(), want.detach(), 1e-5, "value");
      (got * r).sum().backward();
      (want * r).sum().backward();
      expect_close(xi.grad(), xe.grad(), 1e-4, "gradient");
    }
  }
}

// Counts the kernels the scheduler makes of each graph a function lowers to.
std::vector<compiler::lower::Schedule> schedules_of(const std::function<Tensor(const Tensor&)>& fn, const Tensor& x) {
  static std::vector<compiler::lower::Schedule> seen;
  seen.clear();
  register_backend(
      "count_kernels",
      [](compiler::GraphView gv, compiler::GraphFn eager) {
        seen.push_back(compiler::lower::schedule(gv.graph()));
        return eager;
      },
      true);
  auto f = compile(fn, {.backend = "count_kernels"});
  f(x);
  return seen;
}

TEST_F(Inductor, FusionKinds) {
  manual_seed(1);
  Tensor w = randn({16, 8}), b = randn({8});
  // gelu(x @ w + b): the matmul is an extern call, bias and gelu one loop after it.
  auto s = schedules_of([&](const Tensor& x) { return nn::functional::gelu(matmul(x, w) + b); }, randn({4, 16}));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].kernels.size(), 1u) << s[0].extern_nodes;
  // A pointwise chain of any length is one loop; siblings over the same shape share it.
  s = schedules_of([](const Tensor& x) { return sin(x) * cos(x) + exp(x * 2) - log1p(abs(x)); }, randn({32}));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].kernels.size(), 1u);
  EXPECT_EQ(s[0].extern_nodes, 0);
  // A reduction with its prologue is one loop; sum(x) and sum(x*x) of one input share it.
  s = schedules_of([](const Tensor& x) { return sum(exp(x), {1}) + sum(exp(x) * exp(x), {1}); }, randn({8, 32}));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].kernels.size(), 2u);  // the reductions' loop, then the add of their results
  // layer norm: one kernel, three passes over each row (mean, variance, normalize) while it is in
  // cache (Note [Reduction phases]); the per-row scale is recomputed where it is read.
  s = schedules_of([](const Tensor& x) { return nn::functional::layer_norm(x, {32}); }, randn({8, 32}));
  ASSERT_EQ(s.size(), 1u);
  ASSERT_EQ(s[0].kernels.size(), 1u);
  EXPECT_EQ(s[0].kernels[0].num_phases(), 3);
  // softmax: max, then exp-and-sum, then the division: one kernel of three passes.
  s = schedules_of([](const Tensor& x) { return softmax(x, 1); }, randn({8, 32}));
  ASSERT_EQ(s.size(), 1u);
  ASSERT_EQ(s[0].kernels.size(), 1u);
  EXPECT_EQ(s[0].kernels[0].num_phases(), 3);
  // A reduction over a kept contiguous dim (a bias gradient) keeps that dim innermost (Note [Loop
  // order]): the loop order ends with the kept dim.
  s = schedules_of([](const Tensor& x) { return sum(x * 2, {0}); }, randn({64, 48}));
  ASSERT_EQ(s.size(), 1u);
  ASSERT_EQ(s[0].kernels.size(), 1u);
  EXPECT_EQ(s[0].kernels[0].reduced, (std::vector<bool>{true, false}));
  // A transposed input is read along its contiguous dim: the loop order follows its strides.
  s = schedules_of([](const Tensor& x) { return sum(x.t() * 2, {1}); }, randn({64, 48}));
  ASSERT_EQ(s.size(), 1u);
  ASSERT_GE(s[0].kernels.size(), 1u);
}

TEST_F(Inductor, DiskCacheServesASecondProcessAndRebuildsBadEntries) {
  auto fn = [](const Tensor& x) { return tanh(x) * 3 + 0.25; };
  Tensor x = randn({64});
  auto runs = [] { return compiler::jit::jit_stats().compiler_runs; };
  int before = runs();
  expect_identical(compile(fn, inductor())(x), fn(x), "cold");
  EXPECT_EQ(runs(), before + 1);
  // A second process: nothing in memory, the library on disk.
  compiler::jit::reset_memory_cache();
  compiler::reset();
  int hits = compiler::jit::jit_stats().disk_hits;
  expect_identical(compile(fn, inductor())(x), fn(x), "warm");
  EXPECT_EQ(runs(), before + 1);
  EXPECT_EQ(compiler::jit::jit_stats().disk_hits, hits + 1);
  // Truncated, then bit-flipped: detected and rebuilt, never loaded.
  std::vector<fs::path> libs;
  for (const auto& e : fs::directory_iterator(dir_ / "cpp"))
    if (e.path().extension() == ".so") libs.push_back(e.path());
  ASSERT_EQ(libs.size(), 1u);
  // The damaged file replaces the entry by a rename: the library this process has loaded
  // stays mapped (an in-place change would fault its pages, as it would any loaded library).
  std::string bytes;
  {
    std::ifstream in(libs[0], std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto replace = [&](const std::string& data) {
    fs::path tmp = libs[0].string() + ".damaged";
    std::ofstream(tmp, std::ios::binary).write(data.data(), static_cast<std::streamsize>(data.size()));
    fs::rename(tmp, libs[0]);
  };
  replace(bytes.substr(0, bytes.size() / 2));
  compiler::jit::reset_memory_cache();
  expect_identical(compile(fn, inductor())(x), fn(x), "after truncation");
  EXPECT_EQ(runs(), before + 2);
  std::string flipped = bytes;
  flipped[flipped.size() / 3] = static_cast<char>(flipped[flipped.size() / 3] ^ 0x10);
  replace(flipped);
  compiler::jit::reset_memory_cache();
  expect_identical(compile(fn, inductor())(x), fn(x), "after a bit flip");
  EXPECT_EQ(runs(), before + 3);
}

TEST_F(Inductor, TwoProcessesCompilingAtOnceBothSucceed) {
  auto fn = [](const Tensor& x) { return expm1(x) * x - 7; };
  Tensor x = randn({100});
  Tensor want = fn(x);
  std::vector<pid_t> kids;
  for (int k = 0; k < 2; ++k) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int rc = 1;
      try {
        Tensor got = compile(fn, inductor())(x);
        rc = got.to_vector<double>() == want.to_vector<double>() ? 0 : 2;
      } catch (...) {
        rc = 3;
      }
      _exit(rc);
    }
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }
}

// Note [Specialization limit]: sizes that change every call (a mixture of experts' tokens per
// expert) compile at most recompile_limit times at a call site, then run with "aot_eager": the
// same forward and gradients as eager, no more C++, one warning.
TEST_F(Inductor, SpecializationsCountTowardRecompileLimit) {
  manual_seed(5);
  Tensor w = randn({8}).requires_grad_(true), we = w.detach().clone().requires_grad_(true);
  auto fn = [](const Tensor& x, const Tensor& wt) { return (tanh(x) * wt).sum(0) * 2 + 1; };
  auto f = compile(fn, {.backend = "inductor", .recompile_limit = 4, .background = false});
  auto libraries = [] {
    const auto s = compiler::jit::jit_stats();
    return s.compiler_runs + s.disk_hits + s.memory_hits;
  };
  int after_limit = -1;
  ::testing::internal::CaptureStderr();
  for (int64_t n = 3; n < 15; ++n) {
    SCOPED_TRACE(n);
    // The input is not a leaf, so its size may become symbolic (parameters keep theirs).
    Tensor a = randn({n, 8}).requires_grad_(true), ae = a.detach().clone().requires_grad_(true);
    Tensor got = f(a * 1.0, w), want = fn(ae * 1.0, we);
    expect_close(got, want, 1e-6, "forward");
    got.sum().backward();
    want.sum().backward();
    expect_close(a.grad(), ae.grad(), 1e-6, "input gradient");
    expect_close(w.grad(), we.grad(), 1e-5, "parameter gradient");
    if (n == 6) after_limit = libraries();
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  const auto& s = f.stats();
  EXPECT_EQ(s.graphs_compiled + s.specializations, 4) << s.str();
  EXPECT_EQ(s.limited_specializations, 8) << s.str();
  EXPECT_TRUE(s.specialization_limit_reached);
  EXPECT_FALSE(s.fell_back_to_eager);
  EXPECT_EQ(libraries(), after_limit) << "inductor compiled past the limit";
  EXPECT_NE(err.find("recompile_limit (4) reached"), std::string::npos) << err;
  EXPECT_EQ(err.find("recompile_limit", err.find("recompile_limit") + 1), std::string::npos) << "warned twice: " << err;
}

// Note [JIT locks]: a thread loading a cached library does not wait for another thread's
// compiler run. The compiler is wrapped in a script that sleeps first, so that a compile surely
// takes over a second whatever the machine's load.
TEST_F(Inductor, CachedLibrariesLoadWhileAnotherThreadCompiles) {
  namespace jit = compiler::jit;
  const std::string real = jit::compiler_command();
  const char* old = std::getenv("KILN_CXX");
  const std::string saved = old ? old : "";
  const fs::path wrapper = dir_ / "slow-cxx.sh";
  fs::create_directories(dir_);
  std::ofstream(wrapper) << "#!/bin/sh\nsleep 1.5\nexec " << real << " \"$@\"\n";
  fs::permissions(wrapper, fs::perms::owner_all);
  setenv("KILN_CXX", wrapper.c_str(), 1);
  auto source = [](int k) { return "extern \"C\" int f(int x) { return x * " + std::to_string(k) + "; }\n"; };
  const std::string cached = source(3);
  using Fn = int (*)(int);
  EXPECT_EQ(reinterpret_cast<Fn>(jit::compile_cpp(cached)->symbol("f"))(2), 6);
  jit::reset_memory_cache();  // B's library is on disk, as a second process would find it

  double a_seconds = 0, b_seconds = 0;
  std::thread a([&] {
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(reinterpret_cast<Fn>(jit::compile_cpp(source(5))->symbol("f"))(2), 10);
    a_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
  // B starts once A's compiler is running: its log file exists from the process's start.
  auto compiler_running = [&] {
    for (const auto& e : fs::directory_iterator(dir_ / "cpp"))
      if (e.path().string().ends_with(".tmp.log")) return true;
    return false;
  };
  const auto wait0 = std::chrono::steady_clock::now();
  while (!compiler_running() && std::chrono::steady_clock::now() - wait0 < std::chrono::seconds(30))
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_TRUE(compiler_running()) << "thread A's compiler never started";
  const int disk_hits = jit::jit_stats().disk_hits;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(reinterpret_cast<Fn>(jit::compile_cpp(cached)->symbol("f"))(4), 12);
  b_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  a.join();
  EXPECT_EQ(jit::jit_stats().disk_hits, disk_hits + 1);
  EXPECT_GT(a_seconds, 1.0);
  EXPECT_LT(b_seconds, 0.5 * a_seconds) << "B waited for A's compile: A " << a_seconds << " s, B " << b_seconds << " s";

  // Two threads asking for one new key: one compiler run, both get its library.
  const int runs = jit::jit_stats().compiler_runs;
  std::shared_ptr<const jit::Library> l1, l2;
  std::thread t1([&] { l1 = jit::compile_cpp(source(7)); });
  std::thread t2([&] { l2 = jit::compile_cpp(source(7)); });
  t1.join();
  t2.join();
  EXPECT_EQ(jit::jit_stats().compiler_runs, runs + 1);
  ASSERT_TRUE(l1 && l2);
  EXPECT_EQ(l1.get(), l2.get());
  if (old)
    setenv("KILN_CXX", saved.c_str(), 1);
  else
    unsetenv("KILN_CXX");
}

// Note [Cache size bound]: past KILN_CACHE_MAX_MB the least recently used entries go, where a
// load from disk counts as a use; temporaries of a compile in flight stay.
TEST_F(Inductor, DiskCacheKeepsToItsBoundLeastRecentlyUsedFirst) {
  namespace jit = compiler::jit;
  auto source = [](int k) { return "extern \"C\" int g(int x) { return x + " + std::to_string(1000 + k) + "; }\n"; };
  auto entry_bytes = [&](int k) -> uintmax_t {
    uintmax_t n = 0;
    for (const auto& e : fs::directory_iterator(dir_ / "cpp")) {
      std::ifstream in(e.path());
      std::string text((std::istreambuf_iterator<char>(in)), {});
      if (e.path().extension() == ".cpp" && text == source(k)) {
        n += fs::file_size(e.path());
        fs::path so = e.path();
        n += fs::exists(so.replace_extension(".so")) ? fs::file_size(so) : 0;
      }
    }
    return n;
  };
  auto has = [&](int k) { return entry_bytes(k) > 0; };
  jit::compile_cpp(source(0));
  const uintmax_t one = entry_bytes(0);
  ASSERT_GT(one, 0u);
  // Room for two entries and a half (the entries differ by a few bytes at most).
  setenv("KILN_CACHE_MAX_MB", std::to_string(2.5 * static_cast<double>(one) / (1 << 20)).c_str(), 1);
  // Another process's temporary, larger than the bound, and new: neither counted nor deleted.
  const fs::path tmp = dir_ / "cpp" / "0123456789abcdef.so.99999-1.tmp";
  std::ofstream(tmp) << std::string(3 * one, 'x');
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  jit::compile_cpp(source(1));
  EXPECT_TRUE(has(0) && has(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  jit::reset_memory_cache();
  const int hits = jit::jit_stats().disk_hits;
  jit::compile_cpp(source(0));  // a use of entry 0: now entry 1 is the least recently used
  EXPECT_EQ(jit::jit_stats().disk_hits, hits + 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  jit::compile_cpp(source(2));
  EXPECT_TRUE(has(0));
  EXPECT_FALSE(has(1));
  EXPECT_TRUE(has(2));
  EXPECT_TRUE(fs::exists(tmp));
  uintmax_t total = 0;
  for (const auto& e : fs::directory_iterator(dir_ / "cpp"))
    if (e.path() != tmp) total += fs::file_size(e.path());
  EXPECT_LE(total, static_cast<uintmax_t>(2.5 * static_cast<double>(one)));
  setenv("KILN_CACHE_MAX_MB", "lots", 1);
  kiln::testing::expect_error([&] { jit::compile_cpp(source(3)); }, "KILN_CACHE_MAX_MB must be a positive number");
  unsetenv("KILN_CACHE_MAX_MB");
}

TEST_F(Inductor, MissingCompilerIsAClearError) {
  setenv("KILN_CXX", "/nonexistent/c++", 1);
  auto f = compile([](const Tensor& x) { return x * 5 + 1; }, inductor());
  kiln::testing::expect_error([&] { f(randn({3})); }, "needs a C++ compiler");
  unsetenv("KILN_CXX");
  // eager and aot_eager need none.
  setenv("KILN_CXX", "/nonexistent/c++", 1);
  Tensor x = randn({3});
  expect_identical(compile([](const Tensor& t) { return t * 5 + 1; })(x), x * 5 + 1, "aot_eager");
  unsetenv("KILN_CXX");
}

// Note [Kernel parameters]: sizes and strides are kernel arguments, so a graph at another batch
// size generates the same source and loads the library already compiled.
TEST_F(Inductor, KernelsOfOneStructureServeOtherSizes) {
  auto body = [](const Tensor& x) { return std::vector<Tensor>{softmax(x * 2, -1), sum(x.exp(), {0}), sum(x)}; };
  auto f = compile(body, {.dynamic = false, .backend = "inductor", .background = false});
  Tensor x0 = randn({4, 6});
  f(x0);
  const int runs = compiler::jit::jit_stats().compiler_runs;
  for (int64_t n : {5, 9, 300}) {
    Tensor x = randn({n, 6});
    auto got = f(x), want = body(x);
    for (size_t k = 0; k < got.size(); ++k) expect_close(got[k], want[k], 1e-5, "other size");
  }
  EXPECT_EQ(compiler::jit::jit_stats().compiler_runs, runs) << "a new size ran the C++ compiler";
  EXPECT_GE(f.stats().graphs_compiled, 4);
  EXPECT_GT(f.stats().generated_kernel_runs, 0);
}

// Note [Max-autotune]: each kernel's thread count is timed on its first run and kept in the disk
// cache, where a later process finds it; results are the same either way.
TEST_F(Inductor, MaxAutotuneTimesThreadCountsAndKeepsThem) {
  const int saved = get_num_threads();
  set_num_threads(2);
  auto body = [](const Tensor& x) { return std::vector<Tensor>{(x * 2 + 1).exp(), sum(x * x, {1})}; };
  auto f = compile(body, {.mode = "max-autotune", .backend = "inductor", .background = false});
  Tensor x = randn({64, 1024});
  for (int i = 0; i < 2; ++i) {
    auto got = f(x), want = body(x);
    expect_close(got[0], want[0], 1e-6, "pointwise");
    expect_close(got[1], want[1], 1e-5, "reduction");
  }
  set_num_threads(saved);
  int choices = 0;
  for (const auto& e : fs::directory_iterator(dir_ / "autotune")) {
    std::ifstream in(e.path());
    int t = 0;
    ASSERT_TRUE(in >> t) << e.path();
    EXPECT_TRUE(t == 1 || t == 2) << e.path() << " holds " << t;
    ++choices;
  }
  EXPECT_EQ(choices, 1) << "one choice per kernel (the exp and the row sums share one loop)";
}

// Note [Writing into inputs]: a compiled training step stores the new parameters and AdamW's
// moments into their own buffers; over several steps the losses, parameters and moments stay
// eager's, and the parameters stay the same tensors.
TEST_F(Inductor, WholeTrainingStepWritesParametersInPlaceLikeEager) {
  manual_seed(3);
  nn::Linear a1(16, 32), a2(32, 4);
  manual_seed(3);
  nn::Linear b1(16, 32), b2(32, 4);
  std::vector<Tensor> pa = {a1.weight, a1.bias, a2.weight, a2.bias}, pb = {b1.weight, b1.bias, b2.weight, b2.bias};
  std::vector<const void*> where;
  for (const Tensor& t : pa) where.push_back(t.data_ptr());
  optim::AdamW oa(pa, {.lr = 1e-2}), ob(pb, {.lr = 1e-2});
  Tensor x = randn({8, 16}), y = randint(0, 4, {8});
  auto step = [&](nn::Linear& l1, nn::Linear& l2, optim::AdamW& o) {
    Tensor loss = cross_entropy(l2.forward(relu(l1.forward(x))), y);
    o.zero_grad(true);
    loss.backward();
    o.step();
    return loss;
  };
  auto fast = compile([&] { return step(a1, a2, oa); }, {.backend = "inductor", .background = false});
  for (int i = 0; i < 4; ++i) {
    Tensor la = fast(), lb = step(b1, b2, ob);
    expect_close(la, lb, 1e-5, "loss");
  }
  for (size_t i = 0; i < pa.size(); ++i) {
    expect_close(pa[i], pb[i], 1e-5, "parameter");
    EXPECT_EQ(pa[i].data_ptr(), where[i]) << "parameter " << i << " is not the tensor it was";
  }
  EXPECT_GT(fast.stats().generated_kernel_runs, 0);
}

// A compiled training step's optimizer update, as scheduled: each parameter's AdamW update is one
// pass (the step count it reads is computed ahead, Note [Deferred side work]), the weight
// gradient is read where the matmul left it (Note [Copy elision]), and large parameters are not
// all updated in one loop that streams every array at once (Note [Horizontal streams]).
TEST_F(Inductor, WholeStepUpdatesEachParameterInOnePass) {
  static std::vector<std::pair<compiler::Graph, compiler::lower::Schedule>> got;
  got.clear();
  register_backend(
      "whole_step_schedule",
      [](compiler::GraphView gv, compiler::GraphFn eager) {
        got.emplace_back(gv.graph(), compiler::lower::schedule(gv.graph()));
        return eager;
      },
      true);
  manual_seed(4);
  // Four 512 x 512 weights (each over the streaming threshold) and their biases.
  std::vector<std::shared_ptr<nn::Linear>> layers;
  std::vector<Tensor> params;
  for (int i = 0; i < 4; ++i) {
    layers.push_back(std::make_shared<nn::Linear>(512, 512));
    params.push_back(layers.back()->weight);
    params.push_back(layers.back()->bias);
  }
  optim::AdamW opt(params, {.lr = 1e-3});
  Tensor x = randn({8, 512});
  auto step = compile(
      [&] {
        Tensor h = x;
        for (auto& l : layers) h = relu(l->forward(h));
        Tensor loss = h.square().mean();
        loss.backward();
        opt.step();
        opt.zero_grad(true);
        return loss;
      },
      {.backend = "whole_step_schedule"});
  (void)step();
  ASSERT_EQ(got.size(), 1u);
  const compiler::Graph& g = got[0].first;
  const compiler::lower::Schedule& s = got[0].second;
  for (const compiler::Node& n : g.nodes) {
    if (n.op != OpId::to && n.op != OpId::clone) continue;
    const TensorMeta &in = g.values[static_cast<size_t>(n.inputs[0])].meta, &out = g.values[static_cast<size_t>(n.outputs[0])].meta;
    EXPECT_FALSE(in.dtype == out.dtype && in.sizes == out.sizes && in.strides == out.strides)
        << "a copy of a " << shape_str(in.sizes) << " value is left in the step";
  }
  int updates = 0;  // kernels that store a [512, 512] value: the weights' updates
  for (size_t k = 0; k < s.kernels.size(); ++k) {
    EXPECT_EQ(s.closed_by[k].find("reads deferred side work"), std::string::npos) << s.closed_by[k];
    const compiler::lower::LoopKernel& kern = s.kernels[k];
    int64_t points = 1;
    for (int64_t d : kern.sizes) points *= d;
    int streamed = 0;
    for (const compiler::lower::Buffer& b : kern.buffers) {
      int64_t n = 1;
      for (int64_t d : g.values[static_cast<size_t>(b.value)].meta.sizes) n *= d;
      streamed += !b.output && n == points;
    }
    if (points == 512 * 512) {
      ++updates;
      EXPECT_LE(streamed, 8) << "kernel " << k << " reads " << streamed << " arrays side by side";
    }
  }
  // Four weights, two side by side per loop at most.
  EXPECT_GE(updates, 2);
}

// Note [Background compilation]: calls run the graph with eager kernels while its code compiles,
// then the kernels; the values agree throughout (reductions within the accuracy rule).
TEST_F(Inductor, BackgroundCompilationRunsEagerKernelsUntilTheCodeIsReady) {
  auto body = [](const Tensor& x) { return (x.sin() * 2 + 1).sum(1); };
  auto f = compile(body, {.backend = "inductor"});  // background is the default
  Tensor x = randn({8, 16});
  expect_close(f(x), body(x), 1e-6, "first call");
  // A cold compile starts the C++ compiler: far slower than the first call's eager kernels.
  EXPECT_GE(f.stats().background_runs, 1);
  const auto t0 = std::chrono::steady_clock::now();
  while (f.stats().generated_kernel_runs == 0 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(300)) {
    expect_close(f(x), body(x), 1e-6, "while compiling");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GT(f.stats().generated_kernel_runs, 0) << "the kernels never replaced the eager runs";
  expect_close(f(x), body(x), 1e-6, "generated");
  EXPECT_GT(f.stats().background_compile_ms, 0.0);
}

// A build that fails in the background raises its error on a later call, as a synchronous
// compile raises it on the first.
TEST_F(Inductor, BackgroundCompileErrorReachesTheCaller) {
  setenv("KILN_CXX", "/nonexistent/c++", 1);
  auto f = compile([](const Tensor& x) { return x * 5 + 1; }, {.backend = "inductor"});
  Tensor x = randn({3});
  std::string message;
  const auto t0 = std::chrono::steady_clock::now();
  while (message.empty() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60)) {
    try {
      expect_identical(f(x), x * 5 + 1, "while compiling");
    } catch (const std::exception& e) {
      message = e.what();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  unsetenv("KILN_CXX");
  EXPECT_NE(message.find("needs a C++ compiler"), std::string::npos) << message;
}

}  // namespace
}  // namespace kiln
