// Bugs the differential fuzzer found (tests/compile/fuzz_compile.cpp), reduced by hand to a few
// lines each: eager's answer is what every backend must give. DISABLED_ until fixed; each names
// the fuzzer's switch (Switches in tests/compile/fuzz/program.h) to turn on with the fix.
// Run them: kiln_compile_tests --gtest_filter='FuzzFound.*' --gtest_also_run_disabled_tests
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "dispatch/dispatch.h"
#include "kiln/compile.h"
#include "kiln/kiln.h"

namespace kiln {
namespace {

using Tensors = std::vector<Tensor>;

CompileOptions backend(const char* name, bool pure = false) {
  CompileOptions o;
  o.backend = name;
  o.assume_pure = pure;
  o.background = false;  // inductor's kernels, not its eager runs while they compile
  return o;
}

// The message of the error f raises, or "" when it raises none.
template <class F>
std::string message(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return std::string(e.what());
  }
  return std::string();
}

// reads_after_break: the second item() reads a tensor made between two breaks.
TEST(FuzzFound, ReadsAfterBreak) {
  auto f = compile(
      [](const Tensor& x) {
        Tensor a = x.sum().item<double>() > 0 ? x * 2 : x - 1;
        return a.sum().item<double>() > 0 ? a * 2 : a - 1;
      },
      backend("aot_eager"));
  EXPECT_EQ(f(ones({3})).to_vector<float>(), std::vector<float>({4, 4, 4}));
}

// detach_outputs: a detached output requires grad under aot_eager.
TEST(FuzzFound, DetachedOutputRequiresNoGrad) {
  auto f = compile(
      [](const Tensor& x) {
        Tensor y = x * 2;
        return Tensors{y, y.detach()};
      },
      backend("aot_eager"));
  Tensors r = f(ones({3}).requires_grad_(true));
  EXPECT_FALSE(r[1].requires_grad());
}

// detach_outputs under assume_pure: the guard-only replay gives the detached alias no grad_fn.
TEST(FuzzFound, PureDetachedOutputRequiresNoGrad) {
  auto f = compile(
      [](const Tensors& in) {
        Tensor y = in[0].reshape({-1});
        return Tensors{y, y.detach()};
      },
      backend("aot_eager", true));
  for (double v : {1.0, 2.0}) {
    Tensor x = full({2, 3}, v).requires_grad_(true);
    Tensors r = f(Tensors{x});
    EXPECT_TRUE(r[0].requires_grad());
    EXPECT_FALSE(r[1].requires_grad()) << v;
    Tensors roots;
    for (const Tensor& t : r)
      if (t.requires_grad()) roots.push_back(t);
    Tensors g = autograd::grad(roots, {x}, Tensors(roots.size(), ones({6})), std::nullopt, false, true);
    EXPECT_EQ(g[0].to_vector<float>(), std::vector<float>(6, 1.0f)) << v;
  }
}

// zero_vs_undefined_grads: values computed under NoGradGuard inside a compiled call are
// constants for autograd, as in eager (the joint graph must not differentiate through them).
TEST(FuzzFound, NoGradRegionsStayConstant) {
  auto fn = [](const Tensors& in) {
    Tensor m;
    {
      NoGradGuard g;
      m = in[0] * 3;
    }
    return Tensors{in[1] * m};
  };
  auto f = compile(fn, backend("aot_eager"));
  Tensor x = full({2}, 2.0).requires_grad_(true), w = full({2}, 1.0).requires_grad_(true);
  Tensors r = f(Tensors{x, w});
  Tensors g = autograd::grad({r[0]}, {x, w}, {ones_like(r[0])}, std::nullopt, false, true);
  EXPECT_FALSE(g[0].defined());
  EXPECT_EQ(g[1].to_vector<float>(), std::vector<float>({6, 6}));
}

// pure_detach_constant: assume_pure replays the first call's values for `arg.detach()`.
TEST(FuzzFound, PureDetachOfArgument) {
  auto f = compile([](const Tensors& in) { return Tensors{in[0].detach() * 2}; }, backend("aot_eager", true));
  f(Tensors{ones({2})});
  EXPECT_EQ(f(Tensors{full({2}, 5.0)})[0].to_vector<float>(), std::vector<float>({10, 10}));
}

// copy_aliases_source: a.copy_(b) then a write to b changes a.
TEST(FuzzFound, CopyThenWriteSource) {
  auto f = compile(
      [](const Tensors& in) {
        Tensor a = in[1] * 1;
        a.copy_(in[0]);
        Tensor(in[0]).zero_();
        return Tensors{a};
      },
      backend("aot_eager"));
  Tensors r = f(Tensors{full({}, 1.5, kFloat64), full({}, 7.0, kFloat64)});
  EXPECT_EQ(r[0].item<double>(), 1.5);
}

// grads_across_breaks: autograd::grad over outputs of two graphs and a view lost a share (the
// engine ordered a node twice when two roots shared it).
TEST(FuzzFound, GradsAcrossBreaks) {
  auto fn = [](const Tensor& x) {
    Tensor a = x * 1;
    double s = x.sum().item<double>();
    Tensor b = x * s;
    return Tensors{a, b, b.reshape({-1})};
  };
  auto f = compile(fn, backend("aot_eager"));
  Tensor x = full({}, 2.0).requires_grad_(true);
  Tensors r = f(x);
  Tensors g = autograd::grad(r, {x}, {ones_like(r[0]), ones_like(r[1]), ones_like(r[2])}, std::nullopt, false, true);
  EXPECT_EQ(g[0].item<float>(), 5.0f);  // 1 + 2 + 2 (s is a number: no gradient through it)
}

// writes_to_viewed_tensors (an eager bug): a view taken before an in-place write to its base
// must be rebased (PyTorch: d/dx of sum(a) + sum(v) is 4 here; kiln's eager gives 3).
TEST(FuzzFound, EagerRebasesViewsAfterWrites) {
  Tensor x = ones({3}).requires_grad_(true);
  Tensor a = x * 1;
  Tensor v = a.unsqueeze(0);
  a.mul_(2);
  (a.sum() + v.sum()).backward();
  EXPECT_EQ(x.grad().to_vector<float>(), std::vector<float>({4, 4, 4}));
}

// seed 392 (this session's inductor change): var_mean of x, then a write into x. The kernel of
// var_mean's passes (mean, then variance: Note [Reduction phases]) also computed the write's new
// value and stored it into x in its first pass (Note [Writing into inputs]); the variance's pass
// then read the new x. Only a one-pass kernel stores into an input now.
TEST(FuzzFound, WriteIntoAnInputThatAMultiPassKernelReads) {
  for (const char* b : {"aot_eager", "inductor"}) {
    SCOPED_TRACE(b);
    auto body = [](const Tensors& in) {
      Tensor x = in[0];
      auto [v, m] = var_mean(x, {-1}, 1, true);
      x.masked_fill_(x > 0, 0);
      return Tensors{v, m};
    };
    auto f = compile(body, backend(b));
    manual_seed(7);
    Tensor x0 = randn({3, 4, 5}).to(kBFloat16);
    for (int i = 0; i < 2; ++i) {
      Tensor xc = x0.clone(), xe = x0.clone();
      Tensors got = f(Tensors{xc}), want = body(Tensors{xe});
      for (size_t k = 0; k < got.size(); ++k)
        EXPECT_TRUE(allclose(got[k].to(kFloat32), want[k].to(kFloat32), 1e-2, 1e-2)) << "output " << k;
      EXPECT_TRUE(allclose(xc.to(kFloat32), xe.to(kFloat32), 0, 0)) << "the write into x";
    }
  }
}

// symbols_after_data_dependent: on the second call the graph before nonzero (empty: dropped)
// made symbols for m's dims, and the graph after it, which takes the same index, took m's symbol
// for y's equal size ("expand: the expanded size of the tensor (0) must match ..."): symbols of
// a dropped graph are retired (SymTable::retire_graph).
TEST(FuzzFound, SizesAfterDataDependentOp) {
  for (const char* b : {"eager", "aot_eager", "inductor"}) {
    auto f = compile(
        [](const Tensors& in) {
          Tensor n = nonzero(in[0]);
          return Tensors{n, in[1].unsqueeze(0).expand({2, 2, 3})};
        },
        backend(b));
    Tensor m = arange(0, 12, 1, kFloat64).reshape({3, 4});
    Tensor y = arange(0, 6, 1, kInt64).reshape({2, 3});
    f(Tensors{m, y});
    EXPECT_NO_THROW(f(Tensors{m * 0.5, y})) << b;
  }
}

// as_strided_overlap: as_strided of an expanded input requiring grad raised "not supported yet"
// when its derivative was taken (under aot_eager at the call, eagerly at backward). Now each
// storage position's gradient is shared evenly by the input elements at it (PyTorch's
// as_strided_backward): here each of the 3 positions is seen by 2 elements.
TEST(FuzzFound, AsStridedOfAnExpandedInput) {
  for (const char* b : {"eager", "aot_eager", "inductor"}) {
    SCOPED_TRACE(b);
    auto f = compile([](const Tensor& x) { return as_strided(x, {3}, {1}, 0) * 2; }, backend(b));
    Tensor x = arange(1, 4, 1, kFloat32).view({1, 3}).expand({2, 3}).detach().requires_grad_(true);
    Tensor y = f(x);
    EXPECT_EQ(y.to_vector<float>(), std::vector<float>({2, 4, 6}));
    y.sum().backward();
    ASSERT_TRUE(x.grad().defined());
    EXPECT_EQ(x.grad().to_vector<float>(), std::vector<float>(6, 1.0f));
  }
}

// saved_tensor_versions: a write after a graph break into a tensor eager's autograd saved (an
// output of the graph before the break, or its input) raises eager's "modified by an in-place
// operation" at backward under every backend, also where the AOT backward keeps something else
// (Note [Versions eager would check]). Here pow saves its result, which the AOT backward (that
// reads x for x's gradient) does not keep.
TEST(FuzzFound, WritesAfterABreakIntoWhatEagerSaved) {
  for (const char* b : {"eager", "aot_eager", "inductor"}) {
    SCOPED_TRACE(b);
    auto f = compile(
        [](const Tensor& x) {
          Tensor y = pow(x, 3.0);
          Tensor s = y.sum().item<double>() > 0 ? y * 2 : y - 1;
          {
            NoGradGuard g;
            y.add_(1);
          }
          return s;
        },
        backend(b));
    Tensor x = arange(1, 4, 1, kFloat32).requires_grad_(true);
    Tensor s = f(x);
    try {
      s.sum().backward();
      ADD_FAILURE() << "expected eager's error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("modified by an in-place operation"), std::string::npos) << e.what();
    }
  }
}

// Found with saved_tensor_versions on: an output of a compiled graph loses its history to a later
// write (`v0.copy_(v3)` of a value without grad), so only fmod's result is differentiated; eager's
// per-op graph gives the embedding's weight no gradient (nothing reaches it), the one compiled
// backward gave it zeros. Note [Outputs an input reaches].
TEST(FuzzFound, InputReachedOnlyByOutputsWithoutGradient) {
  for (const char* b : {"eager", "aot_eager", "inductor"}) {
    SCOPED_TRACE(b);
    auto f = compile(
        [](const Tensors& in) {
          Tensor v0 = embedding(in[0], in[1]);
          Tensor v2 = fmod(in[2], in[3]);
          Tensor v3 = v0.to(kFloat64).sum().item<double>() > 0 ? v0 * 2 : v0 - 1;
          v3.zero_();
          v0.copy_(v3);
          return Tensors{v0, v2, v3};
        },
        backend(b));
    Tensor w = ones({4, 2}).requires_grad_(true);
    Tensor d = full({}, 3.0, kFloat64).requires_grad_(true);
    Tensors out = f(Tensors{w, zeros({0}, kInt64), full({}, -5.5, kFloat64), d});
    ASSERT_TRUE(out[1].requires_grad());
    EXPECT_FALSE(out[0].requires_grad());
    auto g = autograd::grad({out[1]}, {w, d}, {ones_like(out[1])}, std::nullopt, false, /*allow_unused=*/true);
    EXPECT_FALSE(g[0].defined());
    ASSERT_TRUE(g[1].defined());
  }
}

// The same checks only where eager's node would run: copysign saves its result, which a later
// write (with grad) gives a new history; no gradient reaches copysign's node then, so eager
// raises nothing, and neither may the compiled backward (found by the fuzzer, seed 4660).
TEST(FuzzFound, WritesIntoWhatEagerSavedWhereItsNodeNeverRuns) {
  for (const char* b : {"eager", "aot_eager", "inductor"}) {
    SCOPED_TRACE(b);
    auto f = compile(
        [](const Tensors& in) {
          Tensor v3 = copysign(in[0], in[1]);
          Tensor u = in[1] * 2;  // the compiled backward of the first graph runs for u
          Tensor v4 = in[1].sum().item<double>() > 0 ? in[1] * 2 : in[1] - 1;
          v3.zero_();
          return Tensors{v3, v4, u};
        },
        backend(b));
    Tensor a = full({}, 0.75, kFloat64), w = full({}, 2.0, kFloat64).requires_grad_(true);
    Tensors out = f(Tensors{a, w});
    Tensor loss = out[1] * 3 + out[2];
    if (out[0].requires_grad()) loss = loss + out[0];
    EXPECT_NO_THROW(loss.backward());
    ASSERT_TRUE(w.grad().defined());
    EXPECT_EQ(w.grad().item<double>(), 8.0);
  }
}

// std of a 0-d tensor with correction 0 is 0; its gradient is 0 as eager's (and PyTorch's
// std_backward: masked_fill_(result == 0, 0)), not the decomposition's sqrt'(0) * 0 = NaN.
TEST(FuzzFound, StdOfOneElementHasZeroGradient) {
  auto body = [](const Tensor& x) { return x.std({}, 0.0); };
  for (const char* b : {"eager", "aot_eager", "inductor"}) {
    for (bool zero_d : {true, false}) {
      SCOPED_TRACE(std::string(b) + (zero_d ? " 0-d" : " [1,3] over dim 0"));
      auto f = compile(zero_d ? body : [](const Tensor& x) { return x.std({0}, 0.0); }, backend(b));
      Tensor x = (zero_d ? full({}, 1.5, kFloat64) : full({1, 3}, 1.5, kFloat64)).requires_grad_(true);
      Tensor y = f(x);
      EXPECT_EQ(y.sum().item<double>(), 0.0);
      y.sum().backward();
      ASSERT_TRUE(x.grad().defined());
      for (double g : x.grad().to_vector<double>()) EXPECT_EQ(g, 0.0);
    }
  }
}

// ties_in_full_reductions: median over every element shares the gradient evenly among the
// elements equal to it, as eager (and PyTorch's evenly_distribute_backward); the joint graph
// differentiated the decomposition's selection, which gives it all to one element.
TEST(FuzzFound, MedianOverTiesSharesTheGradient) {
  for (const char* b : {"aot_eager", "inductor"}) {
    SCOPED_TRACE(b);
    auto f = compile([](const Tensor& x) { return x.expand({6}).median(); }, backend(b));
    Tensor x = full({1}, 0.75).requires_grad_(true);
    f(x).backward();
    EXPECT_NEAR(x.grad().item<float>(), 1.0f, 1e-6);  // 6 tied elements, 1/6 each, summed by expand
    Tensor y = tensor({1.0f, 2.0f, 2.0f, 3.0f, 2.0f}).requires_grad_(true);
    compile([](const Tensor& t) { return t.median(); }, backend(b))(y).backward();
    EXPECT_EQ(y.grad().to_vector<float>(), std::vector<float>({0, 1.0f / 3, 1.0f / 3, 0, 1.0f / 3}));
  }
}

// empty_reduction_grad: nanmedian over every element of an empty tensor is NaN and, as eager's,
// requires grad (a zero gradient of the right shape).
TEST(FuzzFound, NanmedianOfEmptyRequiresGrad) {
  for (const char* b : {"aot_eager", "inductor"}) {
    SCOPED_TRACE(b);
    auto f = compile([](const Tensor& x) { return nanmedian(x); }, backend(b));
    Tensor x = zeros({2, 0, 3}).requires_grad_(true);
    Tensor y = f(x);
    EXPECT_TRUE(std::isnan(y.item<float>()));
    ASSERT_TRUE(y.requires_grad());
    y.backward();
    ASSERT_TRUE(x.grad().defined());
    EXPECT_EQ(x.grad().sizes().vec(), std::vector<int64_t>({2, 0, 3}));
  }
}

// nograd_inplace: a write under NoGradGuard into a tensor the graph made that requires grad
// changes its value, not its history: the gradient goes on to what it was before the write
// (eager and PyTorch); the functional graph made its final value a constant (no gradient).
TEST(FuzzFound, NoGradWriteKeepsTheHistory) {
  auto fn = [](const Tensors& in) {
    Tensor y = in[0] * 3;
    {
      NoGradGuard g;
      y.masked_fill_(y > 0, 0);
    }
    return Tensors{y, y * 2};
  };
  for (const char* b : {"aot_eager", "inductor"}) {
    SCOPED_TRACE(b);
    auto f = compile(fn, backend(b));
    for (double v : {1.0, -2.0}) {  // twice: the second call replays the trace
      Tensor x = tensor({v, -v, 0.5}).to(kFloat64).requires_grad_(true);
      Tensors r = f(Tensors{x});
      ASSERT_TRUE(r[0].requires_grad());
      Tensors g = autograd::grad(r, {x}, {ones_like(r[0]), ones_like(r[1])}, std::nullopt, false, true);
      ASSERT_TRUE(g[0].defined());
      EXPECT_EQ(g[0].to_vector<double>(), std::vector<double>({9, 9, 9})) << v;  // 3 + 3 * 2
    }
  }
}

// nograd_inplace, into an argument: a leaf written under NoGradGuard, then viewed; the view's
// gradient reaches the leaf (seed 5213: the functional graph's view of the written value was a
// constant).
TEST(FuzzFound, NoGradWriteIntoALeafArgument) {
  auto fn = [](const Tensors& in) {
    {
      NoGradGuard g;
      Tensor(in[0]).zero_();
    }
    return Tensors{in[0].transpose(0, 1) * 2};
  };
  for (const char* b : {"aot_eager", "inductor"}) {
    SCOPED_TRACE(b);
    auto f = compile(fn, backend(b));
    for (int call = 0; call < 2; ++call) {
      Tensor x = ones({2, 3}).requires_grad_(true);
      Tensors r = f(Tensors{x});
      EXPECT_EQ(x.to_vector<float>(), std::vector<float>(6, 0.0f));
      ASSERT_TRUE(r[0].requires_grad());
      r[0].sum().backward();
      ASSERT_TRUE(x.grad().defined());
      EXPECT_EQ(x.grad().to_vector<float>(), std::vector<float>(6, 2.0f)) << call;
    }
  }
}

// overlapping_writes: an in-place write into internally overlapping memory (an expanded tensor,
// made in the graph or passed in) raises eager's error (as PyTorch's) under every backend.
TEST(FuzzFound, WritesIntoOverlappingMemoryRaiseEagersError) {
  auto inside = [](const Tensor& x) {
    Tensor e = x.expand({3, 4});
    e.mul_(2);
    return e.sum();
  };
  auto argument = [](const Tensor& e) {
    Tensor(e).add_(1);
    return e * 1;
  };
  const std::string want_inside = message([&] { inside(ones({4})); });
  const std::string want_argument = message([&] { argument(ones({4}).expand({3, 4})); });
  ASSERT_NE(want_inside.find("single memory location"), std::string::npos) << want_inside;
  ASSERT_NE(want_argument.find("single memory location"), std::string::npos) << want_argument;
  for (const char* b : {"eager", "aot_eager", "inductor"}) {
    SCOPED_TRACE(b);
    auto f = compile(inside, backend(b));
    auto g = compile(argument, backend(b));
    EXPECT_EQ(message([&] { f(ones({4})); }), want_inside);
    Tensor base = ones({4});
    EXPECT_EQ(message([&] { g(base.expand({3, 4})); }), want_argument);
    EXPECT_EQ(base.to_vector<float>(), std::vector<float>(4, 1.0f));
  }
}

// writes_to_viewed_tensors, seed 1234 (aot_eager): `v.copy_(v)` into a stride-0 view of an
// expanded input raised in eager only: a traced copy_ is recorded before the kernel that checked
// (Note [Overlapping writes]); the check comes first now.
TEST(FuzzFound, TracedCopyIntoOverlappingMemoryRaisesEagersError) {
  auto fn = [](const Tensor& e) {
    Tensor v = e.slice(0, 0, 2);
    v.copy_(v);
    return e * 1;
  };
  const std::string want = message([&] { fn(ones({4}).expand({3, 4})); });
  ASSERT_NE(want.find("single memory location"), std::string::npos) << want;
  for (const char* b : {"eager", "aot_eager", "inductor"}) {
    SCOPED_TRACE(b);
    auto f = compile(fn, backend(b));
    EXPECT_EQ(message([&] { f(ones({4}).expand({3, 4})); }), want);
  }
}

// Found while fixing the above (seed 3896, inductor): batch_norm's decomposition writes its
// running statistics, so it is not recorded as one node (Note [Composites with their own
// derivative]); every backend updates them as eager does.
TEST(FuzzFound, BatchNormRunningStatsUnderEveryBackend) {
  auto fn = [](const Tensors& in) {
    return Tensors{batch_norm(in[0], in[1], in[2], in[3], in[4], true, 0.1, 1e-5)};
  };
  manual_seed(7);
  Tensor x = randn({4, 3}), w = randn({3}), b = randn({3});
  Tensor rm0 = randn({3}), rv0 = rand({3}) + 0.5;
  Tensor rm = rm0.clone(), rv = rv0.clone();
  Tensor want = fn(Tensors{x, rm, rv, w, b})[0];
  for (const char* be : {"eager", "aot_eager", "inductor"}) {
    SCOPED_TRACE(be);
    auto f = compile(fn, backend(be));
    Tensor m = rm0.clone(), v = rv0.clone();
    Tensor got = f(Tensors{x, m, v, w.detach().requires_grad_(true), b})[0];  // a joint graph too
    EXPECT_LE((got - want).abs().max().item<double>(), 1e-5);
    EXPECT_LE((m - rm).abs().max().item<double>(), 1e-6);
    EXPECT_LE((v - rv).abs().max().item<double>(), 1e-6);
  }
}

// Seed 20709 (backend "eager"): binary_cross_entropy of an input outside [0, 1] raises eagerly
// (as PyTorch); its decomposition checked the values only where they existed, so a traced call
// returned a loss. The check now reads the values while tracing too (a graph break).
TEST(FuzzFound, BinaryCrossEntropyRangeCheckedWhenCompiled) {
  auto fn = [](const Tensors& in) { return Tensors{binary_cross_entropy(in[0] * 2, in[1])}; };
  Tensor x = full({2, 3}, 0.75), t = full({2, 3}, 0.5);
  const std::string want = message([&] { fn(Tensors{x, t}); });
  ASSERT_NE(want.find("between 0 and 1"), std::string::npos) << want;
  for (const char* b : {"eager", "aot_eager", "inductor"}) {
    SCOPED_TRACE(b);
    auto f = compile(fn, backend(b));
    EXPECT_EQ(message([&] { f(Tensors{x, t}); }), want);
    // In range, the loss is eager's.
    Tensor y = full({2, 3}, 0.25);
    EXPECT_LE((f(Tensors{y, t})[0] - fn(Tensors{y, t})[0]).abs().item<double>(), 1e-6);
  }
}

// Gradients of every input requiring grad, with ones for every output requiring grad
// (undefined where an input gets none).
Tensors grads_of(const Tensors& outs, const Tensors& inputs) {
  Tensors roots, seeds;
  for (const Tensor& t : outs)
    if (t.defined() && t.requires_grad()) {
      roots.push_back(t);
      seeds.push_back(ones_like(t));
    }
  if (roots.empty()) return Tensors(inputs.size());
  return autograd::grad(roots, inputs, seeds, std::nullopt, false, true);
}

void expect_close(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.defined(), want.defined()) << what;
  if (!want.defined()) return;
  ASSERT_EQ(got.sizes().vec(), want.sizes().vec()) << what;
  Tensor g = got.to(kFloat64), w = want.to(kFloat64);
  EXPECT_TRUE(allclose(g, w, 1e-5, 1e-6, true)) << what << "\ngot " << g << "\nwant " << w;
}

