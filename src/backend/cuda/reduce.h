// The CUDA reduction kernel's plain interface (reduce.cu): rows of a contiguous [rows, n]
// input reduced to one value each, in a fixed order, so results are the same run to run.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

#include "kiln/dtype.h"

namespace kiln::cuda {

enum class ReduceOp { Sum, Prod, Max, Min, All, Any, ArgMax, ArgMin };

// The dtype a reduction of `in` accumulates and writes its per-row results in (the CPU
// kernels' accumulators: double for floating sums, int64 for integer sums and products,
// opmath for max/min, bool for all/any); the caller converts it to the output's dtype.
DType reduce_result_dtype(ReduceOp op, DType in);

// x: contiguous [rows, n] of dtype `in`. values: contiguous [rows] of reduce_result_dtype
// (null for ArgMax/ArgMin without values); index: contiguous int64 [rows] (ArgMax/ArgMin only).
// Sums are multiplied by `scale` (mean: 1/n). Ties and NaNs as the CPU: the first index wins,
// a NaN wins over numbers.
void launch_reduce(ReduceOp op, const void* x, DType in, int64_t rows, int64_t n, void* values, int64_t* index,
                   double scale, cudaStream_t stream);

// Note [CUDA reductions over outer and inner dims]: x contiguous [A, M, B] reduced over A and B
// into values [M] (not the arg ops); `scratch` holds M * outer_inner_splits(A, M, B) values of
// reduce_result_dtype; M at most 65535.
int64_t outer_inner_splits(int64_t A, int64_t M, int64_t B);
void launch_reduce_outer_inner(ReduceOp op, const void* x, DType in, int64_t A, int64_t M, int64_t B, void* values,
                               double scale, void* scratch, cudaStream_t stream);

}  // namespace kiln::cuda
