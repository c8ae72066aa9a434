// kiln::compile on CUDA tensors: every backend gives eager's answer, and "inductor" runs its
// fused kernels as generated CUDA (Note [Generated CUDA]) with eager's results: every kernel
// form and launch shape, backward graphs, dtypes, the zoo's training steps and a whole
// training step with the optimizer inside.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>

#include "models/mlp.h"
#include "models/zoo.h"
#include "compile/jit/cuda_jit.h"
#include "tests/cuda/cuda_test.h"
#include "tests/cuda/zoo_test.h"

namespace kiln {
namespace {
// Generated CUDA is opt-in until verified on a GPU (Note [Kernel devices]): these tests verify it.
const bool kCudaCodegenOn = [] {
  setenv("KILN_CUDA_CODEGEN", "1", 0);
  return true;
}();


using testing::expect_close;

TEST(CudaCompile, EveryBackendMatchesEagerOnCuda) {
  KILN_REQUIRE_CUDA();
  manual_seed(0);
  Tensor w0 = randn({8, 8}).cuda();
  auto body = [](const Tensor& x, const Tensor& w) { return (relu(mm(x, w)) * 2 + 1).sum(1); };
  Tensor x = randn({4, 8}).cuda();
  for (const char* backend : {"eager", "aot_eager", "inductor"}) {
    SCOPED_TRACE(backend);
    Tensor w = w0.clone().requires_grad_();
    Tensor we = w0.clone().requires_grad_();
    auto f = compile(body, {.backend = backend, .background = false});
    Tensor got = f(x, w);
    Tensor want = body(x, we);
    EXPECT_TRUE(got.is_cuda());
    expect_close(got, want.detach().cpu(), 1e-5, 1e-5);
    got.sum().backward();
    want.sum().backward();
    expect_close(w.grad(), we.grad().cpu(), 1e-5, 1e-5);
    if (std::string(backend) == "inductor") {
      EXPECT_GT(f.stats().generated_kernel_runs, 0);
      EXPECT_EQ(f.stats().kernel_fallbacks, 0);
    }
  }
}

// Note [Device moves]: .to(device) inside a compiled function, a copy_ between devices and a
// constant made on the host all leave their values on the device the user asked for, with eager's
// gradients through the moves, under every backend.
TEST(CudaCompile, DeviceMovesInsideTheGraph) {
  KILN_REQUIRE_CUDA();
  manual_seed(1);
  Tensor host0 = randn({3, 4}), dev0 = randn({3, 4}).cuda();
  auto body = [](const Tensor& host, const Tensor& dev) {
    Tensor up = host.to(dev.device()) * dev;                     // host -> device, differentiable
    Tensor down = (dev.exp() + 1).cpu();                         // device -> host, differentiable
    Tensor into = empty({3, 4}, TensorOptions(kFloat64).device(dev.device()));
    into.copy_(host * 2);                                        // a write across devices and dtypes
    Tensor k = tensor<float>({1, 2, 3, 4}, {4}).to(dev.device());  // a host constant moved
    return std::vector<Tensor>{up + k, down * host, into};
  };
  for (const char* backend : {"aot_eager", "inductor"}) {
    SCOPED_TRACE(backend);
    Tensor hc = host0.clone().requires_grad_(), dc = dev0.clone().requires_grad_();
    Tensor he = host0.clone().requires_grad_(), de = dev0.clone().requires_grad_();
    auto f = compile(body, {.backend = backend, .background = false});
    std::vector<Tensor> got = f(hc, dc), want = body(he, de);
    ASSERT_EQ(got.size(), 3u);
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].device(), want[i].device()) << "output " << i;
      EXPECT_EQ(got[i].dtype(), want[i].dtype()) << "output " << i;
      expect_close(got[i].detach().cpu(), want[i].detach().cpu(), 1e-5, 1e-5);
    }
    (got[0].sum() + got[1].sum()).backward();
    (want[0].sum() + want[1].sum()).backward();
    ASSERT_TRUE(hc.grad().defined() && dc.grad().defined());
    EXPECT_TRUE(hc.grad().is_cpu());
    EXPECT_TRUE(dc.grad().is_cuda());
    expect_close(hc.grad(), he.grad(), 1e-5, 1e-5);
    expect_close(dc.grad().cpu(), de.grad().cpu(), 1e-5, 1e-5);
  }
}