// Seeds 6984 and 2152 (inductor): std / var_mean over dim 0 of an input expanded along it
// (every slice equal): x - mean(x) was rounding noise, different in the generated code than in
// eager's kernels, and the std's 1/std made it a gradient of order 1 either way; centered about
// the slice's first element it is exactly 0 (so is the gradient) under every backend.
TEST(FuzzFound, StdOfAnExpandedInput) {
  auto fn = [](const Tensors& in) {
    auto [v, m] = var_mean(in[0], {0}, Scalar(2), true);
    return Tensors{std(in[0], {0}, Scalar(2), true), v, m};
  };
  manual_seed(2152);
  Tensor x0 = randn({1, 4, 5}, TensorOptions(kFloat64)) * 3;
  auto input = [&] { return x0.expand({3, 4, 5}).detach().requires_grad_(true); };
  for (const char* b : {"eager", "aot_eager", "inductor"}) {
    SCOPED_TRACE(b);
    auto f = compile(fn, backend(b));
    Tensor x = input();
    Tensors got = f(Tensors{x});
    Tensors g = grads_of(got, {x});
    // The gradient of the std and var is 0; the mean's is 1/3 per element.
    EXPECT_TRUE(allclose(g[0], full({3, 4, 5}, 1.0 / 3, TensorOptions(kFloat64)), 1e-12, 1e-12)) << g[0];
  }
  Tensor x = input();
  Tensor ge = grads_of(fn(Tensors{x}), {x})[0];
  EXPECT_TRUE(allclose(ge, full({3, 4, 5}, 1.0 / 3, TensorOptions(kFloat64)), 1e-12, 1e-12)) << ge;
}

