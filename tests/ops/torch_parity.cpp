// Ops/TorchParity: every op of ops.def against PyTorch 1.13 (Note [Torch parity fixture]). Each
// op call its samples made is replayed from tests/fixtures/torch_ops.safetensors and compared with
// torch's outputs, its gradients of sum_k(out_k * w_k), or that torch raised. An op with no call
// in the fixture fails unless the fixture gives one of the reasons below.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "dispatch/dispatch.h"
#include "tests/ops/op_samples.h"
#include "tests/ops/torch_parity.h"

namespace kiln::test {
namespace {

const safetensors::SafeTensorsFile& fixture() {
  static const safetensors::SafeTensorsFile f(KILN_TEST_FIXTURES "/torch_ops.safetensors");
  return f;
}
std::string meta(const std::string& key) {
  const auto& m = fixture().metadata();
  auto it = m.find(key);
  return it == m.end() ? std::string() : it->second;
}

// Why an op may have no PyTorch comparison: all else is a gap to fill.
bool valid_reason(const std::string& r) {
  for (const char* ok : {"random:", "internal:", "torch 1.13 lacks it:", "differs on purpose:"})
    if (r.rfind(ok, 0) == 0) return true;
  return false;
}

// A call recorded before its op gained trailing optional attrs (cross_entropy's dtype) has them
// absent: none, as the op's callers pass them.
Attrs with_trailing_none(OpId op, const Attrs& a) {
  const std::string sig = op_info(op).signature;
  const size_t semi = sig.find(';'), close = sig.find(')');
  if (semi == std::string::npos || semi > close) return a;
  const std::string attrs = sig.substr(semi, close - semi);
  const size_t n = static_cast<size_t>(std::count(attrs.begin(), attrs.end(), ',')) + 1;
  if (a.size() >= n) return a;
  std::vector<AttrValue> v = a.values();
  v.resize(n);  // std::monostate: none
  return Attrs(std::move(v));
}

void expect_matches(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what << ": kiln gave no tensor";
  ASSERT_EQ(got.sizes().vec(), want.sizes().vec()) << what << " shape";
  ASSERT_EQ(got.dtype(), want.dtype()) << what << " dtype";
  double atol, rtol;
  accuracy_tolerance(want.dtype(), atol, rtol);
  auto g = got.to_vector<double>(), w = want.to_vector<double>();
  int bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const bool ok =
        (std::isnan(g[i]) && std::isnan(w[i])) || g[i] == w[i] || std::abs(g[i] - w[i]) <= atol + rtol * std::abs(w[i]);
    if (!ok && bad++ < 3) ADD_FAILURE() << what << " element " << i << ": kiln " << g[i] << ", torch " << w[i];
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << g.size() << " elements differ";
}

class TorchParity : public ::testing::TestWithParam<int> {};

TEST_P(TorchParity, Samples) {
  const OpId op = static_cast<OpId>(GetParam());
  const std::string name = op_info(op).name;
  const std::string count = meta(name + ".cases");
  // Ops added since the fixture was last made, that it would not compare anyway (their reason is
  // also in make_torch_ops_fixture.py's REASONS, for the next time it is made).
  static const std::map<std::string, std::string> kNotInFixture = {
      {"_scaled_dot_product_flash_attention",
       "torch 1.13 lacks it: its fused attention op arrived in torch 2.0 (and is internal there)"},
      {"_scaled_dot_product_flash_attention_backward",
       "torch 1.13 lacks it: its fused attention op arrived in torch 2.0 (and is internal there)"},
      {"_batch_norm_backward", "internal: kiln's batch_norm VJP kernel"},
      {"_batch_norm_training", "internal: batch_norm's training node without running statistics"},
      {"_to_copy", "internal: kiln's device move (torch's aten._to_copy, reached through Tensor.to); torch_ops "
                   "compares the to samples"},
      {"_addmm_bias", "internal: kiln's linear with the bias added in the GEMM's epilogue"},
      {"_addmm_epilogue", "internal: kiln's GEMM with bias, activation and residual add fused by inductor's epilogue pass"},
      {"_fused_adam_",
       "torch 1.13 lacks it: its _fused_adam_ is CUDA-only with another signature (state steps as tensors, grad "
       "scaling); the optimizer tests compare kiln's with its foreach Adam step"},
      {"_fused_cross_entropy", "internal: kiln's one-pass cross_entropy kernel"},
      {"_fused_cross_entropy_backward", "internal: kiln's one-pass cross_entropy VJP kernel"},
      {"_layer_norm_backward", "internal: kiln's layer_norm VJP kernel"},
      {"_gelu_backward", "internal: kiln's gelu VJP kernel"},
      {"_softmax_backward_data", "internal: kiln's softmax and log_softmax VJP kernel"},
      {"threshold_backward", "internal: kiln's relu VJP kernel (aten's, not a public torch function)"},
      {"hardtanh_backward", "internal: kiln's hardtanh VJP kernel (aten's, not a public torch function)"},
  };
  if (count.empty() && kNotInFixture.count(name)) {
    EXPECT_TRUE(valid_reason(kNotInFixture.at(name)));
    GTEST_SKIP() << name << ": " << kNotInFixture.at(name);
  }
  ASSERT_FALSE(count.empty()) << name << " is not in tests/fixtures/torch_ops.safetensors: rerun the steps of "
                              << "Note [Torch parity fixture] (tests/ops/torch_parity_dump.cpp)";
  const std::string reason = meta(name + ".reason");
  int compared = 0;
  for (int k = 0; k < std::stoi(count); ++k) {
    const std::string key = name + "." + std::to_string(k);
    const std::string skip = meta(key + ".skip");
    if (!skip.empty()) {
      EXPECT_TRUE(valid_reason(skip)) << key << ": not compared with torch: " << skip;
      continue;
    }
    SCOPED_TRACE(key + " (" + meta(key + ".sample") + ")");
    const int n = std::stoi(meta(key + ".ninputs"));
    std::vector<Tensor> inputs(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      const std::string in = key + ".in" + std::to_string(i);
      if (!fixture().contains(in)) continue;
      inputs[static_cast<size_t>(i)] = fixture().get(in);
      if (fixture().contains(key + ".grad" + std::to_string(i))) inputs[static_cast<size_t>(i)].requires_grad_(true);
    }
    for (const std::string& w : split_on(meta(key + ".wrapped"), ','))
      inputs[static_cast<size_t>(std::stoi(w))].unsafe_impl()->is_wrapped_number = true;
    const Attrs attrs = with_trailing_none(op, decode_attrs(meta(key + ".attrs")));
    const bool torch_raised = meta(key + ".raised") == "1";
    std::vector<Tensor> outs;
    try {
      outs = call_op(op, inputs, attrs);
    } catch (const kiln::Error& e) {
      EXPECT_TRUE(torch_raised) << "kiln threw where torch did not: " << e.what();
      ++compared;
      continue;
    }
    ++compared;
    if (torch_raised) {
      ADD_FAILURE() << "torch raised (" << meta(key + ".torch_error") << ") where kiln did not";
      continue;
    }
    const int nout = std::stoi(meta(key + ".nout"));
    // An in-place op's outputs are the inputs it wrote (copy_'s self, a _foreach_*_'s first list).
    if (op_info(op).has(MUTATES) && outs.empty()) outs.assign(inputs.begin(), inputs.begin() + std::min<int>(nout, n));
    // kiln's op may have outputs torch's call does not give (median's indices over all dims).
    ASSERT_GE(static_cast<int>(outs.size()), nout) << "number of outputs";
    for (int j = 0; j < nout; ++j) {
      const std::string out = key + ".out" + std::to_string(j);
      if (fixture().contains(out))
        expect_matches(outs[static_cast<size_t>(j)], fixture().get(out), "output " + std::to_string(j));
    }
    // Gradients of sum_j(out_j * w_j) where torch gave them.
    std::vector<Tensor> wrt, want;
    for (int i = 0; i < n; ++i)
      if (fixture().contains(key + ".grad" + std::to_string(i))) {
        wrt.push_back(inputs[static_cast<size_t>(i)]);
        want.push_back(fixture().get(key + ".grad" + std::to_string(i)));
      }
    const std::string grad_skip = meta(key + ".grad_skip");
    if (!grad_skip.empty()) {
      EXPECT_TRUE(valid_reason(grad_skip)) << key << ": gradients not compared: " << grad_skip;
    }
    if (wrt.empty()) continue;
    Tensor loss;
    for (int j = 0; j < nout; ++j) {
      const std::string wk = key + ".w" + std::to_string(j);
      if (!fixture().contains(wk)) continue;
      Tensor term = (outs[static_cast<size_t>(j)] * fixture().get(wk)).sum();
      loss = loss.defined() ? loss + term : term;
    }
    ASSERT_TRUE(loss.defined()) << "torch gave gradients but no output weights";
    std::vector<Tensor> got = autograd::grad({loss}, wrt, {}, std::nullopt, false, /*allow_unused=*/true);
    for (size_t i = 0; i < got.size(); ++i) {
      Tensor g = got[i].defined() ? got[i] : zeros_like(want[i]);
      expect_matches(g, want[i], "gradient " + std::to_string(i));
    }
  }
  if (compared == 0) {
    EXPECT_TRUE(valid_reason(reason)) << name << " has no PyTorch comparison"
                                      << (reason.empty() ? "" : " (fixture says: " + reason + ")");
  }
}

std::string parity_name(const ::testing::TestParamInfo<int>& p) { return op_name(static_cast<OpId>(p.param)); }
INSTANTIATE_TEST_SUITE_P(Ops, TorchParity, ::testing::Range(0, kNumOps), parity_name);

}  // namespace
}  // namespace kiln::test
