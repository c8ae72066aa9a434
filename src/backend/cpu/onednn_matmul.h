// A float32 GEMM with its epilogue through oneDNN's matmul and post-ops (when kiln is built with
// oneDNN, KILN_HAVE_ONEDNN): out = act(a @ b + bias) + residual (Note [GEMM epilogues]).
// Returns false when oneDNN is absent, switched off (kiln::backends::onednn::enabled()) or
// refuses the case; the caller then runs kiln's GEMM and its own epilogue loop.
#pragma once
#include <cstdint>

namespace kiln::cpu::onednn {

enum class Activation { None, Relu, Gelu, GeluTanh, Silu };

// a [m, k], b [k, n] and residual [m, n] with element strides (s0, s1); out [m, n] contiguous.
struct MatmulDesc {
  int64_t m, k, n;
  int64_t sa0, sa1, sb0, sb1, sr0 = 0, sr1 = 0;
  Activation act = Activation::None;
  bool residual = false;
};

// bias [n] contiguous; residual null when !d.residual.
bool matmul_epilogue(const MatmulDesc& d, const float* a, const float* b, const float* bias, const float* residual,
                     float* out);

// How many matmuls oneDNN has run (tests check that a path really went there).
int64_t matmul_executions();

}  // namespace kiln::cpu::onednn