// Seed 13445 (aot_eager): a value made under NoGradGuard (attention), then `y.copy_(x)` with x
// requiring grad: y takes x's history (eager and PyTorch), its gradient reaches x.
TEST(FuzzFound, CopyWithGradIntoANoGradValue) {
  auto fn = [](const Tensors& in) {
    Tensor y;
    {
      NoGradGuard g;
      y = scaled_dot_product_attention(in[0], in[0], in[0]);
    }
    y.copy_(in[1]);
    return Tensors{y, y * 2};
  };
  manual_seed(3);
  Tensor q0 = randn({2, 3, 4}), x0 = randn({2, 3, 4});
  Tensor q = q0.clone().requires_grad_(true), x = x0.clone().requires_grad_(true);
  Tensors want = fn(Tensors{q, x});
  Tensors want_g = grads_of(want, {q, x});
  for (const char* b : {"eager", "aot_eager", "inductor"}) {
    SCOPED_TRACE(b);
    auto f = compile(fn, backend(b));
    for (int call = 0; call < 2; ++call) {
      Tensor qc = q0.clone().requires_grad_(true), xc = x0.clone().requires_grad_(true);
      Tensors got = f(Tensors{qc, xc});
      for (size_t i = 0; i < want.size(); ++i) {
        expect_close(got[i], want[i], "output " + std::to_string(i));
        EXPECT_EQ(got[i].requires_grad(), want[i].requires_grad()) << i;
      }
      Tensors g = grads_of(got, {qc, xc});
      expect_close(g[0], want_g[0], "grad q");
      expect_close(g[1], want_g[1], "grad x");
    }
  }
}

// Seed 32884 (eager): median's values over a dim were a view (its decomposition reshapes a
// gather) of a base without history, so eager refused an in-place op on them ("a view of a
// detach()ed tensor"); PyTorch and every backend run it.
TEST(FuzzFound, InPlaceOnAMediansValues) {
  auto fn = [](const Tensors& in) {
    auto [v, i] = median(in[0], 1);
    v.masked_fill_(v > 0, 0);
    return Tensors{v * 2, i};
  };
  manual_seed(11);
  Tensor x0 = randn({3, 4, 5});
  Tensor x = x0.clone().requires_grad_(true);
  Tensors want = fn(Tensors{x});
  Tensors want_g = grads_of(want, {x});
  for (const char* b : {"eager", "aot_eager", "inductor"}) {
    SCOPED_TRACE(b);
    auto f = compile(fn, backend(b));
    Tensor xc = x0.clone().requires_grad_(true);
    Tensors got = f(Tensors{xc});
    expect_close(got[0], want[0], "values");
    EXPECT_EQ(got[1].to_vector<int64_t>(), want[1].to_vector<int64_t>());
    expect_close(grads_of(got, {xc})[0], want_g[0], "gradient");
  }
}

// Seed 36463 (backend "eager"): the same for index_select of a 0-d input while tracing: its
// output was a view of a traced intermediate without history, and the captured graph refused
// `mul_` on it where eager runs it.
TEST(FuzzFound, InPlaceOnACompositesOutputWhileTracing) {
  auto fn = [](const Tensors& in) {
    Tensor v = index_select(in[0], 0, in[1]);
    v.mul_(2);
    return Tensors{v};
  };
  Tensor idx = tensor(std::vector<int64_t>{0});
  Tensor x = tensor(-1.25).to(kFloat64).requires_grad_(true);
  Tensors want = fn(Tensors{x, idx});
  Tensor want_g = grads_of(want, {x})[0];
  for (const char* b : {"eager", "aot_eager", "inductor"}) {
    SCOPED_TRACE(b);
    auto f = compile(fn, backend(b));
    Tensor xc = tensor(-1.25).to(kFloat64).requires_grad_(true);
    Tensors got = f(Tensors{xc, idx});
    expect_close(got[0], want[0], "output");
    expect_close(grads_of(got, {xc})[0], want_g, "gradient");
  }
}

// Seed 37906 (aot_eager): tanh saves its output; a write into it (zero_) before backward makes
// eager's backward raise "modified by an in-place operation", as PyTorch's version counters do,
// also when the tensor is empty (a write bumps the version whatever it touches). The compiled
// backward must raise the same error. (zero_ leaves v without history: the gradient reaches
// tanh's node through u.)
TEST(FuzzFound, WriteIntoAnEmptyTensorEagerSaved) {
  for (const char* b : {"none", "eager", "aot_eager", "inductor"}) {
    for (int64_t n : {0, 2}) {
      SCOPED_TRACE(std::string(b) + " n=" + std::to_string(n));
      auto fn = [](const Tensors& in) {
        Tensor v = tanh(in[0]);
        Tensor u = v * 2;
        v.zero_();
        return Tensors{v, u};
      };
      Tensor x = zeros({n, 3}).requires_grad_(true);
      Tensors out;
      if (std::string(b) == "none") {
        out = fn(Tensors{x});
      } else {
        auto f = compile(fn, backend(b));
        out = f(Tensors{x});
      }
      ASSERT_TRUE(out[1].requires_grad());
      try {
        out[1].sum().backward();
        ADD_FAILURE() << "expected eager's error";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("modified by an in-place operation"), std::string::npos) << e.what();
      }
    }
  }
}

