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
#include "tests/compile/schedules.h"

namespace kiln {
namespace {

// The schedules of every graph `fn` lowers to (forward, and backward when x requires grad).
std::string kernels_of(const std::function<Tensor(const Tensor&)>& fn, const Tensor& x) {
  std::string text;
  for (const testing::ScheduledGraph& sg : testing::schedules_of(fn, x)) {
    text += "# schedule\n" + sg.schedule.str(sg.graph) + "# loop IR\n";
    for (const compiler::lower::LoopKernel& k : sg.schedule.kernels) text += k.str();
    text += "# C++\n" + compiler::codegen::generate_cpp(sg.schedule, 0, sg.schedule.kernels.size());
  }
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
