// Plain descriptions of the fused cross_entropy launches of cross_entropy.cu (Note [Fused
// cross_entropy] in ops/loss_fused.cpp), built by cross_entropy_ops.cpp. x is dense [n, c] of
// floating dtype t; target dense [n] int64; per-class weights dense [c] in the opmath dtype of t
// ("C": float, double for Float64) or null; wsum a device C scalar, the weights' sum (null:
// unweighted, c).
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

#include "kiln/dtype.h"

namespace kiln::cuda {

// loss [n], target_weight [n] and logsumexp [n] in C; bad: two int64 on the device, set to
// (1, target) for a target that is neither a class index nor ignore_index (loss NaN there).
void launch_fused_cross_entropy(DType t, const void* x, const int64_t* target, const void* weight, const void* wsum,
                                int64_t n, int64_t c, int64_t ignore_index, double label_smoothing, void* loss,
                                void* target_weight, void* lse, int64_t* bad, cudaStream_t s);

// grad_x [n, c] in t from grad_loss [n] (C), logsumexp [n] (C) and grad_lse [n] (C, or null); bad
// as the forward's.
void launch_fused_cross_entropy_backward(DType t, const void* grad_loss, const void* x, const int64_t* target,
                                         const void* weight, const void* wsum, const void* lse, const void* grad_lse,
                                         int64_t n, int64_t c, int64_t ignore_index, double label_smoothing,
                                         void* grad_x, int64_t* bad, cudaStream_t s);

}  // namespace kiln::cuda