// The same mechanism for the other changes of a history while a compiled call is recorded:
// detach_() takes v's history away after `v * 2` read it, requires_grad_() gives a leaf made
// inside one after `x * c` read it; the nodes noted before must keep the history they saw (a
// leaf made inside keeps eager's autograd for the graph, which builds the deferred nodes).
TEST(FuzzFound, HistoryChangesAfterAnOpReadTheTensor) {
  for (bool leaf : {true, false}) {  // without the leaf the graph is differentiated by the backend
    auto fn = [leaf](const Tensors& in) {
      Tensor c = full({3}, 0.5);
      Tensor y = in[0] * c;
      if (leaf) c.requires_grad_();
      Tensor v = tanh(in[0]);
      Tensor u = v * 2;
      v.detach_();
      return Tensors{y, u, c, v};
    };
    for (const char* b : {"none", "eager", "aot_eager", "inductor"}) {
      SCOPED_TRACE(std::string(b) + (leaf ? " leaf" : ""));
      Tensor x = full({3}, 0.25).requires_grad_(true);
      Tensors out;
      if (std::string(b) == "none") {
        out = fn(Tensors{x});
      } else {
        auto f = compile(fn, backend(b));
        out = f(Tensors{x});
      }
      ASSERT_TRUE(out[0].requires_grad());
      ASSERT_TRUE(out[1].requires_grad());
      EXPECT_FALSE(out[3].requires_grad());
      EXPECT_EQ(out[2].requires_grad(), leaf);
      (out[0].sum() + out[1].sum()).backward();
      EXPECT_FALSE(out[2].grad().defined());
      ASSERT_TRUE(x.grad().defined());
      const double t = std::tanh(0.25);
      for (float g : x.grad().to_vector<float>()) EXPECT_NEAR(g, 0.5 + 2 * (1 - t * t), 1e-5);
    }
  }
}

// Seed 153878 (aot_eager): a no-grad write into avg_pool1d's output of an unbatched input (its
// decomposition's squeeze, a view), then a graph break reading it: the view, real after the
// break, was rebased (Note [View rebase]) while the next graph was recorded, so the rebase's
// as_strided was recorded too and the view took a deferred tracer node that the graph dropped;
// the backward raised where eager's runs. The rebase of a real view runs eagerly now.
TEST(FuzzFound, NoGradWriteIntoAPoolsViewThenABreak) {
  auto fn = [](const Tensors& in) {
    Tensor v0 = avg_pool1d(in[0], {2});
    {
      NoGradGuard g;
      v0.masked_fill_(v0 > 0, 0);
    }
    Tensor v2 = v0.to(kFloat64).sum().item<double>() > 0 ? v0 * 2 : v0 - 1;
    return Tensors{v0, v2};
  };
  auto input = [] { return (arange(0, 21, 1, kFloat32).reshape({3, 7}) - 10).requires_grad_(true); };
  Tensor x = input();
  Tensors want = fn(Tensors{x});
  Tensors want_g = grads_of(want, {x});
  for (const char* b : {"eager", "aot_eager", "inductor"}) {
    SCOPED_TRACE(b);
    auto f = compile(fn, backend(b));
    for (int call = 0; call < 2; ++call) {  // the second call replays the trace
      SCOPED_TRACE(call);
      Tensor xc = input();
      Tensors got = f(Tensors{xc});
      ASSERT_EQ(got[1].requires_grad(), want[1].requires_grad());
      expect_close(got[0], want[0], "v0");
      expect_close(got[1], want[1], "v2");
      Tensors got_g;
      ASSERT_NO_THROW(got_g = grads_of(got, {xc}));
      expect_close(got_g[0], want_g[0], "gradient");
    }
  }
}

// Seed 170323 (aot_eager): `v2.copy_(v0.detach())` makes v2 the same value as v0 in the
// functional graph, which returned that value twice; v2's "no grad" was taken for both, so v0
// lost its gradient (Note [Output requires_grad by position]).
TEST(FuzzFound, CopyOfADetachedOutputIntoAnother) {
  auto fn = [](const Tensors& in) {
    Tensor v0 = glu(in[0]);
    Tensor v2 = v0.detach() - 1;
    v2.copy_(v0.detach());
    return Tensors{v0, v2};
  };
  for (const char* b : {"eager", "aot_eager", "inductor"}) {
    for (int64_t n : {0, 2}) {
      SCOPED_TRACE(std::string(b) + " n=" + std::to_string(n));
      auto f = compile(fn, backend(b));
      Tensor x = full({n, 4}, 0.5).requires_grad_(true);
      Tensors out = f(Tensors{x});
      ASSERT_TRUE(out[0].requires_grad());
      EXPECT_FALSE(out[1].requires_grad());
      EXPECT_FALSE(out[1].is_same(out[0]));
      Tensor g = grads_of(out, {x})[0];
      ASSERT_TRUE(g.defined());
      EXPECT_EQ(g.sizes().vec(), std::vector<int64_t>({n, 4}));
    }
  }
}


// Runs fn eagerly and under every backend (twice: the second call replays the trace) on fresh
// inputs; outputs, their requires_grad, the inputs' final values and the gradients must be eager's.
void expect_eager_answer(const std::function<Tensors(const Tensors&)>& fn, const std::function<Tensors()>& inputs) {
  auto grad_inputs = [](const Tensors& in) {
    Tensors r;
    for (const Tensor& t : in)
      if (t.requires_grad()) r.push_back(t);
    return r;
  };
  Tensors in = inputs();
  Tensors want = fn(in);
  Tensors want_g = grads_of(want, grad_inputs(in));
  for (const char* b : {"eager", "aot_eager", "inductor"}) {
    SCOPED_TRACE(b);
    auto f = compile(fn, backend(b));
    for (int call = 0; call < 2; ++call) {
      SCOPED_TRACE(call);
      Tensors ic = inputs();
      Tensors got = f(ic);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        expect_close(got[i], want[i], "output " + std::to_string(i));
        EXPECT_EQ(got[i].requires_grad(), want[i].requires_grad()) << "output " << i;
      }
      for (size_t i = 0; i < in.size(); ++i) expect_close(ic[i], in[i], "input " + std::to_string(i));
      Tensors g = grads_of(got, grad_inputs(ic));
      for (size_t i = 0; i < want_g.size(); ++i) expect_close(g[i], want_g[i], "gradient " + std::to_string(i));
    }
  }
}

// writes_to_viewed_tensors, seed 73 (aot_eager): a write through a one-row view of an expanded
// input (no overlap in the view, as eager's and PyTorch's check sees it) changes the input's
// storage; the write-back into the input itself (a stride-0 dim) raised eager's overlap error.
TEST(FuzzFound, WriteThroughAViewOfAnExpandedInput) {
  auto fn = [](const Tensors& in) {
    Tensor v = in[0].narrow(0, 1, 1);
    v.add_(1);
    return Tensors{in[0] * 1, v * 1};
  };
  auto inputs = [] { return Tensors{tensor(std::vector<int64_t>{1, 2, 0, 3}).expand({2, 4})}; };
  // Eager (and PyTorch): the one storage row is written once; both rows read it.
  Tensors in = inputs();
  EXPECT_EQ(fn(in)[0].to_vector<int64_t>(), std::vector<int64_t>({2, 3, 1, 4, 2, 3, 1, 4}));
  expect_eager_answer(fn, inputs);
}

// writes_to_viewed_tensors, seeds 2683 and 3080 (aot_eager): a view taken under NoGradGuard of a
// tensor that requires grad, written with grad mode on by an op none of whose inputs requires
// grad: eager (and PyTorch) record nothing, so the base keeps its history and its whole gradient;
// the functional graph made the written elements constants.
TEST(FuzzFound, GradModeWriteWithoutGradIntoANoGradView) {
  auto fn = [](const Tensors& in) {
    Tensor y = in[0] * 3;
    Tensor v;
    {
      NoGradGuard g;
      v = y.narrow(0, 1, 2);
    }
    v.copy_(in[1]);
    return Tensors{y, v};
  };
  auto inputs = [] {
    return Tensors{arange(0, 12, 1, kFloat32).reshape({3, 4}).requires_grad_(true), full({4}, -1.0)};
  };
  Tensors in = inputs();
  Tensors out = fn(in);
  ASSERT_TRUE(out[0].requires_grad());
  EXPECT_FALSE(out[1].requires_grad());
  EXPECT_EQ(grads_of(out, {in[0]})[0].to_vector<float>(), std::vector<float>(12, 3.0f));
  expect_eager_answer(fn, inputs);
}

// Seed 1014063 (aot_eager): a view of an input, written, then a graph break, then another write
// through the view: the first graph's output for the view was its own buffer (a view of the
// input's functional value), so the write after the break missed the caller's input. A view of
// an input is a view of its storage after the graph (Note [Views of inputs stay views]).
TEST(FuzzFound, WriteThroughAViewOfAnInputAfterABreak) {
  auto item_break = [](const Tensor& t) { return t.sum().item<double>() > 0 ? t * 2 : t - 1; };
  auto inputs = [] { return Tensors{tensor(0.2025, TensorOptions(kFloat64)), full({2, 3}, 0.5)}; };
  auto fn = [&](const Tensors& in) {
    Tensor v = in[0].view({1});
    v.mul_(2);
    Tensor a = item_break(in[1]);
    v.add_(1);
    return Tensors{v, a};
  };
  Tensors in = inputs();
  fn(in);
  EXPECT_EQ(in[0].item<double>(), 1.405);
  expect_eager_answer(fn, inputs);
  // A strided view; the input written after the break shows through it.
  expect_eager_answer(
      [&](const Tensors& in) {
        Tensor v = in[0].narrow(1, 1, 2).t();
        v.mul_(2);
        Tensor a = item_break(in[1]);
        v.add_(1);
        Tensor(in[0]).mul_(3);
        return Tensors{v * 1, a};
      },
      [] {
        return Tensors{arange(0, 12, 1, kFloat32).reshape({3, 4}), full({2}, 0.5)};
      });
  // A returned view of a written input, written by the caller (assume_pure replays too).
  for (const char* b : {"eager", "aot_eager", "inductor"})
    for (bool pure : {false, true}) {
      SCOPED_TRACE(std::string(b) + (pure ? " pure" : ""));
      auto f = compile(
          [](const Tensors& in) {
            Tensor v = in[0].view({-1});
            v.mul_(2);
            return Tensors{v};
          },
          backend(b, pure));
      for (int call = 0; call < 2; ++call) {
        SCOPED_TRACE(call);
        Tensor x = ones({2, 2});
        f(Tensors{x})[0].add_(1);
        EXPECT_EQ(x.to_vector<float>(), std::vector<float>(4, 3.0f));
      }
    }
}

