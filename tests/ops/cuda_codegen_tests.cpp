// Every op's samples through the CUDA emitter (Note [Generated CUDA]) without a GPU: each
// sample's lowered graphs — forward, and backward where the op is differentiable — are
// scheduled, each loop kernel is generated as CUDA (CPU 0-d inputs by value, as a CUDA graph
// would pass them), and the distinct functions are compiled by NVRTC for sm_90 in a few
// sources. A codegen error for any op fails here, in CI; tests/cuda runs the kernels on a GPU.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "compile/codegen/cuda_codegen.h"
#include "compile/jit/cuda_jit.h"
#include "compile/lower/schedule.h"
#include "kiln/compile.h"
#include "tests/ops/op_samples.h"

namespace kiln::test {
namespace {

constexpr const char* kName = "kiln_cuda_sample_fn";

std::set<std::string>& generated() {
  static std::set<std::string> s;
  return s;
}

// The backend: schedules the lowered graph, keeps each kernel's CUDA text, runs eagerly.
compiler::GraphFn collect(compiler::GraphView gv, compiler::GraphFn eager) {
  const compiler::Graph& g = gv.graph();
  const compiler::lower::Schedule s = compiler::lower::schedule(g);
  for (const compiler::lower::LoopKernel& k : s.kernels) {
    std::vector<bool> by_value(k.buffers.size(), false);
    for (size_t b = 0; b < k.buffers.size(); ++b)
      by_value[b] = !k.buffers[b].output && g.values[static_cast<size_t>(k.buffers[b].value)].meta.sizes.empty();
    generated().insert(compiler::codegen::generate_cuda_kernel(k, kName, by_value, nullptr));
  }
  return eager;
}

TEST(CudaCodegenSamples, EveryOpsKernelsCompileWithNvrtc) {
  if (!compiler::jit::cuda_jit_built()) GTEST_SKIP() << "kiln built without CUDA: no NVRTC";
  register_backend("cuda_codegen_samples", collect, true);
  generated().clear();
  for (int id = 0; id < kNumOps; ++id) {
    const OpId op = static_cast<OpId>(id);
    const std::vector<OpSample> samples = op_samples(op);
    const std::vector<bool> run = first_two_of_each_dtype(samples);  // as the compile tests
    for (size_t si = 0; si < samples.size(); ++si) {
      if (!run[si]) continue;
      const OpSample& s = samples[si];
      TensorList in;
      for (const Tensor& t : s.inputs) {
        const bool grad = t.defined() && is_floating_point(t.dtype()) && s.check_grad && op_info(op).differentiable();
        in.push_back(t.defined() ? t.detach().clone().requires_grad_(grad) : t);
      }
      try {
        auto f = compile(s.fn, {.backend = "cuda_codegen_samples", .background = false});
        manual_seed(1234);
        TensorList outs = f(in);
        Tensor total;
        for (const Tensor& o : outs)
          if (o.defined() && o.requires_grad()) {
            Tensor term = o.to(kFloat64).sum();
            total = total.defined() ? total + term : term;
          }
        if (total.defined()) total.backward();
      } catch (const Error&) {
        continue;  // a sample about eager's own errors
      }
    }
  }
  const std::vector<std::string> texts(generated().begin(), generated().end());
  ASSERT_GT(texts.size(), 100u) << "too few kernels generated from the op table's samples";
  // Sources of about 150 functions each, every function renamed apart.
  constexpr size_t kPerSource = 150;
  for (size_t first = 0; first < texts.size(); first += kPerSource) {
    std::string src = compiler::codegen::cuda_source_prelude();
    for (size_t i = first; i < std::min(texts.size(), first + kPerSource); ++i) {
      std::string t = texts[i];
      t.replace(t.find(kName), std::string(kName).size(), std::string(kName) + std::to_string(i));
      src += t;
    }
    EXPECT_NO_THROW(compiler::jit::nvrtc_compile(src, "sm_90")) << "functions " << first << "..";
  }
  std::cout << texts.size() << " distinct CUDA functions from the op table's samples compiled\n";
}

}  // namespace
}  // namespace kiln::test