// max |got - want| <= tol * max(1, max |want|): the accuracy rule on the tensor's scale.
void expect_close_scaled(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.sizes().vec(), want.sizes().vec()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  Tensor g = got.detach().cpu().to(kFloat64), w = want.detach().cpu().to(kFloat64);
  if (w.numel() == 0) return;
  Tensor nan_g = isnan(g), nan_w = isnan(w);
  EXPECT_EQ(nan_g.ne(nan_w).sum().item<int64_t>(), 0) << what << ": NaNs differ";
  g = where(nan_g, zeros_like(g), g);
  w = where(nan_w, zeros_like(w), w);
  const double scale = std::max(1.0, w.abs().max().item<double>());
  const double err = (g - w).abs().max().item<double>();
  EXPECT_LE(err, tol * scale) << what << ": max abs error " << err << " (scale " << scale << ")";
}

struct Case {
  std::string what;
  std::function<Tensor(const Tensor&)> fn;
  std::vector<int64_t> shape;
  bool grad = false;
};

// Each case compiled with "inductor" against eager on the GPU: the output, and with `grad` the
// input's gradient; its graphs must run generated kernels and fall back for none.
void check_cases(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    manual_seed(3);
    Tensor x0 = randn(c.shape).cuda();
    Tensor xc = x0.clone().requires_grad_(c.grad), xe = x0.clone().requires_grad_(c.grad);
    auto f = compile(c.fn, {.backend = "inductor", .background = false});
    Tensor got = f(xc), want = c.fn(xe);
    ASSERT_TRUE(got.is_cuda());
    expect_close_scaled(got, want, 1e-4, "output");
    if (c.grad) {
      Tensor seed = randn(want.sizes()).cuda().to(want.dtype());
      (got * seed).sum().backward();
      (want * seed).sum().backward();
      expect_close_scaled(xc.grad(), xe.grad(), 1e-3, "gradient");
    }
    EXPECT_GT(f.stats().generated_kernel_runs, 0);
    EXPECT_EQ(f.stats().kernel_fallbacks, 0);
  }
}

TEST(CudaCompile, PointwiseKernelsMatchEager) {
  KILN_REQUIRE_CUDA();
  Tensor b = randn({1, 300}).cuda();
  check_cases({
      {"chain", [](const Tensor& x) { return sigmoid(x * 2 + 1) * tanh(x) - x.abs(); }, {1000, 300}, true},
      {"broadcast", [&](const Tensor& x) { return x * b + 1; }, {700, 300}, true},
      {"outer broadcast", [](const Tensor& x) { return x.unsqueeze(1) * x.unsqueeze(0); }, {300}, true},
      {"transposed input", [](const Tensor& x) { return exp(x.t()) * 3; }, {257, 129}, true},
      {"0-d", [](const Tensor& x) { return x * x + 1; }, {}, true},
      {"where", [](const Tensor& x) { return where(x > 0, x, x * 0.1); }, {33, 65}, true},
      {"gelu tanh", [](const Tensor& x) { return nn::functional::gelu(x, "tanh"); }, {4096, 64}, true},
      {"half", [](const Tensor& x) { return (x.to(kFloat16) * 2 + 1).to(kFloat32); }, {1000, 17}},
      {"bfloat16", [](const Tensor& x) { return exp(x.to(kBFloat16)); }, {1000, 17}},
      {"large", [](const Tensor& x) { return x * 2 + 1; }, {1 << 22}},
  });
}

TEST(CudaCompile, ReductionKernelsMatchEager) {
  KILN_REQUIRE_CUDA();
  check_cases({
      {"long rows (block groups)", [](const Tensor& x) { return (x * x).sum(1); }, {3, 100000}, true},
      {"short rows (warp slices)", [](const Tensor& x) { return (x + 1).sum(1); }, {1000, 10}, true},
      {"warp rows", [](const Tensor& x) { return x.mean(1); }, {1000, 700}, true},
      {"kept innermost (one thread a row)", [](const Tensor& x) { return (x + 1).sum(0); }, {1000, 70}, true},
      {"middle dim", [](const Tensor& x) { return x.sum(1); }, {8, 300, 40}, true},
      {"full sum", [](const Tensor& x) { return exp(x * 0.1).sum(); }, {1000, 1000}, true},
      {"amax", [](const Tensor& x) { return amax(x, {0, 2}); }, {30, 40, 50}},
      {"max and min", [](const Tensor& x) { return std::get<0>(x.max(1)) - std::get<0>(x.min(1)); }, {600, 90}},
      {"var_mean", [](const Tensor& x) { return std::get<0>(var_mean(x, {1})); }, {64, 1000}, true},
      {"integer sum", [](const Tensor& x) { return (x > 0).to(kInt64).sum(1); }, {64, 1000}},
      {"empty rows", [](const Tensor& x) { return x.sum(1) + 1; }, {5, 0}},
      {"no rows", [](const Tensor& x) { return x.sum(1); }, {0, 5}},
      {"half sum", [](const Tensor& x) { return x.to(kFloat16).sum(1); }, {64, 100}},
  });
}