// writes_to_viewed_tensors, seed 3314 (aot_eager): zero_ leaves a tensor without history (kiln's
// zero_ reads no input); a view of it taken before the write was rebased on its base's history
// only when the base had one, and otherwise kept its old history (the gradient of what it showed
// before the write); it has its base's history now: none (Note [View rebase]). Only views made
// while their base required grad follow it: a leaf input laid out as a view of a root without
// grad (strided, expanded) keeps its views' history through a write under no_grad (seeds 2559,
// 2798, 4556).
TEST(FuzzFound, ViewOfAZeroedTensorHasItsHistory) {
  auto fn = [](const Tensors& in) {
    Tensor y = in[0] * 2;
    Tensor v = y.slice(-1, 0, 4, 2);
    y.zero_();
    return Tensors{y, v};
  };
  auto inputs = [] { return Tensors{ones({2, 4}).requires_grad_(true)}; };
  Tensors out = fn(inputs());
  EXPECT_FALSE(out[0].requires_grad());
  EXPECT_FALSE(out[1].requires_grad());
  expect_eager_answer(fn, inputs);
}

// writes_to_viewed_tensors, seed 3685 (aot_eager): as_strided of a transposed input, then a write
// into the input: the functionalized write gave the input contiguous strides, so the view remade
// from it read other elements. A strided tensor keeps its strides when written whole.
TEST(FuzzFound, AsStridedOfAWrittenTransposedInput) {
  auto fn = [](const Tensors& in) {
    Tensor x = in[0];
    Tensor w = as_strided(x, {2, 3}, {1, 2}, 1);
    x.mul_(2);
    Tensor later = as_strided(x, {3}, {3}, 0);
    return Tensors{w * 1, later * 1, x * 1};
  };
  auto inputs = [] { return Tensors{arange(0, 12, 1, kInt64).reshape({4, 3}).t()}; };
  expect_eager_answer(fn, inputs);
}

// writes_to_viewed_tensors, seeds 2559, 2798, 4556 (with the fix above done naively): a strided
// input that requires grad is a view of a root without grad; a view of it, then a write into it
// under no_grad, keeps the view's history (the leaf's), as PyTorch's does.
TEST(FuzzFound, ViewOfAStridedLeafWrittenUnderNoGradKeepsItsHistory) {
  auto fn = [](const Tensors& in) {
    Tensor v = in[0].slice(0, 0, 2);
    {
      NoGradGuard g;
      Tensor(in[0]).mul_(2);
    }
    return Tensors{v * 3};
  };
  auto inputs = [] {
    Tensor root = zeros({3, 4});
    Tensor x = root.slice(1, 0, 4, 2).detach();
    x.fill_(1.0);
    return Tensors{x.requires_grad_(true)};
  };
  Tensors in = inputs();
  Tensors out = fn(in);
  ASSERT_TRUE(out[0].requires_grad());
  EXPECT_EQ(out[0].to_vector<float>(), std::vector<float>(4, 6.0f));
  EXPECT_EQ(grads_of(out, {in[0]})[0].to_vector<float>(), std::vector<float>({3, 3, 3, 3, 0, 0}));
  expect_eager_answer(fn, inputs);
}

// writes_to_viewed_tensors, seed 100638 (aot_eager): a write with grad mode on into a detach()ed
// alias of a tensor that requires grad (the masked_fill_ reads no input that requires grad)
// changes the tensor's value, not its history (eager, PyTorch): its gradient is not masked.
TEST(FuzzFound, WriteWithoutGradIntoADetachedAlias) {
  auto fn = [](const Tensors& in) {
    Tensor y = in[0] * in[1];
    Tensor d = y.detach();
    d.masked_fill_(d > 0, 0);
    return Tensors{y, d};
  };
  auto inputs = [] { return Tensors{tensor({-1.0f, 2.0f, 3.0f}).requires_grad_(true), tensor({1.0f, 1.0f, 0.0f})}; };
  Tensors in = inputs();
  Tensors out = fn(in);
  EXPECT_EQ(out[0].to_vector<float>(), std::vector<float>({-1, 0, 0}));
  EXPECT_EQ(grads_of(out, {in[0]})[0].to_vector<float>(), std::vector<float>({1, 1, 0}));
  expect_eager_answer(fn, inputs);
}

// Seed 1016017 (aot_eager): a write through a detach()ed alias of a view of an input (the view
// requires grad, the alias does not) changes the values, not the view's history (eager, PyTorch):
// the input still gets its gradient through the view.
TEST(FuzzFound, WriteThroughADetachedAliasOfAView) {
  auto fn = [](const Tensors& in) {
    Tensor v = in[0].view({1});
    Tensor d = v.detach();
    d.zero_();
    return Tensors{v, d};
  };
  auto inputs = [] { return Tensors{full({}, 0.25, TensorOptions(kFloat64)).requires_grad_(true)}; };
  Tensors in = inputs();
  Tensors out = fn(in);
  ASSERT_TRUE(out[0].requires_grad());
  EXPECT_EQ(out[0].to_vector<double>(), std::vector<double>({0}));
  EXPECT_EQ(grads_of(out, {in[0]})[0].to_vector<double>(), std::vector<double>({1}));
  expect_eager_answer(fn, inputs);
}

// Seed 1012056 (inductor): matmul with a broadcast batch saves, for x's gradient, w expanded and
// reshaped: a copy in eager, so a later write into w (no grad) is no error. Inductor's forward
// returned the expand (a view of w, sharing its version) as the saved tensor and raised.
TEST(FuzzFound, MatmulSavesACopyOfAnExpandedInput) {
  auto fn = [](const Tensors& in) {
    Tensor y = matmul(in[0], in[1]);
    Tensor w = in[1];
    w.masked_fill_(w > 0, 0);
    return Tensors{y};
  };
  auto inputs = [] {
    manual_seed(1012056);
    return Tensors{randn({2, 1, 3, 4}, TensorOptions(kFloat16)).requires_grad_(true),
                   randn({3, 4, 2}, TensorOptions(kFloat16))};
  };
  expect_eager_answer(fn, inputs);
}

// Found beside seed 1012056: the min-cut partition (inductor, recompute) saved an input to
// recompute from where eager saved a value computed from it (x.to(f32) for mul, matmul's copy of
// the expanded x); a write into the input after the graph raised in the compiled backward only.
// The partition saves an input only where eager's autograd saves it (Note [Saved versions]).
TEST(FuzzFound, WriteAfterTheGraphIntoAnInputTheBackwardRecomputesFrom) {
  using Fn = std::function<Tensor(const Tensors&)>;
  Fn to_then_mul = [](const Tensors& in) { return in[0].to(kFloat32) * in[1]; };
  Fn broadcast_matmul = [](const Tensors& in) { return matmul(in[1].reshape({2, 1, 3, 4}), in[0].reshape({3, 4, 2})); };
  const std::pair<Fn, DType> cases[] = {{to_then_mul, kFloat16}, {broadcast_matmul, kFloat32}};
  for (const auto& [fn, dtype] : cases)
    for (const char* b : {"eager", "aot_eager", "inductor"}) {
      SCOPED_TRACE(b);
      auto f = compile([&](const Tensors& in) { return Tensors{fn(in)}; }, backend(b));
      Tensor x = ones({24}, TensorOptions(dtype)), w = ones({24}).requires_grad_(true);
      Tensor y = f(Tensors{x, w})[0];
      x.add_(1);
      EXPECT_NO_THROW(y.sum().backward());
    }
}

// Seed 4006600 (inductor): l1_loss(in0, in1) with in1 not requiring grad saves in0 - in1 in eager,
// not in1; the partition saved in1 to recompute the difference, and `in1.add_(1)` after a graph
// break made the compiled backward raise where eager's does not.
TEST(FuzzFound, WriteAfterAGraphBreakIntoAnInputL1LossDoesNotSave) {
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{0}, std::vector<int64_t>{3, 4}}) {
    for (const char* b : {"eager", "aot_eager", "inductor"}) {
      SCOPED_TRACE(b);
      auto f = compile(
          [](const Tensors& in) {
            Tensor v0 = l1_loss(in[0], in[1]);
            Tensor x = in[2];
            Tensor v2 = x.to(kFloat64).sum().item<double>() > 0 ? x * 2 : x - 1;
            Tensor w = in[1];
            w.add_(1);
            return Tensors{v0, v2};
          },
          backend(b));
      manual_seed(4006600);
      Tensor in0 = randn(shape).requires_grad_(true), in1 = randn(shape);
      Tensor in2 = randn({3, 4}, TensorOptions(kBFloat16));
      Tensor want = sign(in0.detach() - in1) / static_cast<double>(std::max<int64_t>(in0.numel(), 1));
      Tensors out = f(Tensors{in0, in1, in2});
      ASSERT_NO_THROW(out[0].backward());
      ASSERT_TRUE(in0.grad().defined());
      if (in0.numel() > 0) {
        EXPECT_TRUE(allclose(in0.grad(), want));
      }
    }
  }
}

// writes_to_viewed_tensors, seed 100211 (backend "eager"): add_ into as_strided windows that
// overlap added 1 once per window in eager, once per element in a compiled graph (PyTorch leaves
// it undefined). Every backend raises eager's error now (Note [Overlapping writes]); windows
// that do not overlap, in an order the quick test cannot tell, are written.
TEST(FuzzFound, WritesIntoOverlappingWindowsRaise) {
  auto fn = [](const Tensors& in) {
    Tensor w = as_strided(in[0], {3, 2}, {1, 1}, 0);  // sliding windows
    w.add_(1);
    return Tensors{w * 1};
  };
  const std::string want = message([&] { fn(Tensors{arange(0, 6, 1, kFloat32)}); });
  ASSERT_NE(want.find("single memory location"), std::string::npos) << want;
  for (const char* b : {"eager", "aot_eager", "inductor"}) {
    SCOPED_TRACE(b);
    auto f = compile(fn, backend(b));
    EXPECT_EQ(message([&] { f(Tensors{arange(0, 6, 1, kFloat32)}); }), want);
  }
  // Strides [2, 3] over sizes [3, 2] reach 0 3 2 5 4 7: no element twice.
  Tensor x = zeros({8});
  as_strided(x, {3, 2}, {2, 3}, 0).add_(1);
  EXPECT_EQ(x.to_vector<float>(), std::vector<float>({1, 0, 1, 1, 1, 1, 0, 1}));
}

