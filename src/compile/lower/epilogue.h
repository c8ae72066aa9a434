// GEMM epilogue fusion for backend "inductor" (Note [GEMM epilogues], src/ops/linalg.cpp):
// rewrites float32 `mm -> add bias -> activation -> add residual` chains of a pure prim graph
// into one _addmm_epilogue extern call.
#pragma once
#include <cstdint>
#include <string>

#include "compile/ir/graph.h"

namespace kiln::compiler::lower {

// Rewrites every chain it can; returns how many, and appends a line per rewrite to `report`
// (KILN_LOGS=fusion). The graph stays pure, verified and in topological order.
int fuse_gemm_epilogues(Graph& g, std::string* report = nullptr);

// Chains rewritten by every call so far, in this process (tests compare it around a compile).
int64_t gemm_epilogues_fused();

}  // namespace kiln::compiler::lower
