// Issue 27: cases where kiln::compile gave another answer than eager, or an error where eager
// has none. Each runs under every backend that shares the path and compares with eager.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "kiln/kiln.h"
#include "tests/compile/compare.h"
#include "tests/unit/expect_error.h"

namespace kiln {
namespace {

using kiln::testing::expect_error;
using kiln::testing::max_abs;

const char* const kAotBackends[] = {"aot_eager", "inductor"};
const char* const kAllBackends[] = {"eager", "aot_eager", "inductor"};

// Note [Saved versions]: the backward needs x as it was when saved; the same call then
// writes x. Eager's backward raises; compiled used to return w.grad from the new x.
TEST(EagerParity, WriteAfterSaveInOneGraphRaisesEagersError) {
  auto body = [](Tensor x, Tensor w) {
    Tensor y = (x * w).sum();
    {
      NoGradGuard no_grad;
      x.mul_(2);
    }
    return y;
  };
  {
    Tensor x = ones({3}), w = ones({3}).requires_grad_(true);
    Tensor y = body(x, w);
    expect_error([&] { y.backward(); }, {"modified by an in-place operation"});
  }
  for (const char* backend : kAllBackends) {
    SCOPED_TRACE(backend);
    auto f = compile(body, {.backend = backend, .background = false});
    Tensor x = ones({3}), w = ones({3}).requires_grad_(true);
    Tensor y = f(x, w);
    EXPECT_EQ(x.to_vector<float>(), std::vector<float>({2, 2, 2}));
    expect_error([&] { y.backward(); }, {"modified by an in-place operation"});
  }
}

// A write before the use is no error: the backward reads the new value, as eager's does.
TEST(EagerParity, WriteBeforeSaveInOneGraphGivesEagersGradient) {
  auto body = [](Tensor x, Tensor w) {
    {
      NoGradGuard no_grad;
      x.mul_(2);
    }
    return (x * w).sum();
  };
  for (const char* backend : kAllBackends) {
    SCOPED_TRACE(backend);
    auto f = compile(body, {.backend = backend, .background = false});
    Tensor x = arange(3.0).to(kFloat32), w = ones({3}).requires_grad_(true);
    f(x, w).backward();
    EXPECT_EQ(w.grad().to_vector<float>(), std::vector<float>({0, 2, 4}));
  }
}

// Note [Aliased inputs]: a tensor and a view of it passed to one call are one buffer.
TEST(EagerParity, AliasedArgumentsSeeEachOthersWrites) {
  auto body = [](Tensor p, Tensor q) {
    p.add_(1);
    return q * 2;
  };
  for (const char* backend : kAllBackends) {
    SCOPED_TRACE(backend);
    auto f = compile(body, {.backend = backend, .background = false});
    // Twice: the second call runs the cached graph.
    for (int call = 0; call < 2; ++call) {
      Tensor p = zeros({4});
      Tensor q = p.narrow(0, 0, 2);
      Tensor got = f(p, q);
      EXPECT_EQ(got.to_vector<float>(), std::vector<float>({2, 2})) << "call " << call;
      EXPECT_EQ(p.to_vector<float>(), std::vector<float>({1, 1, 1, 1})) << "call " << call;
    }
    // The same function with arguments that do not alias: another graph, eager's answer.
    Tensor p = zeros({4}), q = zeros({2});
    EXPECT_EQ(f(p, q).to_vector<float>(), std::vector<float>({0, 0}));
  }
}

TEST(EagerParity, OverlappingViewsWrittenThroughBoth) {
  auto body = [](Tensor a, Tensor b) {
    a.mul_(3);
    b.add_(1);
    return a + b;
  };
  Tensor base0 = arange(6.0).to(kFloat32);
  Tensor want_base = base0.clone();
  Tensor want = body(want_base.narrow(0, 0, 4), want_base.narrow(0, 2, 4));
  for (const char* backend : kAllBackends) {
    SCOPED_TRACE(backend);
    auto f = compile(body, {.backend = backend, .background = false});
    Tensor base = base0.clone();
    Tensor got = f(base.narrow(0, 0, 4), base.narrow(0, 2, 4));
    EXPECT_EQ(got.to_vector<float>(), want.to_vector<float>());
    EXPECT_EQ(base.to_vector<float>(), want_base.to_vector<float>());
  }
}

// Found by the fuzzer (seed 896): empty tensors hold no element another input could see, even
// when they point to one storage, so a requires-grad empty input is no aliased write.
TEST(EagerParity, EmptyInputsSharingAStorageAreNotAliased) {
  auto body = [](Tensor a, Tensor b) {
    Tensor y = matmul(a, b);
    y.add_(1);
    return y;
  };
  Tensor base = zeros({0}, TensorOptions(kFloat64));
  for (const char* backend : kAllBackends) {
    SCOPED_TRACE(backend);
    auto f = compile(body, {.backend = backend, .background = false});
    Tensor a = base.view({2, 0});
    Tensor b = base.view({0, 3}).detach().requires_grad_();
    Tensor got = f(a, b);
    EXPECT_EQ(got.to_vector<double>(), std::vector<double>(6, 1.0));
  }
}

// A parameter of the compiled module passed as an argument too.
TEST(EagerParity, ArgumentAliasingABufferIsOneBuffer) {
  Tensor buf = zeros({3});
  auto body = [&](const Tensor& x) {
    buf.add_(1);
    return x + 0;
  };
  for (const char* backend : kAotBackends) {
    SCOPED_TRACE(backend);
    buf = zeros({3});
    auto f = compile(body, {.backend = backend, .background = false});
    EXPECT_EQ(f(buf.view({3})).to_vector<float>(), std::vector<float>({1, 1, 1}));
    EXPECT_EQ(f(buf.view({3})).to_vector<float>(), std::vector<float>({2, 2, 2}));
  }
}

// Note [Decomposed layouts]: repeat decomposes to a reshape of an expand; eager's repeat
// gives a contiguous tensor, which a later view relies on.
TEST(EagerParity, ViewAfterRepeatWorksAsEagerly) {
  auto body = [](const Tensor& q) { return (q.unsqueeze(1).repeat({1, 4, 1}).view({64, 8}) * 2).sum(); };
  manual_seed(1);
  Tensor q0 = randn({16, 8});
  Tensor qe = q0.clone().requires_grad_(true);
  Tensor want = body(qe);
  want.backward();
  for (const char* backend : kAllBackends) {
    SCOPED_TRACE(backend);
    auto f = compile(body, {.backend = backend, .background = false});
    Tensor q = q0.clone().requires_grad_(true);
    Tensor got = f(q);
    EXPECT_LE(max_abs(got, want), 1e-4);
    got.backward();
    EXPECT_LE(max_abs(q.grad(), qe.grad()), 1e-6);
  }
  for (const char* backend : kAotBackends) {
    SCOPED_TRACE(backend);
    auto f = compile(body, {.backend = backend, .options = {{"decompose", "true"}}});
    if (std::string(backend) == "inductor") continue;  // inductor always decomposes
    Tensor q = q0.clone().requires_grad_(true);
    EXPECT_LE(max_abs(f(q), want), 1e-4);
  }
}

// Found by the fuzzer: var_mean, a branch on its values (a graph break), then an in-place
// write to the mean: the write must be differentiated as eager does.
TEST(EagerParity, WriteToVarMeanOutputAfterABreak) {
  for (int variant = 0; variant < 32; ++variant) {
    const bool keepdim = variant & 1, all_dims = variant & 2, branch_on_mean = variant & 4, no_grad = variant & 8;
    const double shift = variant & 16 ? -0.5 : 0.5;  // which way the branch goes
    SCOPED_TRACE("keepdim " + std::to_string(keepdim) + " all dims " + std::to_string(all_dims) + " branch on mean " +
                 std::to_string(branch_on_mean) + " no_grad " + std::to_string(no_grad) + " shift " + std::to_string(shift));
    auto body = [=](const Tensor& x) {
      auto [v, m] = var_mean(x, all_dims ? IntArrayRef{} : IntArrayRef{1}, std::nullopt, keepdim);
      Tensor b = branch_on_mean ? m : v;
      Tensor w = b.to(kFloat64).sum().item<double>() > 0 ? b * 2 : b - 1;
      std::optional<NoGradGuard> guard;
      if (no_grad) guard.emplace();
      m.mul_(2);
      return std::vector<Tensor>{v, m, w};
    };
    manual_seed(3);
    Tensor x0 = randn({3, 4, 5}) + shift;
    // The gradient, or undefined where backward raises (eager's mul saves its operand, which
    // the write then modifies: eager raises, and compiled must too).
    auto grad_of = [&](auto&& f) {
      Tensor x = x0.clone().requires_grad_(true);
      std::vector<Tensor> r = f(x);
      std::vector<Tensor> g;
      for (const Tensor& t : r)
        g.push_back(arange(static_cast<double>(t.numel())).to(t.dtype()).add(1).reshape(t.sizes()));
      Tensor dx;
      try {
        dx = autograd::grad(r, {x}, g, std::nullopt, false, true)[0];
      } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("modified by an in-place operation"), std::string::npos) << e.what();
      }
      return std::pair{r, dx};
    };
    auto [want, want_grad] = grad_of(body);
    for (const char* backend : kAllBackends) {
      SCOPED_TRACE(backend);
      auto f = compile(body, {.backend = backend, .background = false});
      for (int call = 0; call < 2; ++call) {
        auto [got, got_grad] = grad_of(f);
        for (size_t k = 0; k < want.size(); ++k) EXPECT_LE(max_abs(got[k], want[k]), 1e-5);
        ASSERT_EQ(got_grad.defined(), want_grad.defined()) << "call " << call;
        if (want_grad.defined()) {
          EXPECT_LE(max_abs(got_grad, want_grad), 1e-5) << "call " << call;
        }
      }
    }
  }
}

}  // namespace
}  // namespace kiln