// written_aliased_grad_inputs, seeds 3001989, 32145, 1578, 935 (aot_eager): a detach()ed alias of
// an input that requires grad is a second input sharing its storage; a write into the alias with
// no input requiring grad keeps eager's autograd for the graph (Note [No-grad writes]), which
// then only computes values over a synthetic base (Note [Aliased inputs]). It was refused.
TEST(FuzzFound, WriteIntoADetachedAliasOfAStridedInput) {
  auto fn = [](const Tensors& in) {
    Tensor d = in[0].detach();
    d.copy_(d * 2);
    return Tensors{in[0] * 3, d};
  };
  auto inputs = [] {
    Tensor x = arange(0, 36, 1, kFloat64).reshape({3, 12}).slice(1, 0, 12, 2).detach();
    return Tensors{x.requires_grad_(true)};
  };
  Tensors in = inputs();
  Tensors out = fn(in);
  EXPECT_EQ(out[0].to_vector<double>()[1], 12.0);
  EXPECT_EQ(grads_of(out, {in[0]})[0].to_vector<double>(), std::vector<double>(18, 3.0));
  expect_eager_answer(fn, inputs);
}

// written_aliased_grad_inputs, seed 1016588 (aot_eager): batch_norm writes its running variance
// through an alias without grad, and a write under no_grad into the input (it requires grad)
// follows; eager's autograd is kept, so the inputs' aliasing was refused for nothing.
TEST(FuzzFound, WriteUnderNoGradIntoAnInputWithAWrittenAlias) {
  auto fn = [](const Tensors& in) {
    Tensor d = in[0].detach();
    d.mul_(0.5);
    {
      NoGradGuard g;
      Tensor(in[0]).masked_fill_(in[0] > 1, 0);
    }
    return Tensors{in[0] * in[1]};
  };
  auto inputs = [] { return Tensors{tensor({1.0f, 4.0f, 6.0f}).requires_grad_(true), tensor({2.0f, 3.0f, 5.0f})}; };
  Tensors in = inputs();
  Tensors out = fn(in);
  EXPECT_EQ(out[0].to_vector<float>(), std::vector<float>({1, 0, 0}));
  EXPECT_EQ(grads_of(out, {in[0]})[0].to_vector<float>(), std::vector<float>({2, 3, 5}));
  expect_eager_answer(fn, inputs);
}

// written_aliased_grad_inputs, seed 1007182 (aot_eager): after a graph break a view and its
// base, both requiring grad, are inputs of the next graph, which writes the view with autograd
// on. It was refused; the graph now keeps eager's autograd (its CopySlices rebase of the base)
// and computes the values over a synthetic base (Note [Aliased inputs]).
TEST(FuzzFound, WriteWithGradIntoAViewInputOfAnotherInput) {
  auto fn = [](const Tensors& in) {
    Tensor y = in[0].unsqueeze(2) * 2;
    Tensor v = y.view({3, 4});
    if (y.sum().item<double>() > -1e9) v.mul_(3);  // the read breaks the graph
    return Tensors{y * 1, v};
  };
  auto inputs = [] { return Tensors{arange(0, 12, 1, kFloat32).reshape({3, 4}).requires_grad_(true)}; };
  expect_eager_answer(fn, inputs);
}

// Seed 6018776 (inductor): one_hot's decomposition (inductor records composites decomposed)
// skipped the kernel's class range check, so a class >= num_classes gave a row of zeros; the
// decomposition now reads the values as the kernel does (Note [Value checks]).
TEST(FuzzFound, OneHotRangeCheckedWhenDecomposed) {
  auto fn = [](const Tensors& in) { return Tensors{one_hot(count_nonzero(in[0]), 4)}; };
  Tensor x = ones({3, 4, 5}), few = zeros({3, 4, 5});
  few.view({-1}).narrow(0, 0, 2).fill_(1);
  const std::string want = message([&] { fn(Tensors{x}); });
  ASSERT_NE(want.find("smaller than num_classes (4), got 60"), std::string::npos) << want;
  for (const char* b : {"eager", "aot_eager", "inductor"}) {
    SCOPED_TRACE(b);
    auto f = compile(fn, backend(b));
    EXPECT_EQ(message([&] { f(Tensors{x}); }), want);
    EXPECT_EQ(f(Tensors{few})[0].to_vector<int64_t>(), std::vector<int64_t>({0, 0, 1, 0}));
  }
}

// Seed 6518469 (aot_eager): `x.transpose(0, 1).copy_(x)` wrote through a partial overlap of its
// source: eager's loop read elements it had already written, the compiled graph read them all
// first. Both raise now, as PyTorch's assert_no_partial_overlap (Note [Overlapping writes]); the
// same elements (a copy into itself) and disjoint halves of one storage are still written.
TEST(FuzzFound, WriteThroughAPartialOverlapRaises) {
  auto overlapping = [](const Tensors& in) {
    Tensor x = in[0] * 1;
    x.transpose(0, 1).copy_(x);
    return Tensors{x};
  };
  auto added = [](const Tensors& in) {
    Tensor x = in[0] * 1;
    x.add_(x.t());
    return Tensors{x};
  };
  // Seed 17026075: the same through strided (not dense) tensors, compared element by element.
  auto strided = [](const Tensors& in) {
    Tensor x = (in[0] * 1).narrow(1, 0, 2);  // rows 3 apart: not dense
    x.transpose(0, 1).detach().narrow(1, 0, 2).copy_(x.narrow(0, 0, 2));
    return Tensors{x};
  };
  Tensor a = arange(0, 9, 1, kInt64).reshape({3, 3});
  for (auto* fn : {+overlapping, +added, +strided}) {
    const std::string want = message([&] { fn(Tensors{a}); });
    ASSERT_NE(want.find("refer to a single memory location"), std::string::npos) << want;
    for (const char* b : {"eager", "aot_eager", "inductor"}) {
      SCOPED_TRACE(b);
      auto f = compile(fn, backend(b));
      EXPECT_EQ(message([&] { f(Tensors{a}); }), want);
    }
  }
  auto allowed = [](const Tensors& in) {
    Tensor x = in[0] * 1;
    x.copy_(x);
    x.narrow(0, 0, 1).copy_(x.narrow(0, 2, 1));
    x.add_(x.view({9}).view({3, 3}));
    Tensor cols = x.narrow(1, 0, 2);  // strided: its even and odd elements are disjoint
    cols.select(1, 0).copy_(cols.select(1, 1));
    return Tensors{x};
  };
  expect_eager_answer(allowed, [] { return Tensors{arange(0, 9, 1, kFloat32).reshape({3, 3})}; });
  EXPECT_EQ(allowed(Tensors{a})[0].to_vector<int64_t>(), std::vector<int64_t>({14, 14, 16, 8, 8, 10, 14, 14, 16}));
}

// Seeds 5002033, 6013711, 6511850 (aot_eager): batch_norm in eval mode on copies of a running
// mean that requires grad and of a running variance, then a write into the variance, gave the
// aliased-inputs "not supported yet" error: the copies' detach()ed aliases are inputs of the
// graph too, and the check refused any aliased group with grad, not only the one written.
TEST(FuzzFound, WriteIntoARunningStatisticAfterAnEvalBatchNorm) {
  auto fn = [](const Tensors& in) {
    Tensor y = batch_norm(in[0], in[1].detach().clone(), in[2].detach().clone(), in[3], in[4]);
    Tensor(in[2]).mul_(2);
    return Tensors{y, in[1] * 1};
  };
  auto inputs = [] {
    return Tensors{arange(0, 12, 1, kFloat32).reshape({4, 3}).to(kFloat16),
                   tensor({0.3409f, -0.4689f, 0.3433f}).requires_grad_(true), tensor({1.9476f, 1.8984f, 0.7108f}),
                   tensor({0.5977f, 1.8066f, 0.4775f}).to(kFloat16), tensor({-1.3525f, -1.0244f, 0.0298f}).to(kFloat16)};
  };
  expect_eager_answer(fn, inputs);
}

// Seeds 6518191, 6532953 (aot_eager): adaptive pooling's output, requiring grad, as the values
// of _scaled_dot_product_flash_attention_backward (its VJP is a double backward), raised in
// autograd::grad while the joint graph was traced: the op's VJP (a double backward written with
// autograd::grad) passed it dv = P^T dO, which depends on no input needing a gradient.
TEST(FuzzFound, FlashAttentionBackwardOfAPooledValue) {
  auto fn = [](const Tensors& in) {
    Tensor v = adaptive_avg_pool1d(in[0], 3);
    Tensors f = call_op(OpId::_scaled_dot_product_flash_attention, {in[1], in[2], in[3]}, {true, 0.7});
    Tensors g = call_op(OpId::_scaled_dot_product_flash_attention_backward, {in[4], in[1], in[2], v, f[0], f[1], in[5]},
                        {true, 0.7});
    return Tensors{v, g[0], g[1], g[2]};
  };
  auto inputs = [] {
    auto r = [](std::vector<int64_t> s, double k) {
      Tensor t = full(s, k, kFloat64);
      return t + arange(0, static_cast<double>(t.numel()), 1, kFloat64).reshape(s).sin();
    };
    return Tensors{r({2, 3, 7}, 0.1).requires_grad_(true), r({2, 5, 3}, 0.2), r({2, 3, 3}, 0.3), r({2, 3, 3}, 0.4),
                   r({2, 5, 3}, 0.5), r({2, 5}, 0.6)};
  };
  expect_eager_answer(fn, inputs);
}

// Seed 6503346 (backend "eager"): a copy_ with grad into a detach()ed alias of maximum's output.
// Eager kiln took the alias for an autograd view of its source (detach() set view_base) and
// rebased the source's history onto the copy (CopySlices): the gradient through v0 was 3, where
// PyTorch's (detach() is a non-differentiable view, v0 keeps MaximumBackward) is 0, and where a
// graph after a break, without v0 in it, gave 0 too.
TEST(FuzzFound, CopyIntoADetachedAliasAfterABreak) {
  auto fn = [](const Tensors& in) {
    Tensor v0 = maximum(in[0], in[1]);
    Tensor v1 = v0.detach();
    Tensor v2 = in[1].sum().item<double>() > 0 ? in[1] * 2 : in[1] - 1;
    v1.copy_(v2);
    return Tensors{v0 * 3, v1 * 5, v2 * 7};
  };
  auto inputs = [] {
    return Tensors{tensor(Scalar(-0.2805), TensorOptions(kFloat64)),
                   tensor(Scalar(-4.6016), TensorOptions(kFloat64)).requires_grad_(true)};
  };
  Tensors in = inputs();
  EXPECT_EQ(grads_of(fn(in), {in[1]})[0].item<double>(), 12.0);  // PyTorch: 0 * 3 + 5 + 7
  expect_eager_answer(fn, inputs);
  // Nor is a detach()ed alias of a leaf's view a view of that leaf: PyTorch allows the write.
  Tensor leaf = tensor({1.0, 2.0}).requires_grad_(true), w = tensor({3.0}).requires_grad_(true);
  Tensor d = leaf.narrow(0, 0, 1).detach();
  d.copy_(w * 2);
  EXPECT_EQ(grads_of({d}, {w})[0].item<double>(), 2.0);
  EXPECT_EQ(leaf.to_vector<double>(), std::vector<double>({6.0, 2.0}));
}

