// Row sorts on CUB's segmented radix sort (sort.cu), built by sort.cpp: no Tensor here.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "kiln/dtype.h"

namespace kiln::cuda {

// Scratch bytes launch_sort_rows needs for `rows` rows of n elements of dtype t.
size_t sort_rows_workspace(DType t, int64_t rows, int64_t n, bool descending);
// Sorts each row of the dense [rows, n] x and writes its first k entries to the dense
// [rows, k] values (x's dtype) and indices. The order is the CPU's (backend/cpu/sort.cpp): NaN
// is the largest value, -0 equals +0, and ties keep their original order (radix sorts are stable).
void launch_sort_rows(DType t, const void* x, void* values, int64_t* indices, int64_t rows, int64_t n, int64_t k,
                      bool descending, void* workspace, size_t workspace_bytes, cudaStream_t s);

}  // namespace kiln::cuda
