// Plain descriptions of the fused launches of fused.cu (softmax, layer_norm, foreach), built
// by fused_ops.cpp: no Tensor here, as elementwise.h.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

#include "backend/cuda/elementwise.h"
#include "kiln/dtype.h"

namespace kiln::cuda {

// softmax / log_softmax of dense x [outer, n, inner] over the middle dim, x and y of floating
// dtype t, computed in its opmath type (float for Half/BFloat16) as the CPU's softmax_kernel.
// inner == 1: a warp per row (n <= 1024) or a block per row; else a thread per column.
void launch_softmax(bool log, DType t, const void* x, void* y, int64_t outer, int64_t n, int64_t inner, cudaStream_t s);

// layer_norm of dense x [rows, n] over each row (two passes in opmath, as the CPU kernel);
// weight and bias: dense [n] in the opmath dtype of t (float, or double for Float64), or null.
void launch_layer_norm(DType t, const void* x, const void* weight, const void* bias, void* y, int64_t rows, int64_t n,
                       double eps, cudaStream_t s);

// _softmax_backward_data (Note [Fused norm and activation backward]) of dense g and y [outer, n,
// inner] of floating dtype t into gx, split as launch_softmax.
void launch_softmax_backward(bool log, DType t, const void* g, const void* y, void* gx, int64_t outer, int64_t n,
                             int64_t inner, cudaStream_t s);

// _layer_norm_backward (Note [Fused norm and activation backward]) of dense g and x [rows, n] of
// floating dtype t. weight (or null), gw and gb: dense [n] of t's opmath dtype C; scratch, of C:
// row_stats [2 * rows], part [2 * splits * n] with splits from layer_norm_backward_splits.
int64_t layer_norm_backward_splits(DType t, int64_t rows, int64_t n);
void launch_layer_norm_backward(DType t, const void* g, const void* x, const void* weight, void* gx, void* gw, void* gb,
                                void* row_stats, void* part, int64_t rows, int64_t n, int64_t splits, double eps,
                                cudaStream_t s);

// Note [CUDA foreach]
// The foreach ops' elementwise functors, one per op, shared by the multi-tensor launch and the
// strided per-tensor fallback; each is the single-tensor op's functor with its scalar converted
// as that op converts it (backend/cpu/foreach.cpp), so a foreach step equals the loop of
// single-tensor CUDA ops bit for bit.
enum class ForeachOp { Neg, Sqrt, AddAlpha, AddScalar, MulScalar, DivScalar, Addcmul, Addcdiv, Lerp, Maximum };
// Inputs per op (the written tensor not counted).
int foreach_arity(ForeachOp op);

// alpha of _foreach_add(_) as its opmath types take it (Scalar::to<float> / to<double>).
struct ForeachAlpha {
  float f = 1;
  double d = 1;
};

// One dense tensor of a multi-tensor launch: data[0] is written, data[1..arity] read, all of
// numel elements of one dtype; scalar: the op's per-tensor value (unused by ops without one).
struct ForeachItem {
  void* data[4] = {};
  int64_t numel = 0;
  double scalar = 0;
};

// Every item (dtype t, floating) in as few launches as the kernel's argument table allows.
void launch_foreach(ForeachOp op, DType t, const ForeachItem* items, int64_t count, ForeachAlpha alpha, cudaStream_t s);
// One tensor through the strided elementwise kernel (operand 0 written), for layouts that are
// not dense.
void launch_foreach_strided(ForeachOp op, DType t, const ElementwiseArgs& a, double scalar, ForeachAlpha alpha,
                            cudaStream_t s);

// _fused_adam_ (Note [Fused Adam]): one dense position, data = p, g, m, v and vmax (null
// without amsgrad), all of numel elements; its step size lr / (1 - beta1^t) and sqrt(1 - beta2^t).
struct AdamItem {
  void* data[5] = {};
  int64_t numel = 0;
  double step_size = 0, bc2_sqrt = 0;
};
// The op's other attrs.
struct AdamScalars {
  double lr, beta1, beta2, eps, weight_decay;
  bool amsgrad, maximize, decoupled;
};
// Every item (dtype t, floating) in multi-tensor launches, as launch_foreach; 16-byte loads and
// stores where a tensor's pointers are 16-byte aligned.
void launch_fused_adam(DType t, const AdamScalars& h, const AdamItem* items, int64_t count, cudaStream_t s);

// tril / triu on dense out [mats, n, m] (elements of `itemsize` bytes), already holding x:
// zeroes what the triangle drops (tril keeps j <= i + k, triu keeps j >= i + k). Zero is the
// all-zero bit pattern in every dtype.
void launch_tri_zero(bool lower, int64_t k, int itemsize, void* out, int64_t mats, int64_t n, int64_t m,
                     cudaStream_t s);

// one_hot of `count` int64 class values into dense int64 out [count, classes] (zeroed here).
// bad: one device int64 holding `count`; the smallest position whose value is outside
// [0, classes) is left there (atomicMin), so the host can name the CPU's first bad value.
void launch_one_hot(const int64_t* idx, int64_t count, int64_t classes, int64_t* out, int64_t* bad, cudaStream_t s);

}  // namespace kiln::cuda