TEST(CudaCompile, MultiPassKernelsMatchEager) {
  KILN_REQUIRE_CUDA();
  Tensor w = randn({768}).cuda(), b = randn({768}).cuda();
  Tensor target = randint(0, 10, {512}).cuda();
  check_cases({
      {"softmax", [](const Tensor& x) { return softmax(x, -1); }, {257, 1000}, true},
      {"softmax long rows", [](const Tensor& x) { return softmax(x, -1); }, {4, 50000}, true},
      {"log_softmax dim 0", [](const Tensor& x) { return log_softmax(x, 0); }, {100, 64}, true},
      {"layer norm", [&](const Tensor& x) { return nn::functional::layer_norm(x, {768}, w, b); }, {512, 768}, true},
      {"cross entropy", [&](const Tensor& x) { return nn::functional::cross_entropy(x, target); }, {512, 10}, true},
  });
}

// Over 2^30 elements the kernel's index arithmetic is 64-bit (Note [CUDA index width]).
TEST(CudaCompile, SixtyFourBitIndices) {
  KILN_REQUIRE_CUDA();
  const int64_t n = (int64_t(1) << 30) + 4097;
  Tensor x = ones({n}, TensorOptions(kUInt8).device(Device(DeviceType::CUDA)));
  auto f = compile([](const Tensor& t) { return (t + 1).sum(); }, {.backend = "inductor", .background = false});
  EXPECT_EQ(f(x).item<int64_t>(), 2 * n);
  EXPECT_GT(f.stats().generated_kernel_runs, 0);
}

TEST(CudaCompile, NaNPropagatesThroughMaxReductions) {
  KILN_REQUIRE_CUDA();
  Tensor x = randn({4, 1000});
  x.index_put_({1, 17}, std::nan(""));
  auto fn = [](const Tensor& t) { return amax(t, {1}); };
  auto f = compile(fn, {.backend = "inductor", .background = false});
  Tensor got = f(x.cuda()).cpu();
  EXPECT_TRUE(std::isnan(got[1].item<double>()));
  EXPECT_FALSE(std::isnan(got[0].item<double>()));
  expect_close_scaled(got, fn(x), 0, "amax");
}

// One training step of each zoo model (forward and loss compiled) on the GPU, against eager on
// the GPU, by the accuracy rule: loss 1e-4, gradients 1e-3 of each tensor's scale.
TEST(CudaCompile, ZooModelsTrainLikeEager) {
  KILN_REQUIRE_CUDA();
  const Device cuda(DeviceType::CUDA);
  for (const std::string& name : models::names()) {
    if (name == "gpt2") continue;
    SCOPED_TRACE(name);
    models::Workload we = models::make_workload(name, cuda, /*cpu_sizes=*/true);
    models::Workload wc = models::make_workload(name, cuda, /*cpu_sizes=*/true);
    const bool f64 = testing::compare_in_float64(name);
    if (f64) {
      testing::to_float64(we);
      testing::to_float64(wc);
    }
    auto fwd = compile([&] { return wc.step_loss(); }, {.backend = "inductor", .background = false});
    manual_seed(1);
    Tensor lc = fwd();
    manual_seed(1);
    Tensor le = we.step_loss();
    expect_close_scaled(lc, le, f64 ? 1e-9 : 1e-4, "loss");
    lc.backward();
    le.backward();
    auto pc = wc.module->named_parameters(), pe = we.module->named_parameters();
    ASSERT_EQ(pc.size(), pe.size());
    for (size_t i = 0; i < pc.size(); ++i) {
      ASSERT_EQ(pc[i].second.grad().defined(), pe[i].second.grad().defined()) << pc[i].first;
      if (pe[i].second.grad().defined())
        expect_close_scaled(pc[i].second.grad(), pe[i].second.grad(), f64 ? 1e-6 : 1e-3, "grad of " + pc[i].first);
    }
    EXPECT_GT(fwd.stats().generated_kernel_runs, 0);
    EXPECT_EQ(fwd.stats().kernel_fallbacks, 0);
  }
}

