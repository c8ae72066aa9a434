// Plain descriptions of the batch_norm launches of batch_norm.cu, built by batch_norm_ops.cpp:
// no Tensor here, as elementwise.h. x is dense [n, c, hw] (hw: the product of the spatial dims,
// 1 for [N, C] input) of floating dtype t; per-channel values are dense [c] in the opmath dtype
// of t (float, or double for Float64), written "C" below.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

#include "kiln/dtype.h"

namespace kiln::cuda {

// How many blocks share one channel's n * hw values in the statistics pass (>= 1).
int64_t batch_norm_splits(int64_t c, int64_t per_channel);

// Training statistics of x over n and hw: mean [c] and rstd [c] = 1 / sqrt(biased var + eps).
// part: scratch of 3 * c * splits C values. running_mean / running_var (dense [c] C, or both
// null) become (1 - momentum) * old + momentum * stat, with the unbiased variance.
void launch_batch_norm_stats(DType t, const void* x, int64_t n, int64_t c, int64_t hw, int64_t splits, double eps,
                             double momentum, void* part, void* running_mean, void* running_var, void* mean, void* rstd,
                             cudaStream_t s);

// Evaluation statistics: mean = running_mean, rstd = 1 / sqrt(running_var + eps) (all [c] C).
void launch_batch_norm_eval_stats(DType t, const void* running_mean, const void* running_var, int64_t c, double eps,
                                  void* mean, void* rstd, cudaStream_t s);

// y = ((x - mean[ch]) * rstd[ch]) * weight[ch] + bias[ch], in C, rounded once to t; weight and
// bias: [c] C, or null (skipped).
void launch_batch_norm_apply(DType t, const void* x, const void* mean, const void* rstd, const void* weight,
                             const void* bias, void* y, int64_t n, int64_t c, int64_t hw, cudaStream_t s);

// _batch_norm_backward (Note [Fused batch_norm backward]): g and x dense [n, c, hw] of dtype t;
// weight, running_mean, running_var: [c] C or null (the running ones read only in evaluation);
// part: scratch of 5 * c * splits C values, coef of 4 * c. Writes grad_x (t, as x), grad_weight
// = sum g * xhat and grad_bias = sum g ([c] C). Two reads of x and g: the per-channel moments
// of both in one pass, then grad_x.
void launch_batch_norm_backward(DType t, const void* g, const void* x, const void* weight, const void* running_mean,
                                const void* running_var, bool training, double eps, int64_t n, int64_t c, int64_t hw,
                                int64_t splits, void* part, void* coef, void* grad_x, void* grad_weight,
                                void* grad_bias, cudaStream_t s);

}  // namespace kiln::cuda
