// The fused attention kernels (attention.cu) behind _scaled_dot_product_flash_attention and its
// backward (Note [Flash attention]); the host side is attention_ops.cpp. Every pointer is a dense
// row-major array on the current device: q [N, L, E], k [N, S, E], v [N, S, Ev], out [N, L, Ev],
// logsumexp [N, L] in the opmath type (float; double for float64).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kiln/dtype.h"

namespace kiln::cuda {

// Strides in elements of an operand the tensor-core kernels read in place: batch entry
// n = b H + h at b batch + h head, rows `row` apart, the head dim contiguous.
struct FlashLayout {
  int64_t batch, head, row;
};
struct FlashShape {
  int64_t N, L, S, E, Ev;
  bool causal;
  double scale;
  // Unless `strided`, every pointer is dense as above. The tensor-core kernels also take strided
  // q, k, v, grad_out and out (the outputs stay dense); the plain kernels do not.
  bool strided = false;
  int64_t H = 1;
  FlashLayout q{}, k{}, v{}, go{}, o{};
};

// Whether the tensor-core kernels take this shape and dtype (E == Ev; float16/bfloat16: E a
// multiple of 16 up to 128; float32: a multiple of 8 up to 64); others run the plain kernels,
// which are exact but slow.
bool flash_tensor_cores(DType t, const FlashShape& f);

void launch_flash_forward(DType t, const FlashShape& f, const void* q, const void* k, const void* v, void* out,
                          void* lse, cudaStream_t s);
// grad_lse may be null (zero). `scratch` holds N * L opmath values (the rows' D terms).
void launch_flash_backward(DType t, const FlashShape& f, const void* grad_out, const void* q, const void* k,
                           const void* v, const void* out, const void* lse, const void* grad_lse, void* grad_q,
                           void* grad_k, void* grad_v, void* scratch, cudaStream_t s);

}  // namespace kiln::cuda
