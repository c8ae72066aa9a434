// CUB-backed launches (sort.cu), built by sort.cpp and select.cpp: row sorts on the segmented
// radix sort, and stream compaction (nonzero, masked_select) on DeviceSelect. No Tensor here.
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

// unique (sort.cpp): flags[i] = 1 where element i of the dense x starts a run of equal values
// (the first, or unequal to x[i - 1]; Half types compare in float, NaN equals nothing), else 0.
void launch_group_starts(DType t, const void* x, int64_t* flags, int64_t n, cudaStream_t s);
// out = the inclusive prefix sums of the n int64 `in` (cub::DeviceScan).
size_t inclusive_sum_workspace(int64_t n);
void launch_inclusive_sum(const int64_t* in, int64_t* out, int64_t n, void* workspace, size_t workspace_bytes,
                          cudaStream_t s);
// For each i < n, p = perm[i] (i without perm), g = group[i] - 1: values[g] = x[p] where starts[i];
// inverse[p] = g and counts[g] += 1 (zeroed first) where given. Items are elem_size raw bytes.
void launch_unique_scatter(const void* x, size_t elem_size, const int64_t* perm, const int64_t* starts,
                           const int64_t* group, int64_t n, void* values, int64_t* inverse, int64_t* counts,
                           cudaStream_t s);
// Weighted bincount (indexing.cpp): out[b] = the sum, in order from 0, of w[perm[j]] for j in
// [ends[b] - count[b], ends[b]), b < bins; t (w's and out's dtype) float32 or float64.
void launch_segment_sums(DType t, const void* w, const int64_t* perm, const int64_t* count, const int64_t* ends,
                         int64_t bins, void* out, cudaStream_t s);
// flags[i] = x[i] != 0 (NaN counts, -0 does not) for the dense x of dtype t.
void launch_nonzero_flags(DType t, const void* x, uint8_t* flags, int64_t n, cudaStream_t s);
// out[i] = i for i < n.
void launch_iota(int64_t* out, int64_t n, cudaStream_t s);
// Scratch bytes of launch_select_flagged for n items of elem_size bytes.
size_t select_workspace(int64_t n, size_t elem_size);
// Copies, in order, the items of `in` (n of elem_size bytes: 1, 2, 4 or 8) whose flag is set
// to `out`, and how many there are to the device int64 *count.
void launch_select_flagged(const void* in, const uint8_t* flags, void* out, int64_t* count, int64_t n, size_t elem_size,
                           void* workspace, size_t workspace_bytes, cudaStream_t s);
// coords[k, d] = the d-th coordinate of flat[k] in a row-major tensor of `sizes` (ndim <= 16).
struct UnravelSizes {
  int64_t sizes[16] = {};
  int ndim = 0;
};
void launch_unravel(const int64_t* flat, int64_t k, const UnravelSizes& sizes, int64_t* coords, cudaStream_t s);

}  // namespace kiln::cuda