// Seed 8025259: a write with grad into a detach()ed alias of an intermediate that requires grad.
// Eager gives the alias the copy's history and leaves the intermediate's (mask * g) alone; the
// functional graph remade the intermediate from the written values. Such graphs keep eager's
// autograd.
TEST(FuzzFound, CopyWithGradIntoADetachedAliasOfAnIntermediate) {
  auto fn = [](const Tensors& in) {
    Tensor v0 = in[0] * 2;
    Tensor v1 = v0 * in[1];
    Tensor v2 = v1.detach();
    v2.copy_(v0);
    return Tensors{v0 * 3, v1 * 5, v2 * 7};
  };
  auto inputs = [] {
    return Tensors{tensor({1.0, -2.0, 3.0}).requires_grad_(true), tensor({0.0, 1.0, 0.0})};
  };
  Tensors in = inputs();
  // PyTorch: d/dx = 2 * (3 + 5 * mask + 7)
  EXPECT_EQ(grads_of(fn(in), {in[0]})[0].to_vector<double>(), std::vector<double>({20.0, 30.0, 20.0}));
  expect_eager_answer(fn, inputs);
}

// Seed 8018815 (aot_eager): embedding with a padding_idx, its weight a value in the graph that
// requires grad. The joint graph differentiated embedding through its decomposition (index),
// which gives the padding row a gradient; eager's VJP (PyTorch's embedding_backward) gives it
// none. embedding is now recorded as one node and differentiated with its VJP (Note [Composites
// with their own derivative]).
TEST(FuzzFound, EmbeddingPaddingRowGetsNoGradient) {
  auto fn = [](const Tensors& in) {
    Tensor w = in[0].cumsum(1).transpose(0, 1);
    return Tensors{w, embedding(w, in[1], 2)};
  };
  auto inputs = [] {
    return Tensors{arange(0, 12, 1, kFloat32).reshape({3, 4}).requires_grad_(true),
                   tensor(std::vector<int64_t>{1, 2, 1, 0, 2}).to(kInt32)};
  };
  Tensors in = inputs();
  // Row r of w is column r of the cumsum: weight row 0 is read once, row 1 twice, row 2 (padding)
  // and row 3 not at all; w itself, an output too, adds 1 everywhere.
  Tensor x = in[0];
  Tensors g = grads_of(fn(in), {x});
  std::vector<float> want;
  for (int i = 0; i < 3; ++i)
    for (float k : {1.f, 2.f, 0.f, 0.f}) want.push_back(k);
  // Through cumsum(1): input column c gets the sum of the columns >= c.
  for (int i = 0; i < 3; ++i) {
    float acc = 0;
    for (int c = 3; c >= 0; --c) {
      acc += want[static_cast<size_t>(i * 4 + c)] + 1;
      want[static_cast<size_t>(i * 4 + c)] = acc;
    }
  }
  EXPECT_EQ(g[0].to_vector<float>(), want);
  expect_eager_answer(fn, inputs);
  // The padding row gets no gradient where the weight is an input too.
  for (const char* b : {"aot_eager", "inductor"}) {
    SCOPED_TRACE(b);
    auto f = compile([](const Tensors& t) { return Tensors{embedding(t[0], t[1], 1)}; }, backend(b));
    Tensor w = arange(0, 6, 1, kFloat64).reshape({3, 2}).requires_grad_(true);
    Tensors out = f(Tensors{w, tensor(std::vector<int64_t>{0, 1, 1, 2})});
    EXPECT_EQ(grads_of(out, {w})[0].to_vector<double>(), std::vector<double>({1, 1, 0, 0, 1, 1}));
  }
}

// Seeds 10032381, 11001798 (backend "eager"): embedding_bag's offsets checks (offsets[0] is 0,
// never decreasing, never past the indices) read the values only where they existed, so
// offsets made by another op in the graph (or passed in) were not checked and the compiled
// call returned shifted bags. No kernel makes these checks again (index_select's does the
// indices' range), so they read the values while tracing now, a graph break (Note [Value
// checks]); index_fill's index range likewise.
TEST(FuzzFound, EmbeddingBagOffsetsCheckedWhenCompiled) {
  auto bags = [](const Tensors& in) { return Tensors{embedding_bag(in[0], in[1], in[2] + 1, "sum")}; };
  auto fill = [](const Tensors& in) { return Tensors{index_fill(in[0], 0, in[1] * 2, 5.0)}; };
  Tensor w = arange(0, 8, 1, kFloat64).reshape({4, 2}), idx = tensor(std::vector<int64_t>{0, 1, 2, 3});
  Tensor bad = tensor(std::vector<int64_t>{1, 1}), good = tensor(std::vector<int64_t>{-1, 1});
  Tensor x = zeros({3}, kFloat64), far = tensor(std::vector<int64_t>{2}), near = tensor(std::vector<int64_t>{-1});
  const std::string want_bags = message([&] { bags(Tensors{w, idx, bad}); });
  ASSERT_NE(want_bags.find("offsets[0] has to be 0"), std::string::npos) << want_bags;
  const std::string want_fill = message([&] { fill(Tensors{x, far}); });
  ASSERT_NE(want_fill.find("out of bounds"), std::string::npos) << want_fill;
  for (const char* b : {"eager", "aot_eager", "inductor"}) {
    SCOPED_TRACE(b);
    auto f = compile(bags, backend(b));
    EXPECT_EQ(message([&] { f(Tensors{w, idx, bad}); }), want_bags);
    EXPECT_EQ(f(Tensors{w, idx, good})[0].to_vector<double>(), bags(Tensors{w, idx, good})[0].to_vector<double>());
    auto g = compile(fill, backend(b));
    EXPECT_EQ(message([&] { g(Tensors{x, far}); }), want_fill);
    EXPECT_EQ(g(Tensors{x, near})[0].to_vector<double>(), std::vector<double>({0, 5, 0}));
  }
}

// Seed 13005682 (aot_eager, inductor): after a graph break a tensor and its view are inputs of
// the next graph, which reads the view, writes the base (`v0.mul_(-1)`), then writes the view.
// The graph keeps eager's autograd (Note [Aliased inputs]), whose nodes on tracers are built
// when the graph ends (Note [Deferred tracer autograd]); building them rebases no view, so the
// view's write took the view's history from before the base's write and the gradient lost the
// mul_. A deferred node now remakes a stale view input's history as it is noted, as eager does
// when the op runs (Note [View rebase]).
TEST(FuzzFound, ViewInputWrittenAfterItsBaseAcrossABreak) {
  auto fn = [](const Tensors& in) {
    Tensor v0 = in[0] * 2;
    Tensor v1 = v0.select(0, 0);
    (void)v1.sum().item<double>();  // the read breaks the graph: v0 and v1 are the next one's inputs
    Tensor v2 = v1 * 1;             // reads v1 before the writes
    v0.mul_(-1);
    v1.masked_fill_(v1 > 0, 0);
    return Tensors{v0, v1, v2};
  };
  auto inputs = [] { return Tensors{arange(0, 12, 1, kFloat32).reshape({1, 3, 4}).sin().requires_grad_(true)}; };
  // Eager: where x >= 0, v0 and v1 are -2x (a gradient of -2 each) and v2 adds 2; elsewhere 0 + 2.
  Tensors in = inputs();
  Tensor g = grads_of(fn(in), in)[0];
  Tensor want = where(ge(in[0], Scalar(0.0)), full({1, 3, 4}, -2.0), full({1, 3, 4}, 2.0));
  expect_close(g, want, "eager gradient");
  expect_eager_answer(fn, inputs);
  // A view made in the graph (a tracer) after its base's write keeps the view rebase it had:
  // remade as noted, it took a deferred placeholder and raised (seeds 12119315, 13117729).
  auto traced = [](const Tensors& in) {
    Tensor v0 = in[0] * 2;
    Tensor v1 = v0.transpose(0, -1);
    v0.masked_fill_(v0 > 0, 0);
    v1.mul_(2);
    return Tensors{v0, v1};
  };
  auto inputs2 = [] { return Tensors{arange(0, 9, 1, kFloat64).reshape({1, 1, 3, 3}).cos().requires_grad_(true)}; };
  expect_eager_answer(traced, inputs2);
}

// Seeds 12204616, 15027292 (aot_eager, inductor): `y.detach()` reads y's buffer, so the graph
// read one value through both, and the joint graph's autograd sent a gradient back through the
// detached use (`addcdiv(y, t, y.detach())` gave w the tensor2 gradient too). A node now records
// which inputs came through a tensor that did not require grad (Note [Detached inputs]), and the
// joint graph reads them detached, even where the same value is also read with grad.
TEST(FuzzFound, DetachedUseOfAValueSendsNoGradient) {
  auto fn = [](const Tensors& in) {
    Tensor y = prelu(in[0], in[1]);
    Tensor d = y.detach();
    return Tensors{y, addcdiv(y, in[2], d, 0.5), (d * in[1]).sum()};
  };
  for (const char* b : {"aot_eager", "inductor"}) {
    SCOPED_TRACE(b);
    auto make = [] {
      return Tensors{tensor(std::vector<double>{-2.8, 1.5, -0.7}),
                     tensor(std::vector<double>{0.13}).requires_grad_(true),
                     tensor(std::vector<double>{1.5, -0.4, 2.0}).requires_grad_(true)};
    };
    Tensors e = make(), c = make();
    auto f = compile(fn, backend(b));
    Tensors want = fn(e), got = f(c);
    (want[0].sum() * 3 + want[1].sum() + want[2]).backward();
    (got[0].sum() * 3 + got[1].sum() + got[2]).backward();
    for (size_t i = 1; i < 3; ++i)
      EXPECT_EQ(c[i].grad().to_vector<double>(), e[i].grad().to_vector<double>()) << "input " << i;
  }
}

