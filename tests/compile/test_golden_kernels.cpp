// Golden snapshots of the loop IR (Note [Loop IR]) and of the C++ generated from it (Note
// [Generated C++]) for small graphs, so a change in lowering, scheduling or emission shows up
// as a diff in review. KILN_UPDATE_GOLDEN=1 rewrites them (then read the diff before committing).
#include <gtest/gtest.h>

#include <functional>

#include "compile/codegen/cpp_codegen.h"
#include "compile/lower/schedule.h"
#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "tests/compile/golden_file.h"

namespace kiln {
namespace {

// The schedules of every graph `fn` lowers to (forward, and backward when x requires grad).
std::string kernels_of(const std::function<Tensor(const Tensor&)>& fn, const Tensor& x) {
  static std::string text;
  text.clear();
  register_backend(
      "golden_kernels",
      [](compiler::GraphView gv, compiler::GraphFn eager) {
        const compiler::Graph& g = gv.graph();
        compiler::lower::Schedule s = compiler::lower::schedule(g);
        text += "# schedule\n" + s.str(g) + "# loop IR\n";
        for (const compiler::lower::LoopKernel& k : s.kernels) text += k.str();
        text += "# C++\n" + compiler::codegen::generate_cpp(s, 0, s.kernels.size());
        return eager;
      },
      true);
  auto f = compile(fn, {.backend = "golden_kernels"});
  Tensor y = f(x);
  if (x.requires_grad()) y.sum().backward();
  return text;
}

void check_golden(const std::string& name, const std::string& text) {
  ASSERT_NE(text.find("kiln_kernel_0"), std::string::npos) << name << ": no kernel was generated";
  kiln::testing::expect_golden_file("kernels_" + name + ".txt", text, "kernels of " + name);
}

TEST(GoldenKernels, PointwiseChain) {
  check_golden("pointwise_chain",
               kernels_of([](const Tensor& x) { return sigmoid(x * 2 + 1) * tanh(x) - x.abs(); }, randn({4, 6})));
}

TEST(GoldenKernels, Softmax) {
  check_golden("softmax", kernels_of([](const Tensor& x) { return softmax(x, -1); }, randn({4, 6})));
}

TEST(GoldenKernels, LayerNormForwardBackward) {
  Tensor w = ones({6}).requires_grad_(), b = zeros({6}).requires_grad_();
  check_golden("layer_norm_training",
               kernels_of([&](const Tensor& x) { return nn::functional::layer_norm(x, {6}, w, b); },
                          randn({4, 6}).requires_grad_()));
}

TEST(GoldenKernels, TransposedReduction) {
  check_golden("transposed_reduction", kernels_of([](const Tensor& x) { return sum(x.t() * x.t(), {1}); }, randn({5, 7})));
}

TEST(GoldenKernels, GeluOfLinear) {
  manual_seed(0);
  Tensor w = randn({6, 8}), b = randn({8});
  check_golden("gelu_linear",
               kernels_of([&](const Tensor& x) { return nn::functional::gelu(matmul(x, w) + b, "tanh"); }, randn({4, 6})));
}

}  // namespace
}  // namespace kiln
