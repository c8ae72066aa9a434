// The CUDA emitter (Note [Generated CUDA]) without a GPU: the kernels of graphs of every
// fusion kind — pointwise, broadcasts, row / column / full reductions, multi-pass softmax and
// layer norm, backward graphs, integer, boolean and 16-bit dtypes, CPU 0-d inputs passed by
// value — are generated and compiled by NVRTC for sm_90, so a codegen error fails here (CI
// has no GPU; tests/cuda/test_cuda_compile.cpp runs them on one). Golden files show the text.
#include <gtest/gtest.h>

#include "compile/codegen/cuda_codegen.h"
#include "compile/jit/cuda_jit.h"
#include "compile/lower/split_reduction.h"
#include "dispatch/dispatch.h"
#include "ops/registry.h"
#include "tests/compile/golden_file.h"
#include "tests/compile/schedules.h"

namespace kiln {
namespace {

using Fn = std::function<Tensor(const Tensor&)>;

// Every kernel of fn's graphs as CUDA, appended to src, named kiln_kernel_<n> with n from *kernels.
void append_cuda(const Fn& fn, const Tensor& x, bool scalars_by_value, std::string& src, int* kernels) {
  for (const testing::ScheduledGraph& sg : testing::schedules_of(fn, x)) {
    for (const compiler::lower::LoopKernel& k : sg.schedule.kernels) {
      std::vector<bool> by_value(k.buffers.size(), false);
      for (size_t b = 0; b < k.buffers.size(); ++b)
        by_value[b] = scalars_by_value && !k.buffers[b].output &&
                      sg.graph.values[static_cast<size_t>(k.buffers[b].value)].meta.sizes.empty();
      std::vector<int64_t> params;
      src += compiler::codegen::generate_cuda_kernel(k, "kiln_kernel_" + std::to_string((*kernels)++), by_value, &params);
    }
  }
}

struct Case {
  std::string what;
  Fn fn;
  Tensor x;
};

// The cases' kernels in one source (one NVRTC run: it takes about a second), with CPU 0-d
// inputs by value in every other case.
void expect_compiles(const std::vector<Case>& cases) {
  if (!compiler::jit::cuda_jit_built()) GTEST_SKIP() << "kiln built without CUDA: no NVRTC";
  std::string src = compiler::codegen::cuda_source_prelude();
  int kernels = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const int before = kernels;
    append_cuda(cases[i].fn, cases[i].x, i % 2 == 1, src, &kernels);
    EXPECT_GT(kernels, before) << cases[i].what << ": no kernel was generated";
  }
  std::string cubin;
  EXPECT_NO_THROW(cubin = compiler::jit::nvrtc_compile(src, "sm_90"));
  EXPECT_GT(cubin.size(), 0u);
}

TEST(CudaCodegen, PointwiseAndBroadcast) {
  Tensor b = randn({1, 6});
  expect_compiles({
      {"chain", [&](const Tensor& x) { return sigmoid(x * 2 + 1) * tanh(x) - x.abs() + b; }, randn({4, 6})},
      {"transposed input", [](const Tensor& x) { return exp(x.t()) * 3; }, randn({5, 7})},
      {"0-d", [](const Tensor& x) { return x * x + 1; }, randn({})},
      {"compare and where", [](const Tensor& x) { return where(x > 0, x, x * 0.1); }, randn({3, 8})},
  });
}

TEST(CudaCodegen, Reductions) {
  expect_compiles({
      {"row sum", [](const Tensor& x) { return (x * x).sum(1); }, randn({4, 100})},
      {"column sum", [](const Tensor& x) { return (x + 1).sum(0); }, randn({64, 5})},
      {"full sum", [](const Tensor& x) { return exp(x).sum(); }, randn({3, 4, 5})},
      {"max and min", [](const Tensor& x) { return std::get<0>(x.max(1)) - std::get<0>(x.min(1)); }, randn({6, 9})},
      {"amax", [](const Tensor& x) { return amax(x, {0, 2}); }, randn({3, 4, 5})},
      {"var_mean", [](const Tensor& x) { return std::get<0>(var_mean(x, {1})); }, randn({4, 10})},
      {"integer sum", [](const Tensor& x) { return (x > 0).to(DType::Int64).sum(1); }, randn({4, 10})},
      {"any", [](const Tensor& x) { return (x > 2).any(); }, randn({4, 10})},
  });
}

// Note [Split reductions]: both kernels of a split reduction (partials, then their combination
// with the per-row work) compile.
TEST(CudaCodegen, SplitReductions) {
  if (!compiler::jit::cuda_jit_built()) GTEST_SKIP() << "kiln built without CUDA: no NVRTC";
  std::string src = compiler::codegen::cuda_source_prelude();
  int split = 0, n = 0;
  auto fn = [](const Tensor& x) {
    auto [v, m] = var_mean(x, {0, 2, 3}, 1, true);  // several passes: statistics, then the output
    return ((x - m) * rsqrt(v + 1e-5)).sum({0, 2, 3}) + sum(x * x, {0, 2, 3}) + amax(relu(x), {0, 2, 3});
  };
  Tensor x = randn({16, 3, 32, 32}).requires_grad_();
  for (testing::ScheduledGraph& sg : testing::schedules_of(fn, x)) {
    split += compiler::lower::split_reductions(sg.graph, sg.schedule, [](const compiler::lower::LoopKernel&) { return true; });
    for (const compiler::lower::LoopKernel& k : sg.schedule.kernels) {
      std::vector<int64_t> params;
      src += compiler::codegen::generate_cuda_kernel(k, "kiln_kernel_" + std::to_string(n++),
                                                     std::vector<bool>(k.buffers.size(), false), &params);
    }
  }
  EXPECT_GE(split, 2);  // the forward (three passes) and the backward
  std::string cubin;
  EXPECT_NO_THROW(cubin = compiler::jit::nvrtc_compile(src, "sm_90"));
  EXPECT_GT(cubin.size(), 0u);
}

// Batch norm as a compiled CUDA training graph runs it: the one-pass statistics (Note [Shifted
// batch statistics]) and the decomposed backward (Note [Batch norm backward decomposed], called
// here directly: the CPU's graphs keep its kernel), split as on a GPU, NCHW and channels-last
// (Note [Channels-last graphs], Note [Split loop order]: column-form partial kernels).
TEST(CudaCodegen, BatchNormTrainingKernels) {
  if (!compiler::jit::cuda_jit_built()) GTEST_SKIP() << "kiln built without CUDA: no NVRTC";
  Tensor w = randn({4, 3, 3, 3}), rm = zeros({4}), rv = ones({4}), gamma = randn({4}), beta = randn({4});
  auto fn = [&](const Tensor& x) {
    Tensor y = conv2d(x, w, {}, 1, 1);
    Tensor out = batch_norm(y, rm, rv, gamma, beta, /*training=*/true, 0.1, 1e-5);
    const Tensor args[] = {out * 2, y, gamma, Tensor(), Tensor()};
    const Attrs attrs{true, 1e-5};
    std::vector<Tensor> grads = op_info(OpId::_batch_norm_backward)
                                    .decomp(OpCall{OpId::_batch_norm_backward, std::span<const Tensor>(args), attrs});
    return relu(out) + grads[0] + reshape(grads[1] + grads[2], {1, 4, 1, 1});
  };
  for (const char* layout : {"0", "all"}) {
    setenv("KILN_CHANNELS_LAST", layout, 1);
    std::string src = compiler::codegen::cuda_source_prelude();
    int split = 0, n = 0;
    for (testing::ScheduledGraph& sg : testing::schedules_of(fn, randn({16, 3, 32, 32}))) {
      split += compiler::lower::split_reductions(sg.graph, sg.schedule, [](const compiler::lower::LoopKernel&) { return true; });
      for (const compiler::lower::LoopKernel& k : sg.schedule.kernels) {
        std::vector<int64_t> params;
        src += compiler::codegen::generate_cuda_kernel(k, "kiln_kernel_" + std::to_string(n++),
                                                       std::vector<bool>(k.buffers.size(), false), &params);
      }
    }
    EXPECT_GE(split, 1) << layout;  // the statistics, with the backward's sums where they fuse
    std::string cubin;
    EXPECT_NO_THROW(cubin = compiler::jit::nvrtc_compile(src, "sm_90")) << layout;
    EXPECT_GT(cubin.size(), 0u) << layout;
  }
  unsetenv("KILN_CHANNELS_LAST");
}

TEST(CudaCodegen, MultiPassKernels) {
  Tensor w = ones({6}).requires_grad_(), b = zeros({6}).requires_grad_();
  Tensor target = tensor(std::vector<int64_t>{1, 0, 3, 2});
  expect_compiles({
      {"softmax", [](const Tensor& x) { return softmax(x, -1); }, randn({4, 6})},
      {"log_softmax dim 0", [](const Tensor& x) { return log_softmax(x, 0); }, randn({4, 6})},
      {"layer norm training", [&](const Tensor& x) { return nn::functional::layer_norm(x, {6}, w, b); },
       randn({4, 6}).requires_grad_()},
      {"cross entropy training", [&](const Tensor& x) { return nn::functional::cross_entropy(x, target); },
       randn({4, 5}).requires_grad_()},
  });
}

TEST(CudaCodegen, BackwardAndDtypes) {
  expect_compiles({
      {"gelu backward", [](const Tensor& x) { return nn::functional::gelu(x, "tanh"); }, randn({4, 6}).requires_grad_()},
      {"half", [](const Tensor& x) { return (x.to(DType::Float16) * 2).sum(1); }, randn({4, 6})},
      {"bfloat16 softmax", [](const Tensor& x) { return softmax(x.to(DType::BFloat16), -1); }, randn({4, 6})},
      {"double", [](const Tensor& x) { return (x.to(DType::Float64) * x.to(DType::Float64)).mean(); }, randn({4, 6})},
  });
}

TEST(CudaCodegen, GoldenLayerNorm) {
  if (!compiler::jit::cuda_jit_built()) GTEST_SKIP() << "kiln built without CUDA";
  Tensor w = ones({6}), b = zeros({6});
  int kernels = 0;
  std::string src = compiler::codegen::cuda_source_prelude();
  append_cuda([&](const Tensor& x) { return nn::functional::layer_norm(x, {6}, w, b); }, randn({4, 6}), true, src,
              &kernels);
  ASSERT_EQ(kernels, 1);
  kiln::testing::expect_golden_file("cuda_kernels_layer_norm.txt", src, "CUDA of layer norm");
}

TEST(CudaCodegen, GoldenBiasGelu) {
  if (!compiler::jit::cuda_jit_built()) GTEST_SKIP() << "kiln built without CUDA";
  Tensor b = randn({8});
  int kernels = 0;
  std::string src = compiler::codegen::cuda_source_prelude();
  append_cuda([&](const Tensor& x) { return nn::functional::gelu(x + b, "tanh"); }, randn({4, 8}), true, src, &kernels);
  ASSERT_EQ(kernels, 1);
  kiln::testing::expect_golden_file("cuda_kernels_bias_gelu.txt", src, "CUDA of gelu(x + b)");
}

// Note [Vectorized CUDA kernels]: the vector path only where every vector access is aligned.
TEST(CudaCodegen, VectorPathNeedsAlignment) {
  auto kernel_of = [](const Fn& fn, const Tensor& x) {
    auto sgs = testing::schedules_of(fn, x);
    EXPECT_EQ(sgs.size(), 1u);
    EXPECT_EQ(sgs[0].schedule.kernels.size(), 1u);
    return sgs[0].schedule.kernels[0];
  };
  Tensor b = randn({8});
  const compiler::lower::LoopKernel k = kernel_of([&](const Tensor& x) { return x * b + 1; }, randn({4, 8}));
  ASSERT_TRUE(compiler::codegen::cuda_vectorizable(k));
  const std::vector<bool> vec = compiler::codegen::cuda_vector_buffers(k);
  std::vector<uint64_t> addresses(k.buffers.size(), 0);
  for (size_t i = 0; i < addresses.size(); ++i) addresses[i] = 4096 * (i + 1);  // 16-byte aligned
  EXPECT_TRUE(compiler::codegen::cuda_vector_aligned(k, addresses));
  for (size_t i = 0; i < addresses.size(); ++i) {
    if (!vec[i]) continue;
    std::vector<uint64_t> off = addresses;
    off[i] += 4;  // one float past alignment
    EXPECT_FALSE(compiler::codegen::cuda_vector_aligned(k, off)) << "buffer " << i;
  }
  // An innermost size that is not a multiple of the vector: the scalar loop.
  const compiler::lower::LoopKernel odd = kernel_of([](const Tensor& x) { return x * 2; }, randn({3, 7}));
  std::vector<uint64_t> odd_addresses(odd.buffers.size(), 4096);
  EXPECT_FALSE(compiler::codegen::cuda_vector_aligned(odd, odd_addresses));
  // A reduction has no vector path.
  EXPECT_FALSE(compiler::codegen::cuda_vectorizable(kernel_of([](const Tensor& x) { return x.sum(1); }, randn({4, 8}))));
}

TEST(CudaCodegen, LaunchShapes) {
  // A long row gets a block of threads, a short one a warp slice, a kept innermost dim one
  // thread a row; a pointwise kernel covers every element.
  auto launch_of = [](const Fn& fn, const Tensor& x) {
    auto sgs = testing::schedules_of(fn, x);
    EXPECT_EQ(sgs.size(), 1u);
    EXPECT_EQ(sgs[0].schedule.kernels.size(), 1u);
    return compiler::codegen::cuda_launch(sgs[0].schedule.kernels[0], 132);
  };
  compiler::codegen::CudaLaunch l = launch_of([](const Tensor& x) { return x.sum(1); }, randn({3, 100000}));
  EXPECT_EQ(l.group, 1024);
  EXPECT_EQ(l.block, 1024);
  EXPECT_EQ(l.grid, 3);
  l = launch_of([](const Tensor& x) { return x.sum(1); }, randn({1000, 10}));
  EXPECT_EQ(l.group, 16);
  EXPECT_EQ(l.grid * l.block / l.group, 1008);  // 1000 rows, 16 a block
  // 70 rows of 1000: a column group of 32 lanes a row, 8 rows a block.
  l = launch_of([](const Tensor& x) { return x.sum(0); }, randn({1000, 70}));
  EXPECT_EQ(l.group, -32);
  EXPECT_EQ(l.grid, 9);
  // Enough rows to fill the GPU: one thread a row.
  l = launch_of([](const Tensor& x) { return x.sum(0); }, randn({4, 200000}));
  EXPECT_EQ(l.group, -1);
  l = launch_of([](const Tensor& x) { return x * 2; }, randn({10, 10}));
  EXPECT_EQ(l.group, 1);
  EXPECT_GE(l.grid * l.block, 100);
  l = launch_of([](const Tensor& x) { return x.sum(1); }, randn({0, 10}));
  EXPECT_EQ(l.grid, 0);  // nothing to compute: not launched
}

}  // namespace
}  // namespace kiln
