// Split reductions (Note [Split reductions] in split_reduction.cpp): a reduction kernel with few,
// long rows becomes two kernels, partial accumulations over many rows, then their combination.
#pragma once
#include <functional>

#include "compile/ir/graph.h"
#include "compile/lower/schedule.h"

namespace kiln::compiler::lower {

// Whether kernel k has few rows and long ones: fewer than `max_rows` kept points, at least
// `min_extent` reduced points, and an outermost reduced dim that leaves each share at least
// `min_share` points.
struct SplitPolicy {
  int64_t max_rows = 1024;
  int64_t min_extent = 8192;
  int64_t min_share = 256;
  // Where a reduced dim is itself split in two: the rows the first kernel should have.
  int64_t target_rows = 4096;
};

// Splits every kernel of s for which `want(kernel)` holds and the policy and the kernel's form
// allow (one pass of accumulation, then per-row work); the partial accumulators become new
// values of g. Returns how many kernels were split.
int split_reductions(Graph& g, Schedule& s, const std::function<bool(const LoopKernel&)>& want,
                     const SplitPolicy& policy = {});

// Kernels split by every call so far, in this process (tests compare it around a compile).
int64_t reductions_split();

}  // namespace kiln::compiler::lower
