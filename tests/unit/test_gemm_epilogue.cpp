// _addmm_epilogue on float32 through both CPU paths, oneDNN's matmul with post-ops (when built
// with it) and kiln's GEMM with its own epilogue loop (kiln::backends::onednn::set_enabled(false),
// as KILN_ONEDNN=0), against the float64 unfused ops and within the accuracy rule of unfused
// float32 eager (BENCHMARKS.md: 1e-4). The op table's samples cover the rest (Note [GEMM epilogues]).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "backend/cpu/onednn_matmul.h"
#include "dispatch/dispatch.h"
#include "kiln/backends.h"
#include "kiln/kiln.h"
#include "tests/compile/compare.h"

namespace kiln {
namespace {

struct OneDnnSwitch {
  bool prev = backends::onednn::enabled();
  explicit OneDnnSwitch(bool on) { backends::onednn::set_enabled(on); }
  ~OneDnnSwitch() { backends::onednn::set_enabled(prev); }
};

Tensor unfused(const std::string& act, const Tensor& bias, const Tensor& a, const Tensor& b, const Tensor& res) {
  Tensor r = mm(a, b) + bias;
  if (act == "relu") r = relu(r);
  if (act == "gelu") r = gelu(r);
  if (act == "gelu_tanh") r = gelu(r, "tanh");
  if (act == "silu") r = silu(r);
  return res.defined() ? r + res : r;
}

TEST(GemmEpilogue, BothPathsMatchFloat64AndUnfusedEager) {
  manual_seed(3);
  // Shapes: a few rows (one threaded GEMM, then the epilogue), many rows (blocks of rows).
  for (auto [m, k, n] : {std::array<int64_t, 3>{7, 33, 40}, std::array<int64_t, 3>{2000, 64, 96}}) {
    Tensor a = randn({m, k}), w = randn({n, k}), bias = randn({n}), res = randn({m, n});
    Tensor b = w.t();  // linear's layout
    for (const std::string act : {"none", "relu", "gelu", "gelu_tanh", "silu"})
      for (bool residual : {false, true})
        for (bool onednn : {true, false}) {
          const std::string what =
              act + (residual ? " + residual" : "") + (onednn ? " oneDNN" : " kiln GEMM") + " m=" + std::to_string(m);
          OneDnnSwitch sw(onednn);
          const Tensor r = residual ? res : Tensor();
          const int64_t before = cpu::onednn::matmul_executions();
          Tensor got = call_op1(OpId::_addmm_epilogue, {bias, a, b, r}, {act});
          EXPECT_EQ(cpu::onednn::matmul_executions() - before, onednn && backends::onednn::is_available() ? 1 : 0)
              << what;
          Tensor ref =
              unfused(act, bias.to(kFloat64), a.to(kFloat64), b.to(kFloat64), residual ? res.to(kFloat64) : Tensor());
          testing::expect_forward_close(got, ref, what + " against float64");
          testing::expect_forward_close(got, unfused(act, bias, a, b, r), what + " against unfused float32 eager");
        }
  }
}

}  // namespace
}  // namespace kiln
