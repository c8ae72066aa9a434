// Plain descriptions of the pooling and scan launches (nn_kernels.cu), built by nn_ops.cpp:
// no Tensor here, as elementwise.h. Every pointer is to dense, channels-first data.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

#include "kiln/dtype.h"

namespace kiln::cuda {

// A 3-D pooling window over `planes` planes of in[0] x in[1] x in[2] (2-D pools have in[0] = 1),
// as the CPU's Pool3dParams (backend/cpu/convnd_kernels.h).
struct PoolArgs {
  int64_t planes = 0;
  int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, stride[3] = {1, 1, 1}, pad[3] = {0, 0, 0}, dil[3] = {1, 1, 1},
          out[3] = {1, 1, 1};
  bool count_include_pad = false;  // avg only
  int64_t divisor_override = 0;    // avg only; 0 = none
  bool adaptive = false;           // max only: torch's adaptive windows instead of k/stride/pad/dil
};

// Floating dtypes. indices: the flat position of each max in its plane; NaN wins (the last one).
void launch_max_pool(const PoolArgs& p, DType t, const void* x, void* y, int64_t* indices, cudaStream_t s);
// grad_in = the sum of grad_out at the outputs whose index names the element (a gather over the
// windows that hold it, in the CPU's order: deterministic, no atomics). Not for adaptive pools.
void launch_max_pool_backward(const PoolArgs& p, DType t, const void* grad_out, const int64_t* indices, void* grad_in,
                              cudaStream_t s);
// Floating dtypes and Int64 (truncating division, as torch).
void launch_avg_pool(const PoolArgs& p, DType t, const void* x, void* y, cudaStream_t s);
void launch_avg_pool_backward(const PoolArgs& p, DType t, const void* grad_out, void* grad_in, cudaStream_t s);

// cumsum (sum) or cumprod over the middle dim of [outer, n, inner], x and y of dtype t (not
// Bool), accumulating as the CPU (double for float32/64, float for half types, wrapping int64
// for integers): one thread per line (the CPU's results bit for bit), or for a few long
// contiguous lines one block per line (integers still exact; floats within rounding).
void launch_scan(bool sum, DType t, const void* x, void* y, int64_t outer, int64_t n, int64_t inner, cudaStream_t s);

}  // namespace kiln::cuda

namespace kiln::cuda {

// F.unfold / F.fold over images [N, C, H, W] and columns [N, C*kh*kw, oh*ow] (floating dtypes).
struct FoldArgs {
  int64_t N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
};
void launch_im2col(const FoldArgs& f, DType t, const void* image, void* cols, cudaStream_t s);
// image = the sum of the columns' blocks (overwritten; a gather per image element, taps in order).
void launch_col2im(const FoldArgs& f, DType t, const void* cols, void* image, cudaStream_t s);

}  // namespace kiln::cuda

namespace kiln::cuda {

// searchsorted over dense seq [rows, len] (rows = 1: one sequence for every value) and values
// [nv] (rows of vrow values), both of dtype t; sorter: dense int64 [rows, len] or null. As the
// CPU: the first position whose boundary is >= v (right: > v), NaNs compare false. A sorter
// entry outside [0, len) is stored in bad[1] with bad[0] = 1 (two zeroed int64).
void launch_searchsorted(DType t, const void* seq, const void* values, const int64_t* sorter, void* out, bool out_int32,
                         bool right, int64_t len, int64_t nv, int64_t vrow, bool one_row, int64_t* bad, cudaStream_t s);

}  // namespace kiln::cuda