// A whole training step — forward, backward and AdamW — compiled into one graph on the GPU gives
// eager's parameters step after step; the optimizer's host scalars reach the kernels by value.
TEST(CudaCompile, WholeTrainingStepWithAdamW) {
  KILN_REQUIRE_CUDA();
  const Device cuda(DeviceType::CUDA);
  manual_seed(5);
  auto m = std::make_shared<models::MLP>(32, 64, 2, 10);
  manual_seed(5);
  auto ref = std::make_shared<models::MLP>(32, 64, 2, 10);
  m->to(cuda);
  ref->to(cuda);
  optim::AdamW opt(m->parameters(), optim::AdamWOptions{.lr = 1e-2}), opt_ref(ref->parameters(), optim::AdamWOptions{.lr = 1e-2});
  Tensor x = randn({64, 32}).cuda(), y = randint(0, 10, {64}).cuda();
  auto step = [&](nn::Module& model, optim::AdamW& o) {
    Tensor loss = nn::functional::cross_entropy(model.forward(x), y);
    o.zero_grad();
    loss.backward();
    o.step();
    return loss;
  };
  auto fast = compile([&] { return step(*m, opt); }, {.backend = "inductor", .background = false});
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE("step " + std::to_string(i));
    Tensor lc = fast(), le = step(*ref, opt_ref);
    expect_close_scaled(lc, le, 1e-4, "loss");
    auto pc = m->parameters(), pe = ref->parameters();
    for (size_t p = 0; p < pc.size(); ++p) expect_close_scaled(pc[p], pe[p], 1e-4, "parameter " + std::to_string(p));
  }
  EXPECT_GT(fast.stats().generated_kernel_runs, 0);
}

// The generated CUDA's disk cache (<KILN_CACHE_DIR>/cuda, Note [CUDA JIT]) serves a second
// process: this test compiles into a fresh cache, then runs itself (the next test) as a child
// process on the same cache, which must load every module from disk and run NVRTC never.
const char* const kCacheChild = "KILN_TEST_CUDA_CACHE_CHILD";
Tensor cache_probe(const Tensor& x) { return (tanh(x) * 3 + 0.25).sum(1); }

TEST(CudaCompile, CubinCacheServesASecondProcess) {
  KILN_REQUIRE_CUDA();
  char dir[] = "/tmp/kiln-cuda-cache-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const char* old = std::getenv("KILN_CACHE_DIR");
  const std::string saved = old ? old : "";
  setenv("KILN_CACHE_DIR", dir, 1);
  compiler::reset();  // nothing from earlier tests in memory: the modules are built into `dir`
  Tensor x = randn({64, 300}).cuda();
  const int runs = compiler::jit::cuda_jit_stats().nvrtc_runs;
  auto f = compile(cache_probe, {.backend = "inductor", .background = false});
  expect_close(f(x), cache_probe(x).cpu(), 1e-5, 1e-5);
  EXPECT_GT(compiler::jit::cuda_jit_stats().nvrtc_runs, runs) << "the first process compiles with NVRTC";
  // This binary's path, read here: inside std::system's shell /proc/self/exe is the shell.
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string cmd = std::string(kCacheChild) + "=1 KILN_CUDA_CODEGEN=1 KILN_CACHE_DIR=" + dir + " '" + self +
                          "' --gtest_filter=CudaCompile.CubinCacheChild > " + dir + "/child.log 2>&1";
  const int rc = std::system(cmd.c_str());
  std::string log;
  {
    FILE* in = std::fopen((std::string(dir) + "/child.log").c_str(), "r");
    char buf[4096];
    for (size_t n; in && (n = std::fread(buf, 1, sizeof buf, in)) > 0;) log.append(buf, n);
    if (in) std::fclose(in);
  }
  EXPECT_EQ(rc, 0) << log;
  EXPECT_NE(log.find("[       OK ] CudaCompile.CubinCacheChild"), std::string::npos) << log;
  if (old)
    setenv("KILN_CACHE_DIR", saved.c_str(), 1);
  else
    unsetenv("KILN_CACHE_DIR");
  std::filesystem::remove_all(dir);
}

// The child of the test above (skipped unless it started it).
TEST(CudaCompile, CubinCacheChild) {
  if (!std::getenv(kCacheChild)) GTEST_SKIP() << "run by CudaCompile.CubinCacheServesASecondProcess";
  KILN_REQUIRE_CUDA();
  Tensor x = randn({64, 300}).cuda();
  auto f = compile(cache_probe, {.backend = "inductor", .background = false});
  expect_close(f(x), cache_probe(x).cpu(), 1e-5, 1e-5);
  EXPECT_EQ(compiler::jit::cuda_jit_stats().nvrtc_runs, 0) << "NVRTC ran in the second process";
  EXPECT_GT(compiler::jit::cuda_jit_stats().disk_hits, 0);
  EXPECT_GT(f.stats().generated_kernel_runs, 0);
}

}  // namespace
}  // namespace kiln
