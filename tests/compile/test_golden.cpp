// Golden snapshots of the captured, functionalized, joint and partitioned graphs of three small
// functions, so that a change in capture or AOT shows up as a diff in review.
// KILN_UPDATE_GOLDEN=1 rewrites them (then read the diff before committing).
#include <gtest/gtest.h>


#include "kiln/kiln.h"
#include "tests/compile/golden_file.h"

namespace kiln {
namespace {

// The min-cut partition (recompute on), as a fusing backend gets it.
CompileOptions min_cut() {
  CompileOptions o;
  o.options["recompute"] = "true";
  return o;
}

void check_golden(const std::string& name, const compiler::CompileStats& s) {
  std::string text;
  for (const std::string& g : s.graphs) text += "# captured\n" + g;
  for (const std::string& g : s.aot_graphs) text += "# aot\n" + g;
  kiln::testing::expect_golden_file(name + ".txt", text, "graphs of " + name);
}

TEST(Golden, LinearReluTraining) {
  manual_seed(0);
  Tensor w1 = randn({4, 3}).requires_grad_(), b1 = zeros({3}).requires_grad_(), w2 = randn({3, 2}).requires_grad_();
  auto f = compile([&](const Tensor& x) { return relu(x.matmul(w1) + b1).matmul(w2).sum(); }, min_cut());
  f(randn({5, 4})).backward();
  check_golden("linear_relu_training", f.stats());
}

TEST(Golden, LayerNormGeluTraining) {
  manual_seed(0);
  Tensor w = ones({6}).requires_grad_(), b = zeros({6}).requires_grad_();
  auto f = compile([&](const Tensor& x) { return gelu(layer_norm(x, {6}, w, b), "tanh").mean(); }, min_cut());
  f(randn({2, 6})).backward();
  check_golden("layer_norm_gelu_training", f.stats());
}

// cross_entropy under autocast (AUTOCAST_FP32_DTYPE: dtype float32, the bf16 logits as they are):
// on the CPU its decomposition casts the logits, as AUTOCAST_FP32 did (CUDA's fused kernel reads
// them as they are).
TEST(Golden, AutocastCrossEntropyTraining) {
  manual_seed(0);
  Tensor w = randn({4, 3}).requires_grad_();
  Tensor y = tensor<int64_t>({0, 2, 1, 2, 0}, kInt64);
  auto f = compile(
      [&](const Tensor& x) {
        autocast ac(kCPU);
        return cross_entropy(x.matmul(w), y);
      },
      min_cut());
  f(randn({5, 4})).backward();
  check_golden("autocast_cross_entropy_training", f.stats());
}

TEST(Golden, RunningStatWriteInference) {
  Tensor running = zeros({3});
  auto f = compile([&](const Tensor& x) {
    NoGradGuard no_grad;
    Tensor m = x.mean(0);
    running.mul_(0.9).add_(m, 0.1);
    Tensor y = x.clone();
    y.sub_(m);
    return y;
  });
  f(ones({4, 3}));
  check_golden("running_stat_write_inference", f.stats());
}

}  // namespace
}  // namespace kiln