// Seeds 15010892, 21021438 (aot_eager): `x.copy_(y)` into an input x without grad from y that
// requires grad gives x eager's history, and a view of x the call returns has that history
// under its own node (Note [Views of written inputs]): a gradient with respect to x counts the
// view's part as well. Compiled, the view's gradient went straight to y.
TEST(FuzzFound, ViewOfAnInputWrittenWithGrad) {
  using Fn = std::function<Tensors(const Tensors&)>;
  const Fn copy = [](const Tensors& in) {
    Tensor x = in[0];
    x.copy_(in[1]);
    return Tensors{x, x.transpose(0, 1)};
  };
  const Fn computed = [](const Tensors& in) {  // x's new history runs through the graph's values
    Tensor x = in[0];
    Tensor early = x.narrow(0, 0, 2);  // a view taken before the write sees it too
    x.mul_(in[1] * 3);
    return Tensors{x.narrow(1, 1, 2), early, x.transpose(0, 1).narrow(0, 1, 2)};
  };
  for (bool dense : {true, false}) {
    // Or every other element of a wider buffer, as the fuzzer's strided samples are.
    auto make = [dense](const Tensor& t) {
      if (dense) return t.clone();
      Tensor b = zeros({t.size(0), 2 * t.size(1)}, TensorOptions().dtype(t.dtype()));
      b.slice(1, 0, std::nullopt, 2).copy_(t);
      return b.slice(1, 0, std::nullopt, 2).detach();
    };
    for (const Fn& fn : {copy, computed}) {
      manual_seed(4);
      Tensor x0 = randn({3, 4}), y0 = randn({3, 4});
      Tensor x = make(x0), y = make(y0).requires_grad_(true);
      Tensors want = fn(Tensors{x, y});
      ASSERT_TRUE(x.requires_grad());
      Tensors roots = want;
      roots.push_back(x);
      Tensors want_g = grads_of(roots, {y, x});
      ASSERT_TRUE(want_g[1].defined());
      for (const char* b : {"eager", "aot_eager", "inductor"}) {
        SCOPED_TRACE(std::string(b) + (dense ? " dense" : " strided"));
        auto f = compile(fn, backend(b));
        for (int call = 0; call < 2; ++call) {
          Tensor xc = make(x0), yc = make(y0).requires_grad_(true);
          Tensors got = f(Tensors{xc, yc});
          expect_close(xc, x, "written input");
          EXPECT_TRUE(xc.requires_grad());
          for (size_t i = 0; i < want.size(); ++i) {
            expect_close(got[i], want[i], "output " + std::to_string(i));
            EXPECT_EQ(got[i].requires_grad(), want[i].requires_grad()) << i;
          }
          got.push_back(xc);
          Tensors g = grads_of(got, {yc, xc});
          expect_close(g[0], want_g[0], "grad y");
          expect_close(g[1], want_g[1], "grad x");
        }
      }
    }
  }
}

// Seed 18004905 (aot_eager): `v = scatter(x, 0, i, s)`, then `v.copy_(x)` replaces v's history,
// so eager's backward never reaches scatter's node and never checks the index it saved; a write
// into the index after the call is no error. The compiled backward checked it (Note [Versions
// eager would check]): the check did not know which node saved the index.
TEST(FuzzFound, IndexSavedByANodeNoGradientReaches) {
  auto fn = [](const Tensors& in) {
    Tensor v = scatter(in[0], 0, in[1], in[2]);
    v.copy_(in[0]);
    return Tensors{v * 2};
  };
  for (const char* b : {"eager", "aot_eager", "inductor"}) {
    SCOPED_TRACE(b);
    auto f = compile(fn, backend(b));
    for (int call = 0; call < 2; ++call) {
      Tensor x = tensor<double>({0.5, -1.0, 2.0}, {3}, kFloat64).requires_grad_(true);
      Tensor i = tensor<int64_t>({2, 0}, {2}, kInt64);
      Tensor s = tensor<double>({3.0, 4.0}, {2}, kFloat64);
      Tensors got = f(Tensors{x, i, s});
      i.mul_(2);  // eager's backward never reads it
      Tensors g = grads_of(got, {x});
      expect_close(g[0], full({3}, 2.0, TensorOptions().dtype(kFloat64)), "grad x");
    }
  }
  // The other way round: what a copy_ wrote is read later, so the node that made its source
  // runs, and a write into the tensor that node saved raises as eagerly.
  auto fn2 = [](const Tensors& in) {
    Tensor v = zeros_like(in[0]);
    v.copy_(in[0] * in[1]);
    return Tensors{v.sum()};
  };
  for (const char* b : {"eager", "aot_eager", "inductor"}) {
    SCOPED_TRACE(b);
    auto f = compile(fn2, backend(b));
    for (int call = 0; call < 2; ++call) {
      Tensor x = tensor<double>({0.5, -1.0, 2.0}, {3}, kFloat64).requires_grad_(true);
      Tensor w = tensor<double>({3.0, 4.0, 5.0}, {3}, kFloat64);
      Tensors got = f(Tensors{x, w});
      w.add_(1);
      EXPECT_NE(message([&] { grads_of(got, {x}); }).find("modified by an in-place operation"), std::string::npos);
    }
  }
}

// Seed 22000735 (aot_eager): a view of an input that requires grad, written under no_grad, then
// used: eager's view rebase remade its history (as_strided of its base) before the use, and the
// graph, which keeps eager's autograd here, built the use's node on the view's old history
// (Note [View rebase] in deferred.cpp). The input is expanded, so as_strided's gradient differs.
TEST(FuzzFound, UseOfAViewWrittenUnderNoGrad) {
  auto fn = [](const Tensors& in) {
    Tensor v1 = in[0].narrow(0, 1, 1);
    {
      NoGradGuard g;
      v1.add_(1);
    }
    return Tensors{v1, v1 * 2};
  };
  manual_seed(5);
  Tensor base = randn({1, 3});
  auto make = [&] { return base.clone().expand({2, 3}).detach().requires_grad_(true); };
  Tensor x = make();
  Tensors want = fn(Tensors{x});
  Tensor want_g = grads_of(want, {x})[0];
  for (const char* b : {"eager", "aot_eager", "inductor"}) {
    SCOPED_TRACE(b);
    auto f = compile(fn, backend(b));
    for (int call = 0; call < 2; ++call) {
      Tensor xc = make();
      Tensors got = f(Tensors{xc});
      for (size_t k = 0; k < want.size(); ++k) expect_close(got[k], want[k], "output " + std::to_string(k));
      expect_close(grads_of(got, {xc})[0], want_g, "grad x");
    }
  }
}

// Note [Detached inputs] marks 32 inputs: a detach()ed alias read at a later position (a cat of
// many tensors) keeps eager's autograd for that graph, so it sends no gradient either.
TEST(FuzzFound, DetachedUseBeyondThe32ndInput) {
  auto fn = [](const Tensors& in) {
    Tensor y = in[0] * 2;
    Tensors parts(40, y);
    parts[35] = y.detach();
    return Tensors{cat(parts, 0) * in[1]};
  };
  manual_seed(6);
  Tensor x0 = randn({2}), w0 = randn({80});
  Tensor x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true);
  Tensors want = fn(Tensors{x, w});
  Tensors want_g = grads_of(want, {x, w});
  for (const char* b : {"eager", "aot_eager", "inductor"}) {
    SCOPED_TRACE(b);
    auto f = compile(fn, backend(b));
    for (int call = 0; call < 2; ++call) {
      Tensor xc = x0.clone().requires_grad_(true), wc = w0.clone().requires_grad_(true);
      Tensors got = f(Tensors{xc, wc});
      expect_close(got[0], want[0], "output");
      Tensors g = grads_of(got, {xc, wc});
      expect_close(g[0], want_g[0], "grad x");
      expect_close(g[1], want_g[1], "grad w");
    }
  }
}

// Seeds 26000291, 27018678 (aot_eager): after a break, a graph's inputs are a value that
// requires grad and an alias of it (a detach()ed one, an expanded view), and the graph zeroes the
// value. zero_ ended its history, so the check for written aliased inputs, which read
// requires_grad after the graph, missed the group, and functionalization refused it.
TEST(FuzzFound, ZeroOfAnAliasedInputAfterABreak) {
  for (bool detached : {true, false}) {
    auto fn = [detached](const Tensors& in) {
      Tensor v0 = in[0] * 3;
      Tensor v1 = detached ? v0.detach() : v0.unsqueeze(0).expand({2, -1, -1});
      Tensor v2 = v1.sum().item<double>() > 0 ? v1 * 2 : v1 - 1;  // a graph break
      v0.zero_();
      return Tensors{v0, v1, v2};
    };
    manual_seed(7);
    Tensor x0 = randn({2, 3});
    Tensor x = x0.clone().requires_grad_(true);
    Tensors want = fn(Tensors{x});
    Tensors want_g = grads_of(want, {x});
    for (const char* b : {"eager", "aot_eager", "inductor"}) {
      SCOPED_TRACE(std::string(b) + (detached ? " detached" : " expanded"));
      auto f = compile(fn, backend(b));
      for (int call = 0; call < 2; ++call) {
        Tensor xc = x0.clone().requires_grad_(true);
        Tensors got = f(Tensors{xc});
        for (size_t k = 0; k < want.size(); ++k) {
          expect_close(got[k], want[k], "output " + std::to_string(k));
          EXPECT_EQ(got[k].requires_grad(), want[k].requires_grad()) << k;
        }
        expect_close(grads_of(got, {xc})[0], want_g[0], "grad x");
      }
    }
  }
}

// Seed 1259 (CI): an expanded input (a [1, 3, 1] tensor of one value, squeezed to strides
// [3, 0]) zeroed in the graph. Eager fills an expanded tensor through its view without the
// repeats (as PyTorch allows fill_ and zero_ there); the traced fill_ took the overlap check.
TEST(FuzzFound, ZeroOfAnExpandedInput) {
  auto fn = [](const Tensors& in) {
    Tensor v0 = in[0].squeeze(-1);
    v0.zero_();
    return Tensors{v0, v0 + 1};
  };
  for (const char* b : {"eager", "aot_eager", "inductor"}) {
    SCOPED_TRACE(b);
    auto f = compile(fn, backend(b));
    for (int call = 0; call < 2; ++call) {
      Tensor x = full({1, 1, 1}, 1.8470, kFloat64).expand({1, 3, 1});
      Tensor base = x;  // its three elements are one
      Tensors got = f(Tensors{x});
      EXPECT_EQ(got[0].to_vector<double>(), std::vector<double>({0, 0, 0}));
      EXPECT_EQ(got[1].to_vector<double>(), std::vector<double>({1, 1, 1}));
      EXPECT_EQ(base.to_vector<double>(), std::vector<double>({0, 0, 0})) << "written through to the input";
    }
  }
}

}  // namespace
}  // namespace kiln
